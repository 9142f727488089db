package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

func sampleEntry() *LogEntry {
	return &LogEntry{
		Time:             time.Date(2026, 11, 30, 9, 30, 1, 250e6, time.UTC),
		Client:           "203.0.113.7",
		Site:             "portal",
		Route:            "api",
		Host:             "portal.example.cn",
		Method:           "GET",
		URI:              "/a?b=\"c\"\n",
		Proto:            "HTTP/1.1",
		Status:           200,
		BytesIn:          12,
		BytesOut:         3456,
		Duration:         12500 * time.Microsecond,
		Upstream:         "app",
		UpstreamAddr:     "127.0.0.1:8080",
		UpstreamDuration: 10 * time.Millisecond,
		TLS:              true,
		TLSProtocol:      "NTLSv1.1",
		Cipher:           "ECC-SM2-SM4-GCM-SM3",
		Resumed:          true,
		HandshakeTime:    2500 * time.Microsecond,
		SNI:              "portal.example.cn",
		ClientSubject:    "CN=client,O=Example",
		UserAgent:        "curl/8",
	}
}

func TestAccessLogFormats(t *testing.T) {
	tests := []struct {
		cfg  AccessLogConfig
		want string
	}{
		{AccessLogConfig{}, `203.0.113.7 - - [30/Nov/2026:09:30:01 +0000] "GET /a?b=\x22c\x22\x0a HTTP/1.1" 200 3456 "-" "curl/8" NTLSv1.1 ECC-SM2-SM4-GCM-SM3 r sni=portal.example.cn hs_ms=2.500 rt=0.013 up=127.0.0.1:8080 ut=0.010 site=portal dn="CN=client,O=Example"` + "\n"},
		{AccessLogConfig{Format: "template", Template: "{time} {client} {status} {bytes_in}/{bytes_out} {tls_protocol} {session_reused} {handshake_ms} {upstream}"},
			"2026-11-30T09:30:01.250Z 203.0.113.7 200 12/3456 NTLSv1.1 r 2.500 app\n"},
	}
	for _, tt := range tests {
		var buf syncBuffer
		l, err := NewAccessLogWriter(&buf, tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		l.Log(sampleEntry())
		l.Close()
		if got := buf.String(); got != tt.want {
			t.Errorf("format %q:\n got %s\nwant %s", tt.cfg.Format, got, tt.want)
		}
	}
	var buf syncBuffer
	l, _ := NewAccessLogWriter(&buf, AccessLogConfig{Format: "json"})
	e := sampleEntry()
	e.HandshakeTime = -1
	l.Log(e)
	l.Close()
	var m map[string]any
	if err := json.Unmarshal([]byte(buf.String()), &m); err != nil {
		t.Fatalf("json line %q: %v", buf.String(), err)
	}
	if m["uri"] != "/a?b=\"c\"\n" || m["status"] != float64(200) || m["session_reused"] != true || m["handshake_ms"] != nil || m["cipher"] != "ECC-SM2-SM4-GCM-SM3" {
		t.Errorf("json fields %v", m)
	}
	if len(m) != len(AccessLogFields) {
		t.Errorf("json has %d fields, want %d", len(m), len(AccessLogFields))
	}
}

func TestAccessLogTemplateErrors(t *testing.T) {
	for _, tmpl := range []string{"{nope}", "{client", ""} {
		if _, err := NewAccessLogWriter(&syncBuffer{}, AccessLogConfig{Format: "template", Template: tmpl}); err == nil {
			t.Errorf("template %q accepted", tmpl)
		}
	}
	if _, err := NewAccessLogWriter(&syncBuffer{}, AccessLogConfig{Format: "xml"}); err == nil {
		t.Error("format xml accepted")
	}
}

func TestAccessLogReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l, err := NewAccessLog(AccessLogConfig{Path: path, Format: "template", Template: "{uri}"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Log(&LogEntry{URI: "/one"})
	if err := os.Rename(path, path+".1"); err != nil { // logrotate
		t.Fatal(err)
	}
	l.Log(&LogEntry{URI: "/two"}) // still buffered for the old file
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Log(&LogEntry{URI: "/three"})
	l.Flush()
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if string(old) != "/one\n/two\n" || string(cur) != "/three\n" {
		t.Fatalf("rotated %q, current %q", old, cur)
	}
}

// TestAccessLogThroughProxy: handshake fields, handshake time on the first
// request of a connection only.
func TestAccessLogThroughProxy(t *testing.T) {
	b := nameBackend(t, "b")
	path := filepath.Join(t.TempDir(), "access.log")
	cert := testClientCert(t)
	st := frontdoor.ConnState{Site: "s", Protocol: frontdoor.ProtoTLS13SM, Cipher: "TLS_SM4_GCM_SM3", SNI: "example.test",
		HandshakeDuration: 7 * time.Millisecond, PeerCertificates: []*smx509.Certificate{cert}, ClientAuth: true}
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("u", addrOf(b))},
		Sites:     oneSite(RouteConfig{Name: "all", Upstream: "u"}),
		AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{site} {route} {method} {uri} {status} {upstream_addr} {tls_protocol} {cipher} {sni} {handshake_ms} {client_s_dn} {bytes_out}"},
	}
	f := newFront(t, cfg, frontOpts{state: &st})
	c := testClient(t)
	get(t, c, f.url+"/first")
	get(t, c, f.url+"/second") // same keep-alive connection
	f.p.AccessLog().Flush()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("log %q", data)
	}
	dn := strings.ReplaceAll(cert.Subject.String(), " ", `\x20`) // a bare field: one field
	want0 := "s all GET /first 200 " + addrOf(b) + " TLSv1.3-SM TLS_SM4_GCM_SM3 example.test 7.000 " + dn + " 1"
	want1 := "s all GET /second 200 " + addrOf(b) + " TLSv1.3-SM TLS_SM4_GCM_SM3 example.test - " + dn + " 1"
	if lines[0] != want0 || lines[1] != want1 {
		t.Fatalf("log lines:\n%s\n%s\nwant:\n%s\n%s", lines[0], lines[1], want0, want1)
	}
	_ = http.StatusOK
}

