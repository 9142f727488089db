package proxy

import (
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// gRPC through the proxy, spoken by hand: messages are 5-byte
// length-prefixed (gRPC over HTTP/2, PROTOCOL-HTTP2.md), the status is
// the grpc-status field of the trailers, or of the only HEADERS frame
// of a Trailers-Only response (one that ends the stream).

// grpcMsg frames payload as one uncompressed gRPC message.
func grpcMsg(payload string) []byte {
	b := make([]byte, 5+len(payload))
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	copy(b[5:], payload)
	return b
}

// h2Event is what a raw client saw of a stream: a field section (with
// whether it ended the stream), DATA (its length and END_STREAM), or a
// reset.
type h2Event struct {
	kind   string // "headers", "data", "rst"
	fields map[string]string
	n      int
	end    bool
	code   http2.ErrCode
}

// h2Events reads frames until stream id ends (END_STREAM or RST_STREAM)
// or the connection does, and returns what the stream got. It answers
// nothing: a test that needs WINDOW_UPDATEs sends them itself.
func h2Events(t *testing.T, fr *http2.Framer, id uint32) []h2Event {
	t.Helper()
	var evs []h2Event
	var cur map[string]string
	dec := hpack.NewDecoder(4096, func(hf hpack.HeaderField) { cur[hf.Name] = hf.Value })
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			return append(evs, h2Event{kind: "conn " + err.Error()})
		}
		switch fm := fm.(type) {
		case *http2.HeadersFrame:
			cur = map[string]string{}
			dec.Write(fm.HeaderBlockFragment())
			if fm.StreamID != id {
				continue
			}
			evs = append(evs, h2Event{kind: "headers", fields: cur, end: fm.StreamEnded()})
			if fm.StreamEnded() {
				return evs
			}
		case *http2.DataFrame:
			if fm.StreamID != id {
				continue
			}
			evs = append(evs, h2Event{kind: "data", n: len(fm.Data()), end: fm.StreamEnded()})
			if fm.StreamEnded() {
				return evs
			}
		case *http2.RSTStreamFrame:
			if fm.StreamID == id {
				return append(evs, h2Event{kind: "rst", code: fm.ErrCode})
			}
		case *http2.GoAwayFrame:
			return append(evs, h2Event{kind: "goaway", code: fm.ErrCode})
		}
	}
}

// grpcStatus is the gRPC status a client takes from evs: the
// grpc-status of the field section that ended the stream; "" when the
// stream ended without one (grpc-go: INTERNAL, "server closed the stream
// without sending trailers") or was reset.
func grpcStatus(evs []h2Event) string {
	if len(evs) == 0 {
		return ""
	}
	last := evs[len(evs)-1]
	if last.kind != "headers" || !last.end {
		return ""
	}
	return last.fields["grpc-status"]
}

// grpcFront starts a proxy for an h2c upstream at addr whose client
// connections speak HTTP/2 (as after ALPN h2).
func grpcFront(t *testing.T, addr string) *front {
	return grpcFrontObserved(t, addr, nil)
}

// grpcFrontObserved is grpcFront reporting to obs.
func grpcFrontObserved(t *testing.T, addr string, obs Observer) *front {
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
	}
	return newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}, obs: obs})
}

// grpcCall opens stream id on fr with a gRPC request for path; with msg
// it sends that message and ends the stream.
func grpcCall(t *testing.T, fr *http2.Framer, id uint32, addr, path string, msg []byte) {
	t.Helper()
	block := h2Block(":method", "POST", ":scheme", "http", ":path", path, ":authority", addr,
		"content-type", "application/grpc", "te", "trailers")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if msg != nil {
		if err := fr.WriteData(id, true, msg); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGRPCTrailersOnly: a backend's Trailers-Only answer (a single
// HEADERS frame with END_STREAM carrying grpc-status, as every gRPC
// server sends for an error before any message: UNIMPLEMENTED,
// UNAUTHENTICATED...) reaches the client with its status in a field
// section that ends the stream. Headers flushed early, then an empty
// DATA frame with END_STREAM, would lose it: the client sees a stream
// without trailers (INTERNAL), not the backend's error.
func TestGRPCTrailersOnly(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "12")
		w.Header().Set("Grpc-Message", "unknown method")
		w.WriteHeader(http.StatusOK)
	}))
	f := grpcFront(t, addr)
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/svc.Echo/Nope", grpcMsg("hi"))
	evs := h2Events(t, fr, 1)
	if got := grpcStatus(evs); got != "12" {
		t.Fatalf("grpc-status %q, want 12; the stream got %+v", got, evs)
	}
	if msg := evs[len(evs)-1].fields["grpc-message"]; !strings.Contains(msg, "unknown method") {
		t.Errorf("grpc-message %q", msg)
	}
}

