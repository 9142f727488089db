package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// requestIDBackend answers with the request IDs it received (every line
// of X-Request-Id, joined by "|") and one of its own in the response.
func requestIDBackend(t *testing.T) string {
	return h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "the target's own")
		io.WriteString(w, strings.Join(r.Header.Values("X-Request-Id"), "|"))
	}))
}

// TestRequestID: a site with RequestIDHeader gives each request a new ID,
// never the client's: the target gets it (alone) in the header, the
// client gets it back (in place of the target's), on the proxy's own
// answers too (a route's answer, no route, 429), and the access log and
// the log line of a failed request carry it. Over HTTP/1.1 and HTTP/2.
func TestRequestID(t *testing.T) {
	addr := requestIDBackend(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", addr)},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, RequestIDHeader: "x-request-id", Routes: []RouteConfig{
			{Path: "/answer", Respond: &RespondConfig{Status: 200, Body: "ok"}},
			{Path: "/limited", Respond: &RespondConfig{Status: 200, Body: "ok"}, RateLimit: &RateLimitConfig{Interval: time.Hour}},
			{PathPrefix: "/app/", Upstream: "u"},
		}}},
		AccessLog: AccessLogConfig{Path: logPath, Format: "json"},
	}
	var errLog syncBuffer
	for _, h2 := range []bool{false, true} {
		o := frontOpts{logger: slog.New(slog.NewTextHandler(&errLog, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		c := testClient(t)
		if h2 {
			o.state, c = &frontdoor.ConnState{ALPN: "h2"}, h2cClient(t)
		}
		f := newFront(t, cfg, o)
		do := func(path string) (*http.Response, string) {
			req, _ := http.NewRequest("GET", f.url+path, nil)
			req.Host = "example.test"
			req.Header.Add("X-Request-Id", "forged-by-the-client")
			req.Header.Add("X-Request-Id", "and-another")
			res, err := c.Do(req)
			if err != nil {
				t.Fatalf("h2 %v %s: %v", h2, path, err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			return res, string(b)
		}
		seen := map[string]string{}
		for _, path := range []string{"/app/x", "/app/y", "/answer", "/nowhere", "/limited", "/limited"} {
			res, body := do(path)
			ids := res.Header.Values("X-Request-Id")
			if len(ids) != 1 || !generatedID.MatchString(ids[0]) {
				t.Errorf("h2 %v %s (%d): X-Request-Id %q, want one new ID", h2, path, res.StatusCode, ids)
				continue
			}
			if prev, dup := seen[ids[0]]; dup {
				t.Errorf("h2 %v %s: ID %s given to %s too", h2, path, ids[0], prev)
			}
			seen[ids[0]] = path
			if strings.HasPrefix(path, "/app/") && body != ids[0] {
				t.Errorf("h2 %v %s: the target got X-Request-Id %q, want only %q", h2, path, body, ids[0])
			}
			if path == "/nowhere" && res.StatusCode != 404 || path == "/limited" && res.StatusCode != 200 && res.StatusCode != 429 {
				t.Errorf("h2 %v %s: status %d", h2, path, res.StatusCode)
			}
		}
		f.p.AccessLog().Flush()
		data, _ := os.ReadFile(logPath)
		logged := 0
		for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
			var e struct {
				URI       string `json:"uri"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("access log line %q: %v", line, err)
			}
			if p, ok := seen[e.RequestID]; ok && p == e.URI {
				logged++
			}
		}
		if logged != len(seen) {
			t.Errorf("h2 %v: %d of %d requests logged with the ID they were given:\n%s", h2, logged, len(seen), data)
		}
		for id, path := range seen {
			if path == "/nowhere" && !strings.Contains(errLog.String(), "request_id="+id) {
				t.Errorf("h2 %v: the log line of the 404 lacks request_id=%s:\n%s", h2, id, errLog.String())
			}
		}
		os.Remove(logPath)
		f.p.AccessLog().Reopen()
	}
}

// TestRequestIDFromTrustedProxy: the ID a trusted proxy in front sent is
// kept when well formed (the chain logs one ID); a malformed one, or one
// from a peer that is not trusted, is replaced. A site without
// RequestIDHeader passes the field on as it came.
func TestRequestIDFromTrustedProxy(t *testing.T) {
	addr := requestIDBackend(t)
	site := func(trusted []string) Config {
		return Config{TrustedProxies: trusted, Upstreams: []UpstreamConfig{upstream("u", addr)},
			Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, RequestIDHeader: "X-Request-ID", Routes: []RouteConfig{{Upstream: "u"}}}}}
	}
	trusted := newFront(t, site([]string{"127.0.0.0/8", "::1"}), frontOpts{})
	untrusted := newFront(t, site(nil), frontOpts{})
	plainCfg := site(nil)
	plainCfg.Sites[0].RequestIDHeader = ""
	plain := newFront(t, plainCfg, frontOpts{})
	c := testClient(t)
	for _, tc := range []struct {
		name string
		f    *front
		sent string
		kept bool
	}{
		{"trusted", trusted, "Root=1-67891233-abcdef012345678912345678", true},
		{"trusted, a quote in it", trusted, `abc"def`, false},
		{"trusted, too long", trusted, strings.Repeat("a", maxRequestIDLen+1), false},
		{"trusted, the longest", trusted, strings.Repeat("a", maxRequestIDLen), true},
		{"not trusted", untrusted, "Root=1-67891233-abcdef012345678912345678", false},
	} {
		req, _ := http.NewRequest("GET", tc.f.url+"/", nil)
		req.Host = "example.test"
		req.Header.Set("X-Request-Id", tc.sent)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		id := res.Header.Get("X-Request-Id")
		switch {
		case tc.kept && (id != tc.sent || string(b) != tc.sent):
			t.Errorf("%s: the client got %q, the target %q; want the proxy's %q kept", tc.name, id, b, tc.sent)
		case !tc.kept && (!generatedID.MatchString(id) || string(b) != id):
			t.Errorf("%s: the client got %q, the target %q; want one new ID for both", tc.name, id, b)
		}
	}
	req, _ := http.NewRequest("GET", plain.url+"/", nil)
	req.Host = "example.test"
	req.Header.Set("X-Request-Id", "the client's")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "the client's" || res.Header.Get("X-Request-Id") != "the target's own" {
		t.Errorf("no request_id: the target got %q, the client %q; want both passed on", b, res.Header.Get("X-Request-Id"))
	}
}

// TestCheckRequestIDHeader: a name that is not a field name, or one HTTP
// or the proxy gives a meaning, is refused.
func TestCheckRequestIDHeader(t *testing.T) {
	for _, name := range []string{"X-Request-ID", "x-correlation-id", "Request-Id"} {
		if err := CheckRequestIDHeader(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"", "X Request", "x-forwarded-for", "X-Real-IP", "connection", "Host", "Content-Length", "X-SSL-Client-Verify", "Set-Cookie",
		// As a backend that reads '_' as '-' (CGI, WSGI, PHP) reads them.
		"X_Real_IP", "x_forwarded_for", "Content_Length", "Transfer_Encoding", "X_Ssl_Client_S_Dn",
		// Read as a proxy's account of the client (TrustedOnlyRequestHeaders).
		"True-Client-IP", "X-Forwarded-Port", "x_client_ip"} {
		if err := CheckRequestIDHeader(name); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
}

// TestRequestIDOnUpgrades: a protocol switch carries the proxy's ID to
// the target and back to the client in place of the target's, over
// HTTP/1.1 (101) and HTTP/2 (an extended CONNECT's 200).
func TestRequestIDOnUpgrades(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestRequestIDOnUpgrades", "GODEBUG=http2xconnect=1")
		return
	}
	addr := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := readWholeRequest(c, br)
		if err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Request-Id: the target's own\r\n"+
			"Sec-WebSocket-Accept: "+websocketAccept(req.Header.Get("Sec-WebSocket-Key"))+"\r\nX-Got: "+
			strings.Join(req.Header.Values("X-Request-Id"), "|")+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(testwait.Bound(2 * time.Second)))
		io.Copy(io.Discard, c)
	})
	cfg := proxyTo(addr)
	cfg.Sites[0].RequestIDHeader = "X-Request-ID"
	check := func(proto string, id, got []string) {
		t.Helper()
		if len(id) != 1 || !generatedID.MatchString(id[0]) || len(got) != 1 || got[0] != id[0] {
			t.Errorf("%s: the client got X-Request-Id %q, the target %q; want one new ID for both", proto, id, got)
		}
	}

	f := newFront(t, cfg, frontOpts{})
	c := dialRaw(t, f.addr)
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Request-Id: forged\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != 101 {
		t.Fatalf("HTTP/1.1 upgrade: %v %v", res, err)
	}
	check("HTTP/1.1", res.Header.Values("X-Request-Id"), res.Header.Values("X-Got"))

	f2 := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	fr := extendedConnect(t, f2.addr)
	var status string
	var id, got []string
	dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) {
		switch hf.Name {
		case ":status":
			status = hf.Value
		case "x-request-id":
			id = append(id, hf.Value)
		case "x-got":
			got = append(got, hf.Value)
		}
	})
	for status == "" {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("extended CONNECT: %v", err)
		}
		if hf, ok := fm.(*http2.HeadersFrame); ok && hf.StreamID == 1 {
			if _, err := dec.Write(hf.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if status != "200" {
		t.Fatalf("extended CONNECT: status %s", status)
	}
	check("HTTP/2", id, got)
}

// TestRequestIDNotAround: the client's ID reaches the target neither
// spelled with '_' (CGI, WSGI and PHP read X_Request_Id as X-Request-Id)
// nor as a request trailer on a route that passes trailers, and the
// target's own does not reach the client as a response trailer.
func TestRequestIDNotAround(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		var got []string
		for _, h := range []http.Header{r.Header, r.Trailer} {
			for k, vv := range h {
				if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), "x-request-id") {
					got = append(got, vv...)
				}
			}
		}
		sort.Strings(got)
		w.Header().Set("Trailer", "X-Request-Id")
		io.WriteString(w, strings.Join(got, "|"))
		w.Header().Set("X-Request-Id", "the target's own")
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	cfg.Sites[0].RequestIDHeader = "X-Request-Id"
	cfg.Sites[0].Routes[0].AllowTrailers = true
	f := newFront(t, cfg, frontOpts{})
	req, _ := http.NewRequest("POST", f.url+"/", io.NopCloser(strings.NewReader("hello")))
	req.Host = "example.test"
	req.ContentLength = -1
	req.Header["X_request_id"] = []string{"forged-underscored"}
	req.Trailer = http.Header{"X-Request-Id": {"forged-trailer"}}
	res, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	id := res.Header.Get("X-Request-Id")
	if !generatedID.MatchString(id) || string(b) != id {
		t.Errorf("the target got request IDs %q, want only the proxy's %q", b, id)
	}
	if v := res.Trailer.Values("X-Request-Id"); len(v) != 0 {
		t.Errorf("the target's ID %q reached the client as a trailer", v)
	}
}

// TestRequestIDOnMisdirected: a 421 (a request for another site on a
// connection made for this one) carries an ID like the site's other
// answers, in the response and the access log.
func TestRequestIDOnMisdirected(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "access.log")
	cfg := Config{Sites: []SiteConfig{
		{Name: "one", ServerNames: []string{"one.test"}, RequestIDHeader: "X-Request-Id", Routes: []RouteConfig{{Respond: &RespondConfig{Body: "one"}}}},
		{Name: "two", ServerNames: []string{"two.test"}, Routes: []RouteConfig{{Respond: &RespondConfig{Body: "two"}}}},
	}, AccessLog: AccessLogConfig{Path: logPath, Format: "json"}}
	st := frontdoor.ConnState{Site: "one", SNI: "one.test", Protocol: frontdoor.ProtoTLCP}
	f := newFront(t, cfg, frontOpts{state: &st})
	code, _, h := get(t, testClient(t), f.url+"/", "Host", "two.test")
	id := h.Get("X-Request-Id")
	if code != 421 || !generatedID.MatchString(id) {
		t.Fatalf("421: %d, X-Request-Id %q, want a new ID", code, id)
	}
	f.p.AccessLog().Flush()
	data, _ := os.ReadFile(logPath)
	if !strings.Contains(string(data), `"request_id":"`+id+`"`) {
		t.Errorf("the access log lacks request_id %s:\n%s", id, data)
	}
}