// FuzzAccessLogTemplate: templates parse or fail cleanly, and no field
// value can break a text line or a JSON line.
func FuzzAccessLogTemplate(f *testing.F) {
	f.Add("{client} {uri}", "/a\nb\"c")
	f.Add(CombinedTemplate, "\x00\xff\xfe")
	f.Add("{", "é\r\n")
	f.Fuzz(func(t *testing.T, tmpl, value string) {
		var buf syncBuffer
		l, err := NewAccessLogWriter(&buf, AccessLogConfig{Format: "template", Template: tmpl})
		if err == nil {
			e := sampleEntry()
			e.URI, e.UserAgent, e.ClientSubject = value, value, value
			l.Log(e)
			l.Close()
			out := buf.String()
			if strings.Count(out, "\n") != 1+strings.Count(tmpl, "\n") {
				t.Fatalf("line breaks injected: %q", out)
			}
		}
		var jb syncBuffer
		jl, _ := NewAccessLogWriter(&jb, AccessLogConfig{Format: "json"})
		e := sampleEntry()
		e.URI, e.SNI = value, value
		jl.Log(e)
		jl.Close()
		var m map[string]any
		if err := json.Unmarshal([]byte(jb.String()), &m); err != nil {
			t.Fatalf("json line %q: %v", jb.String(), err)
		}
		if string([]rune(value)) != m["uri"] {
			t.Fatalf("uri %q came back as %q", value, m["uri"])
		}
	})
}

// TestAccessLogEscapesUnprintable: in the text formats a client's string
// cannot carry a character that breaks or disguises the line: C0 and C1
// controls (NEL U+0085, CSI U+009B), the line and paragraph separators and
// bidirectional overrides are written as \xHH of their bytes; printable
// non-ASCII text stays as it is.
func TestAccessLogEscapesUnprintable(t *testing.T) {
	for _, format := range []string{"combined", "template"} {
		var buf bytes.Buffer
		l, err := NewAccessLogWriter(&buf, AccessLogConfig{Format: format, Template: `"{user_agent}"`})
		if err != nil {
			t.Fatal(err)
		}
		ua := "curl\u0085127.0.0.1 - - [fake] \u009b31m\u2028x\u2029\u202e\r\n\x00 密评"
		l.Log(&LogEntry{Client: "192.0.2.1", Method: "GET", URI: "/", Proto: "HTTP/1.1", Status: 200, UserAgent: ua, HandshakeTime: -1})
		l.Close()
		line := buf.String()
		for _, bad := range []string{"\u0085", "\u009b", "\u2028", "\u2029", "\u202e", "\r", "\x00"} {
			if strings.Contains(line, bad) {
				t.Errorf("%s: the line holds a raw %U: %q", format, []rune(bad)[0], line)
			}
		}
		if !strings.Contains(line, `\xc2\x85`) || !strings.Contains(line, `\xe2\x80\xae`) || !strings.Contains(line, " 密评") {
			t.Errorf("%s: %q, want NEL as \\xc2\\x85, U+202E as \\xe2\\x80\\xae and printable text kept", format, line)
		}
		if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Errorf("%s: %q is not one line", format, line)
		}
	}
}