// TestGRPCBackendResetMidStream: a backend that fails after a message
// (it resets its stream) makes the client's stream fail too (RST_STREAM),
// never end in order, which a client would read as a complete stream.
func TestGRPCBackendResetMidStream(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(http.StatusOK)
		w.Write(grpcMsg("one"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	f := grpcFront(t, addr)
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/svc.Feed/Watch", grpcMsg("hi"))
	evs := h2Events(t, fr, 1)
	if last := evs[len(evs)-1]; last.kind != "rst" {
		t.Fatalf("the stream ended %+v, want a reset; got %+v", last, evs)
	}
}

// TestGRPCClientResetCancelsUpstream: a client's RST_STREAM on a
// server-streaming call ends the upstream stream (the backend's request
// context), while the backend is idle between messages.
func TestGRPCClientResetCancelsUpstream(t *testing.T) {
	gone := make(chan struct{})
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		w.Write(grpcMsg("one"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	f := grpcFront(t, addr)
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/svc.Feed/Watch", grpcMsg("hi"))
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := fm.(*http2.DataFrame); ok && d.StreamID == 1 && len(d.Data()) > 0 {
			break
		}
	}
	resetAndWait(t, fr, gone)
}

// TestGRPCEarlyAnswer: a backend that answers a client-streaming call
// in full (message and trailers) before the client ended its stream, as
// gRPC servers do for an error, gets its status to the client, whose
// stream is still open.
func TestGRPCEarlyAnswer(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [7]byte
		io.ReadFull(r.Body, b[:])
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		w.Write(grpcMsg("no"))
		w.Header().Set("Grpc-Status", "9")
		w.Header().Set("Grpc-Message", "enough")
	}))
	obs := newEventObserver()
	f := grpcFrontObserved(t, addr, obs)
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/svc.Up/Load", nil)
	if err := fr.WriteData(1, false, grpcMsg("hi")); err != nil {
		t.Fatal(err)
	}
	evs := h2Events(t, fr, 1)
	if got := grpcStatus(evs); got != "9" {
		t.Fatalf("grpc-status %q, want 9; the stream got %+v", got, evs)
	}
	if d := obs.downs(); len(d) != 0 {
		t.Errorf("health events %v: an answer in full is no target failure", d)
	}
}

// TestGRPCBackendResetMidBidi: a backend that fails mid-stream while the
// client's half of a bidirectional call is still open makes the client's
// stream fail at once, not when the client gives up; the target's
// failure is charged to the target, not taken for the client's body
// stalling.
func TestGRPCBackendResetMidBidi(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [7]byte
		io.ReadFull(r.Body, b[:])
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		w.Write(grpcMsg("one"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	obs := newEventObserver()
	f := grpcFrontObserved(t, addr, obs)
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/svc.Chat/Talk", nil)
	if err := fr.WriteData(1, false, grpcMsg("hi")); err != nil {
		t.Fatal(err)
	}
	evs := h2Events(t, fr, 1)
	if last := evs[len(evs)-1]; last.kind != "rst" {
		t.Fatalf("the stream ended %+v, want a reset; got %+v", last, evs)
	}
	if d := obs.downs(); len(d) != 1 {
		t.Errorf("health events %v, want the target down", d)
	}
}

// TestGRPCClientResetBeforeAnswer: a client's RST_STREAM while the
// backend has not answered yet (its headers come with its first message)
// ends the upstream stream too.
func TestGRPCClientResetBeforeAnswer(t *testing.T) {
	gone := make(chan struct{})
	arrived := make(chan struct{})
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(gone)
	}))
	f := grpcFront(t, addr)
	fr, _ := rawH2(t, f.addr)
	grpcCall(t, fr, 1, f.addr, "/svc.Feed/Watch", nil)
	fr.WriteData(1, false, grpcMsg("hi"))
	select {
	case <-arrived:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the call never reached the backend")
	}
	resetAndWait(t, fr, gone)
}

// TestAccessLogGRPCStatus: a gRPC call fails with HTTP status 200, so the
// access log's grpc_status field gives its grpc-status: from the trailers
// (announced or not, and over one the header had too), from a
// Trailers-Only response's only field section, and "-" for a response
// that is not gRPC.
func TestAccessLogGRPCStatus(t *testing.T) {
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/svc/Trailers":
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.WriteHeader(200)
			w.Write(grpcMsg("reply"))
			w.Header().Set("Grpc-Status", "5")
		case "/svc/Undeclared": // a trailer the header did not announce
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(200)
			w.Write(grpcMsg("reply"))
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "7")
		case "/svc/Both": // a status in the header, the call's in the trailers
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "0")
			w.WriteHeader(200)
			w.Write(grpcMsg("reply"))
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "13")
		case "/svc/BothDeclared":
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.Header().Set("Grpc-Status", "0")
			w.WriteHeader(200)
			w.Write(grpcMsg("reply"))
			w.Header().Set("Grpc-Status", "14")
		case "/svc/Only":
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "12")
			w.WriteHeader(200)
		default:
			io.WriteString(w, "page")
		}
	}))
	path := filepath.Join(t.TempDir(), "access.log")
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
		AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{uri} {status} {grpc_status}"},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	c := h2cClient(t)
	for _, p := range []string{"/svc/Trailers", "/svc/Undeclared", "/svc/Both", "/svc/BothDeclared", "/svc/Only", "/page"} {
		req, _ := http.NewRequest("POST", f.url+p, strings.NewReader(string(grpcMsg("hi"))))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	f.p.AccessLog().Flush()
	data, _ := os.ReadFile(path)
	want := "/svc/Trailers 200 5\n/svc/Undeclared 200 7\n/svc/Both 200 13\n/svc/BothDeclared 200 14\n/svc/Only 200 12\n/page 200 -\n"
	if string(data) != want {
		t.Errorf("access log:\n%s\nwant:\n%s", data, want)
	}
}