// failingWriter fails its writes while fail is set (a full disk), then
// records them.
type failingWriter struct {
	syncBuffer
	fail atomic.Bool
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.fail.Load() {
		return 0, syscall.ENOSPC
	}
	return w.syncBuffer.Write(p)
}

// A write error (the disk was full for a while) loses the lines buffered
// then, not every later line: the log writes again once the writer does.
func TestAccessLogRecoversAfterWriteError(t *testing.T) {
	w := &failingWriter{}
	l, err := NewAccessLogWriter(w, AccessLogConfig{Format: "template", Template: "{uri}", FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w.fail.Store(true)
	l.Log(&LogEntry{URI: "/lost"})
	if err := l.Flush(); err == nil {
		t.Error("Flush reported no error while the writer failed")
	}
	w.fail.Store(false)
	l.Log(&LogEntry{URI: "/after"})
	if err := l.Flush(); err != nil {
		t.Errorf("Flush after the writer recovered: %v", err)
	}
	if got := w.String(); got != "/after\n" {
		t.Errorf("written after the writer recovered: %q, want %q", got, "/after\n")
	}

	// Lines longer than the buffer go to the writer directly.
	w = &failingWriter{}
	l, err = NewAccessLogWriter(w, AccessLogConfig{Format: "template", Template: "{uri}", BufferSize: 16, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	long := "/" + strings.Repeat("x", 40)
	w.fail.Store(true)
	l.Log(&LogEntry{URI: long + "lost"})
	l.Flush() // written while the writer fails
	w.fail.Store(false)
	l.Log(&LogEntry{URI: long})
	l.Flush()
	if got := w.String(); got != long+"\n" {
		t.Errorf("long line written after the writer recovered: %q, want %q", got, long+"\n")
	}
}

// TestAccessLogReportsWriteErrors: failed writes are logged with the
// bytes lost, at most once per accessLogErrorEvery (a full disk fails
// every flush), the later losses added to the next report.
func TestAccessLogReportsWriteErrors(t *testing.T) {
	defer func(d time.Duration) { accessLogErrorEvery = d }(accessLogErrorEvery)
	accessLogErrorEvery = time.Hour
	var logs bytes.Buffer
	w := &failingWriter{}
	l, err := NewAccessLogWriter(w, AccessLogConfig{Format: "template", Template: "{uri}", FlushInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w.fail.Store(true)
	l.Log(&LogEntry{URI: "/lost"}) // 6 bytes
	l.Flush()
	l.Log(&LogEntry{URI: "/lost2"}) // 7 more, not reported yet
	l.Flush()
	if n := strings.Count(logs.String(), "access log: write failed"); n != 1 || !strings.Contains(logs.String(), "bytes_lost=6") {
		t.Fatalf("%d reports, want 1 with bytes_lost=6:\n%s", n, logs.String())
	}
	accessLogErrorEvery = 0
	l.Log(&LogEntry{URI: "/x"}) // 3 more
	l.Flush()
	if !strings.Contains(logs.String(), "bytes_lost=10") {
		t.Errorf("the second report does not carry the bytes lost since the first (7 + 3):\n%s", logs.String())
	}
}

// TestAccessLogReportsLinesLostAtReopenAndClose: the lines still buffered
// when the log is reopened (SIGUSR1) or closed (a reload retired it) are
// written then; when that write fails (a full disk) the loss is reported
// as any other write error's, not dropped without a trace.
func TestAccessLogReportsLinesLostAtReopenAndClose(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer func(d time.Duration) { accessLogErrorEvery = d }(accessLogErrorEvery)
	accessLogErrorEvery = 0
	for _, end := range []string{"reopen", "close"} {
		var logs syncBuffer
		l, err := NewAccessLog(AccessLogConfig{Path: "/dev/full", Format: "template", Template: "{uri}", FlushInterval: time.Hour,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		l.Log(&LogEntry{URI: "/lost"}) // 6 bytes, buffered
		if end == "reopen" {
			l.Reopen()
		}
		l.Close()
		if got := logs.String(); !strings.Contains(got, "access log: write failed") || !strings.Contains(got, "bytes_lost=6") {
			t.Errorf("%s: the line lost is not reported:\n%s", end, got)
		}
	}
}

// TestAccessLogJSONEscapesUnprintable: in the JSON format, as in the text
// ones, a client's string carries no character that a terminal or a
// reader of lines acts on (DEL, C1 controls such as CSI U+009B and NEL
// U+0085, the line and paragraph separators, bidirectional overrides, a
// format character beyond the BMP): they are written as \u escapes, so
// that `tail -f` of the log shows the line as it is, and a JSON reader
// still gets the client's string back exactly. Printable text stays as
// it is.
func TestAccessLogJSONEscapesUnprintable(t *testing.T) {
	var buf syncBuffer
	l, err := NewAccessLogWriter(&buf, AccessLogConfig{Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	ua := "curl\u0085x\x7f\u009b2J\u2028\u2029\u202e\U000e0001\r\n\x1b[31m 密评 é"
	l.Log(&LogEntry{Client: "192.0.2.1", Method: "GET", URI: "/", Proto: "HTTP/1.1", Status: 200, UserAgent: ua, HandshakeTime: -1})
	l.Close()
	line := buf.String()
	for _, bad := range []string{"\u0085", "\x7f", "\u009b", "\u2028", "\u2029", "\u202e", "\U000e0001", "\r", "\x1b"} {
		if strings.Contains(line, bad) {
			t.Errorf("the line holds a raw %U: %q", []rune(bad)[0], line)
		}
	}
	if !strings.Contains(line, " 密评 é") {
		t.Errorf("printable text escaped: %q", line)
	}
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Errorf("%q is not one line", line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("json line %q: %v", line, err)
	}
	if m["user_agent"] != ua {
		t.Errorf("user_agent read back %q, want %q", m["user_agent"], ua)
	}
}

// TestAccessLogKeepsLinesOfRequestsCutByClose: Close cuts the requests
// and stream sessions still in flight (the end of a shutdown grace); they
// end after it, and their lines, the ones an audit of the shutdown needs,
// are written before the log closes, not dropped. The last of them closes
// the log.
func TestAccessLogKeepsLinesOfRequestsCutByClose(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		arrived, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-release
			io.WriteString(w, "late")
		}))
		t.Cleanup(b.Close)
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := proxyTo(addrOf(b))
		cfg.AccessLog = AccessLogConfig{Path: path, Format: "template", Template: "{method} {uri} {status}"}
		f := newFront(t, cfg, frontOpts{})
		go func() {
			req, _ := http.NewRequest("GET", f.url+"/cut", nil)
			if resp, err := testClient(t).Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		<-arrived
		f.p.Close()
		// The handler ends once the backend answered; its line then
		// comes.
		once.Do(func() { close(release) })
		waitLineThenClosed(t, f.p.AccessLog(), path, "GET /cut ")
	})
	t.Run("stream", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := Config{
			AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{method} {site} {status}"},
			Upstreams: []UpstreamConfig{upstream("legacy", echoTCP(t, false, nil))},
			Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy"}}},
		}
		// The session's end, which the cut starts, waits for Close to
		// return: its line is logged after Close, as it may be.
		gate := make(chan struct{})
		wrap := func(ln net.Listener) net.Listener { return gatedListener{ln, gate} }
		f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}, wrap: wrap})
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		io.WriteString(c, "ping")
		if _, err := io.ReadFull(c, make([]byte, 4)); err != nil { // spliced
			t.Fatal(err)
		}
		f.p.Close()
		close(gate)
		waitLineThenClosed(t, f.p.AccessLog(), path, "STREAM tcp 200")
	})
}

// waitLineThenClosed waits (bounded: a log that dropped the line never
// writes it) for want in the log file at path, then for l to be closed.
func waitLineThenClosed(t *testing.T, l *AccessLog, path, want string) {
	t.Helper()
	var data []byte
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); ; time.Sleep(10 * time.Millisecond) {
		data, _ = os.ReadFile(path)
		if strings.Contains(string(data), want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line of what Close cut was lost; log %q, want %q in it", data, want)
		}
	}
	select {
	case <-l.done:
	case <-time.After(testwait.Bound(20 * time.Second)):
		t.Fatal("the log was not closed once what Close cut had ended")
	}
}

// gatedListener's connections, once closed, answer RemoteAddr (which the
// access log line asks for) only after gate is closed.
type gatedListener struct {
	net.Listener
	gate chan struct{}
}

func (l gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, gate: l.gate}, nil
}