// resetAndWait cancels the client's stream 1 and waits until the backend's
// handler saw its stream end (gone).
func resetAndWait(t *testing.T, fr *http2.Framer, gone <-chan struct{}) {
	t.Helper()
	fr.WriteRSTStream(1, http2.ErrCodeCancel)
	select {
	case <-gone:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the backend's stream outlived the client's reset")
	}
}

// TestGRPCNotCompressed: a route whose compress lists application/*
// (or a gRPC type) sends gRPC answers as they came. gRPC messages are
// length-prefixed frames a client reads from the body itself, compressed
// per message when at all (grpc-encoding); a client that ignores
// Content-Encoding (grpc-go does) would read the gzip stream as frames
// and fail the call. The route's other types of that pattern still are
// compressed, and the call's status still comes in its trailers.
func TestGRPCNotCompressed(t *testing.T) {
	reply := grpcMsg(strings.Repeat("reply ", 1000))
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/page.json" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, strings.Repeat(`{"a": 1}`, 1000))
			return
		}
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(http.StatusOK)
		w.Write(reply)
		w.Header().Set("Grpc-Status", "0")
	}))
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites: oneSite(
			RouteConfig{PathPrefix: "/listed.", Upstream: "u", Compress: &CompressConfig{Types: []string{"application/grpc", "application/grpc+proto"}}},
			RouteConfig{Upstream: "u", Compress: &CompressConfig{Types: []string{"application/*"}}}),
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	c := h2cClient(t)
	call := func(path, ctype string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", f.url+path, strings.NewReader(string(grpcMsg("hi"))))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Te", "trailers")
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, body
	}
	if res, _ := call("/page.json", "application/json"); res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("a JSON answer on the application/* route went %q, want gzip", res.Header.Get("Content-Encoding"))
	}
	for _, tc := range []struct{ path, ctype string }{
		{"/svc.Echo/Say", "application/grpc"},
		{"/svc.Echo/Say", "application/grpc+proto"},
		{"/svc.Echo/Say", "Application/gRPC+proto; charset=x"},
		{"/listed.Echo/Say", "application/grpc"},
		{"/listed.Echo/Say", "application/grpc+proto"},
	} {
		res, body := call(tc.path, tc.ctype)
		if ce := res.Header.Get("Content-Encoding"); ce != "" || string(body) != string(reply) {
			t.Errorf("%s %s: Content-Encoding %q and %d bytes, want the target's %d as they came", tc.path, tc.ctype, ce, len(body), len(reply))
		}
		if got := res.Trailer.Get("Grpc-Status"); got != "0" {
			t.Errorf("%s %s: grpc-status %q, want 0", tc.path, tc.ctype, got)
		}
	}
}

// TestTrailersOfSizedH2AnswerToHTTP1: an HTTP/2 target may send a
// content-length and trailers (RFC 9113 §8.1); an HTTP/1.1 client gets
// trailers only after a chunked body (RFC 9112 §7.1.2), so the answer
// goes chunked to it and its trailers (a gRPC call's status) reach it,
// rather than a body of that length and the trailers dropped.
func TestTrailersOfSizedH2AnswerToHTTP1(t *testing.T) {
	reply := grpcMsg("hello")
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		w.Write(reply)
		w.Header().Set("Grpc-Status", "3")
		w.Header().Set("Grpc-Message", "bad%20argument")
	}))
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "u", Targets: []TargetConfig{{Address: addr}}, Protocol: "h2c"}},
		Sites:     oneSite(RouteConfig{Upstream: "u"}),
	}
	f := newFront(t, cfg, frontOpts{})
	msg := string(grpcMsg("hi"))
	res, c, br := rawExchange(t, f.addr, "POST /svc.Echo/Say HTTP/1.1\r\nHost: example.test\r\nContent-Type: application/grpc\r\nTE: trailers\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n"+strconv.FormatInt(int64(len(msg)), 16)+"\r\n"+msg+"\r\n0\r\n\r\n")
	if res.StatusCode != 200 || res.ContentLength != -1 {
		t.Errorf("status %d, Content-Length %d, want 200 chunked", res.StatusCode, res.ContentLength)
	}
	if got, msg := res.Trailer.Get("Grpc-Status"), res.Trailer.Get("Grpc-Message"); got != "3" || msg != "bad%20argument" {
		t.Errorf("trailers %v, want grpc-status 3 and grpc-message bad%%20argument", res.Trailer)
	}
	// The connection still frames the next exchange.
	io.WriteString(c, "GET /other HTTP/1.1\r\nHost: example.test\r\n\r\n")
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the next exchange: %v", err)
	}
	res.Body.Close()
}