type gatedConn struct {
	net.Conn
	gate   chan struct{}
	closed atomic.Bool
}

func (c *gatedConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func (c *gatedConn) RemoteAddr() net.Addr {
	if c.closed.Load() {
		<-c.gate
	}
	return c.Conn.RemoteAddr()
}

// TestAccessLogBareFieldsCannotAddFields: a client's value written
// outside double quotes (the SNI in combined, any field a template leaves
// bare) cannot split into more fields: its spaces are written \x20, so
// "sni=x site=admin" cannot pass for the line's own site= field, and a
// parser splitting at spaces sees as many fields as the template has.
// Values inside quotes (the user agent) keep their spaces.
func TestAccessLogBareFieldsCannotAddFields(t *testing.T) {
	e := sampleEntry()
	e.SNI = "x.example.cn hs_ms=0 site=admin"
	e.UserAgent = "Mozilla/5.0 (X11; Linux)"

	var buf syncBuffer
	l, _ := NewAccessLogWriter(&buf, AccessLogConfig{})
	l.Log(e)
	l.Close()
	line := buf.String()
	if n := strings.Count(line, " site="); n != 1 {
		t.Errorf("combined line has %d site= fields, want 1: %s", n, line)
	}
	if !strings.Contains(line, ` sni=x.example.cn\x20hs_ms=0\x20site=admin `) {
		t.Errorf("combined line's sni not escaped: %s", line)
	}
	if !strings.Contains(line, `"Mozilla/5.0 (X11; Linux)"`) {
		t.Errorf("combined line's quoted user agent changed: %s", line)
	}

	buf = syncBuffer{}
	l, _ = NewAccessLogWriter(&buf, AccessLogConfig{Format: "template", Template: `{sni} {status} "{user_agent}"`})
	l.Log(e)
	l.Close()
	want := `x.example.cn\x20hs_ms=0\x20site=admin 200 "Mozilla/5.0 (X11; Linux)"` + "\n"
	if got := buf.String(); got != want {
		t.Errorf("template line\n got %s\nwant %s", got, want)
	}
}

// TestAccessLogSessionReusedWithoutTLS: a request without TLS has no
// session to reuse: session_reused is null in JSON and "-" in text, as
// handshake_ms, not false (a full handshake that never took place). With
// TLS it is true or false.
func TestAccessLogSessionReusedWithoutTLS(t *testing.T) {
	for _, tc := range []struct {
		tls, resumed bool
		json         any
		text         string
	}{
		{false, false, nil, "-"},
		{true, false, false, "."},
		{true, true, true, "r"},
	} {
		e := sampleEntry()
		e.TLS, e.Resumed = tc.tls, tc.resumed
		if !tc.tls {
			e.TLSProtocol, e.Cipher, e.SNI = "", "", ""
		}
		var jb syncBuffer
		jl, _ := NewAccessLogWriter(&jb, AccessLogConfig{Format: "json"})
		jl.Log(e)
		jl.Close()
		var m map[string]any
		if err := json.Unmarshal([]byte(jb.String()), &m); err != nil {
			t.Fatalf("json line %q: %v", jb.String(), err)
		}
		if v, ok := m["session_reused"]; !ok || v != tc.json {
			t.Errorf("tls %v resumed %v: json session_reused %v (present %v), want %v", tc.tls, tc.resumed, v, ok, tc.json)
		}
		var tb syncBuffer
		tl, _ := NewAccessLogWriter(&tb, AccessLogConfig{Format: "template", Template: "{session_reused}"})
		tl.Log(e)
		tl.Close()
		if got := strings.TrimSpace(tb.String()); got != tc.text {
			t.Errorf("tls %v resumed %v: text session_reused %q, want %q", tc.tls, tc.resumed, got, tc.text)
		}
	}
}

// TestAccessLogWritesAQueuedChunkAtOnce: a buffer's worth of queued lines
// wakes the writer, without waiting for the flush interval (an hour
// here): a busy proxy's queue does not fill between two ticks.
func TestAccessLogWritesAQueuedChunkAtOnce(t *testing.T) {
	var buf syncBuffer
	l, err := NewAccessLogWriter(&buf, AccessLogConfig{Format: "template", Template: "{uri}", BufferSize: 16, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	long := "/" + strings.Repeat("x", 40)
	l.Log(&LogEntry{URI: long})
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); buf.String() == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	if got := buf.String(); got != long+"\n" {
		t.Errorf("written without a flush: %q, want %q", got, long+"\n")
	}
}
