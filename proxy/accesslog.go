package proxy

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// LogEntry is one access-log record.
type LogEntry struct {
	Time time.Time
	// Client is the client's IP as X-Real-IP gives it, the address
	// client_ip, rate_limit and the per-client limits judge it by: behind
	// a proxy of trusted_proxies the one its X-Forwarded-For names
	// (nginx's $remote_addr behind set_real_ip_from), else Peer.
	Client string
	// Peer is the connection's IP (a trusted PROXY protocol header's
	// source when there was one; nginx's $realip_remote_addr).
	Peer             string
	Site, Route      string
	Host             string
	Method, URI      string
	Proto            string // HTTP/1.1, HTTP/2.0, or "TCP" for stream mode
	Status           int
	BytesIn          int64
	BytesOut         int64
	Duration         time.Duration
	Upstream         string
	UpstreamAddr     string
	UpstreamDuration time.Duration
	TLS              bool
	TLSProtocol      string
	Cipher           string
	Resumed          bool
	// HandshakeTime is set on the first request of a connection only
	// (negative otherwise).
	HandshakeTime time.Duration
	SNI           string
	ClientSubject string
	Referer       string
	UserAgent     string
	// GRPCStatus is a gRPC response's grpc-status ("" for other
	// responses): gRPC calls fail with HTTP status 200.
	GRPCStatus string
	// RequestID is the request's ID (SiteConfig.RequestIDHeader), "" when
	// its site gives none.
	RequestID string
	// RemoteUser is the user basic_auth let in (nginx's $remote_user),
	// "" otherwise: a name that was refused is not logged (it may be a
	// password typed in the wrong box).
	RemoteUser string
}

type logField uint8

const (
	fLiteral logField = iota
	fTime
	fTimeLocal
	fClient
	fSite
	fRoute
	fHost
	fMethod
	fURI
	fProto
	fStatus
	fBytesIn
	fBytesOut
	fRequestTime
	fUpstream
	fUpstreamAddr
	fUpstreamTime
	fTLSProtocol
	fCipher
	fSessionReused
	fHandshakeMS
	fSNI
	fClientSDN
	fReferer
	fUserAgent
	fGRPCStatus
	fRequestID
	fRemoteUser
	fPeer
)

// AccessLogFields are the names usable in templates, in JSON order.
var AccessLogFields = []string{
	"time", "time_local", "client", "site", "route", "host", "method", "uri", "proto",
	"status", "bytes_in", "bytes_out", "request_time", "upstream", "upstream_addr",
	"upstream_time", "tls_protocol", "cipher", "session_reused", "handshake_ms", "sni",
	"client_s_dn", "referer", "user_agent", "grpc_status", "request_id", "remote_user", "peer",
}

var fieldByName = func() map[string]logField {
	m := make(map[string]logField)
	for i, n := range AccessLogFields {
		m[n] = logField(i + 1)
	}
	return m
}()

// CombinedTemplate is the "combined" format: nginx's combined log format
// followed by the TLS and proxy fields.
const CombinedTemplate = `{client} - {remote_user} [{time_local}] "{method} {uri} {proto}" {status} {bytes_out} "{referer}" "{user_agent}"` +
	` {tls_protocol} {cipher} {session_reused} sni={sni} hs_ms={handshake_ms} rt={request_time}` +
	` up={upstream_addr} ut={upstream_time} site={site} dn="{client_s_dn}"`

type logPart struct {
	f   logField
	lit string
	// bare is a field outside double quotes: its spaces are escaped
	// too, so a client's value (an SNI "a site=admin") cannot add
	// fields to the line.
	bare bool
}

// CheckAccessLogTemplate reports what is wrong with an access-log
// template: an unknown field or an unclosed brace, which would otherwise
// fail only when the proxy starts, without the position in the
// configuration file.
func CheckAccessLogTemplate(t string) error {
	_, err := parseTemplate(t)
	return err
}

func parseTemplate(t string) ([]logPart, error) {
	var parts []logPart
	at := 0 // offset of t in the template, for the errors
	quoted := false
	for t != "" {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			parts = append(parts, logPart{lit: t})
			break
		}
		if i > 0 {
			parts = append(parts, logPart{lit: t[:i]})
			quoted = quoted != (strings.Count(t[:i], `"`)%2 == 1)
		}
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("unclosed { at offset %d", at+i)
		}
		name := t[i+1 : i+j]
		f, ok := fieldByName[name]
		if !ok {
			return nil, fmt.Errorf("unknown field {%s} (known: %s)", name, strings.Join(AccessLogFields, ", "))
		}
		parts = append(parts, logPart{f: f, bare: !quoted})
		t = t[i+j+1:]
		at += i + j + 1
	}
	return parts, nil
}

// AccessLog writes access-log lines through a buffer flushed periodically;
// Reopen reopens the file for rotation (SIGUSR1).
type AccessLog struct {
	mu     sync.Mutex
	path   string
	file   *os.File // nil for stdout/stderr or a caller-supplied writer
	w      io.Writer
	bw     *bufio.Writer
	json   bool
	parts  []logPart
	stop   chan struct{}
	done   chan struct{}
	closed bool

	// A request or stream in flight holds the log (hold, release):
	// Close with some held leaves the closing to the last release, so
	// the lines of the requests Proxy.Close cut, which end after it,
	// are written rather than dropped.
	holds   atomic.Int64
	closing atomic.Bool

	// Write errors are logged, at most once per accessLogErrorEvery,
	// with the bytes lost since the last report.
	logger    *slog.Logger
	lost      int64
	lastError time.Time
}

// accessLogErrorEvery spaces the reports of failed access log writes (a
// full disk fails every flush).
var accessLogErrorEvery = time.Minute

// NewAccessLog opens the access log described by cfg.
func NewAccessLog(cfg AccessLogConfig) (*AccessLog, error) {
	l := &AccessLog{path: cfg.Path}
	switch cfg.Path {
	case "stdout":
		l.w = os.Stdout
	case "stderr":
		l.w = os.Stderr
	case "":
		return nil, fmt.Errorf("access log: empty path")
	default:
		f, err := openLogFile(cfg.Path)
		if err != nil {
			return nil, err
		}
		l.file, l.w = f, f
	}
	if err := l.init(cfg); err != nil {
		if l.file != nil {
			l.file.Close()
		}
		return nil, err
	}
	return l, nil
}

// NewAccessLogWriter logs to w (tests, or a daemon-managed writer).
func NewAccessLogWriter(w io.Writer, cfg AccessLogConfig) (*AccessLog, error) {
	l := &AccessLog{w: w}
	if err := l.init(cfg); err != nil {
		return nil, err
	}
	return l, nil
}

func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return f, nil
}

func (l *AccessLog) init(cfg AccessLogConfig) error {
	switch cfg.Format {
	case "", "combined":
		l.parts, _ = parseTemplate(CombinedTemplate)
	case "json":
		l.json = true
	case "template":
		p, err := parseTemplate(cfg.Template)
		if err != nil {
			return fmt.Errorf("access log template: %w", err)
		}
		if len(p) == 0 {
			return fmt.Errorf("access log: empty template")
		}
		l.parts = p
	default:
		return fmt.Errorf("access log: unknown format %q (want combined, json or template)", cfg.Format)
	}
	l.logger = cfg.Logger
	if l.logger == nil {
		l.logger = slog.Default()
	}
	l.bw = bufio.NewWriterSize(l.w, intOr(cfg.BufferSize, 64<<10))
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.flushLoop(durOr(cfg.FlushInterval, time.Second))
	return nil
}

func (l *AccessLog) flushLoop(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.Flush()
		}
	}
}

// Flush writes buffered lines out.
func (l *AccessLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	return l.flush()
}

// flush writes the buffer out (l.mu held). A bufio.Writer that failed once
// fails every later write, so after an error (a disk full for a while) the
// lines buffered then are dropped and the buffer starts over: the log
// loses those lines, not every line until the next Reopen.
func (l *AccessLog) flush() error {
	n := l.bw.Buffered()
	err := l.bw.Flush()
	if err != nil {
		l.bw.Reset(l.w)
		l.failed(err, n)
	}
	return err
}

// failed reports a write error that lost up to n bytes of lines (l.mu
// held): the log would otherwise lose them without a trace.
func (l *AccessLog) failed(err error, n int) {
	l.lost += int64(n)
	if now := time.Now(); now.Sub(l.lastError) >= accessLogErrorEvery {
		l.lastError = now
		l.logger.Error("access log: write failed, lines lost", "path", l.path, "err", err, "bytes_lost", l.lost)
		l.lost = 0
	}
}

// Reopen flushes and reopens the log file (after logrotate moved it).
func (l *AccessLog) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.flush() // a loss is reported; the new file starts with an empty buffer
	if l.file == nil {
		return nil
	}
	f, err := openLogFile(l.path)
	if err != nil {
		return err
	}
	l.file.Close()
	l.file, l.w = f, f
	l.bw.Reset(f)
	return nil
}

// hold marks a request or stream in flight: it will log (release).
func (l *AccessLog) hold() { l.holds.Add(1) }

// release ends a hold; the last one after Close closes the log.
func (l *AccessLog) release() {
	if l.holds.Add(-1) == 0 && l.closing.Load() {
		l.close()
	}
}

// Close flushes and closes the log; while requests or streams it serves
// are in flight it only flushes, and the last of them to end closes it.
func (l *AccessLog) Close() error {
	l.closing.Store(true)
	if l.holds.Load() > 0 {
		return l.Flush()
	}
	return l.close()
}

func (l *AccessLog) close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	err := l.flush()
	if l.file != nil {
		if cerr := l.file.Close(); err == nil {
			err = cerr
		}
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	return err
}

var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Log writes one entry.
func (l *AccessLog) Log(e *LogEntry) {
	bp := linePool.Get().(*[]byte)
	b := (*bp)[:0]
	if l.json {
		b = appendJSON(b, e)
	} else {
		for _, p := range l.parts {
			if p.f == fLiteral {
				b = append(b, p.lit...)
			} else {
				b = appendField(b, p.f, e, false, p.bare)
			}
		}
	}
	b = append(b, '\n')
	l.mu.Lock()
	if !l.closed {
		// Keep lines whole per write(2): with O_APPEND, two generations of
		// the proxy (during a reload) may share the file.
		if len(b) > l.bw.Available() && l.bw.Buffered() > 0 {
			l.flush()
		}
		n := l.bw.Buffered()
		if _, err := l.bw.Write(b); err != nil {
			l.bw.Reset(l.w) // a line longer than the buffer failed
			l.failed(err, n+len(b))
		}
	}
	l.mu.Unlock()
	*bp = b
	linePool.Put(bp)
}

// grpcStatusOf is the grpc-status a gRPC response carried (in its
// trailers, or in its only field section when it had no message: a
// Trailers-Only response), read from the client's ResponseWriter header
// once the response is over; "" for anything else. A gRPC call fails
// with HTTP status 200, so this is what tells it in the access log.
//
// A trailer the target did not announce is under its TrailerPrefix key
// (an announced one replaced the header's value): it is the call's
// status, which a client takes, even when the first field section had
// one too (PROTOCOL-HTTP2.md: the status is in the trailers, in the
// headers only of a Trailers-Only response).
func grpcStatusOf(h http.Header) string {
	if v := h[http.TrailerPrefix+"Grpc-Status"]; len(v) > 0 {
		return v[0]
	}
	if v := h["Grpc-Status"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (l *AccessLog) logRequest(ev *RequestEvent, r *http.Request, ci *connInfo, client, grpcStatus, reqID, user string) {
	e := LogEntry{
		Time:             time.Now(),
		Client:           client,
		Peer:             clientAddr(r),
		Site:             ev.Site,
		Route:            ev.Route,
		Host:             r.Host,
		Method:           r.Method,
		URI:              r.RequestURI,
		Proto:            r.Proto,
		Status:           ev.Status,
		BytesIn:          ev.BytesIn,
		BytesOut:         ev.BytesOut,
		Duration:         ev.Duration,
		Upstream:         ev.Upstream,
		UpstreamAddr:     ev.Target,
		UpstreamDuration: ev.UpstreamDuration,
		HandshakeTime:    -1,
		Referer:          r.Header.Get("Referer"),
		UserAgent:        r.Header.Get("User-Agent"),
		GRPCStatus:       grpcStatus,
		RequestID:        reqID,
		RemoteUser:       user,
	}
	l.fillTLS(&e, ci)
	l.Log(&e)
}

func (l *AccessLog) fillTLS(e *LogEntry, ci *connInfo) {
	if ci == nil {
		return
	}
	first := ci.requested.CompareAndSwap(false, true)
	if !ci.hasState {
		return
	}
	st := &ci.state
	e.TLS = true
	e.TLSProtocol, e.Cipher, e.Resumed, e.SNI = st.Protocol, st.Cipher, st.Resumed, st.SNI
	if first {
		e.HandshakeTime = st.HandshakeDuration
	}
	// client_s_dn names a verified client only: a certificate that
	// FAILED (client_auth optional_no_ca) names whoever the client claims
	// to be, and the log has no field to say so.
	if st.ClientAuth {
		e.ClientSubject = ci.tls().subject
	}
}

func (l *AccessLog) logStream(site, upstream, target string, c net.Conn, status int, in, out int64, d time.Duration) {
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	e := LogEntry{
		Time: time.Now(), Client: host, Peer: host, Site: site, Method: "STREAM", Proto: "TCP", Status: status,
		BytesIn: in, BytesOut: out, Duration: d, Upstream: upstream, UpstreamAddr: target,
		HandshakeTime: -1,
	}
	ci := &connInfo{}
	if sc, ok := c.(frontdoor.StateConn); ok {
		ci = &connInfo{state: sc.ConnState(), hasState: true}
	}
	l.fillTLS(&e, ci)
	l.Log(&e)
}

// stringField returns the value of a string-valued field.
func (e *LogEntry) stringField(f logField) (string, bool) {
	switch f {
	case fClient:
		return e.Client, true
	case fSite:
		return e.Site, true
	case fRoute:
		return e.Route, true
	case fHost:
		return e.Host, true
	case fMethod:
		return e.Method, true
	case fURI:
		return e.URI, true
	case fProto:
		return e.Proto, true
	case fUpstream:
		return e.Upstream, true
	case fUpstreamAddr:
		return e.UpstreamAddr, true
	case fTLSProtocol:
		return e.TLSProtocol, true
	case fCipher:
		return e.Cipher, true
	case fSNI:
		return e.SNI, true
	case fClientSDN:
		return e.ClientSubject, true
	case fReferer:
		return e.Referer, true
	case fUserAgent:
		return e.UserAgent, true
	case fGRPCStatus:
		return e.GRPCStatus, true
	case fRequestID:
		return e.RequestID, true
	case fRemoteUser:
		return e.RemoteUser, true
	case fPeer:
		return e.Peer, true
	}
	return "", false
}

// appendMissing writes an absent value: null in JSON, "-" in text.
func appendMissing(b []byte, js bool) []byte {
	if js {
		return append(b, "null"...)
	}
	return append(b, '-')
}

func appendTime(b []byte, t time.Time, layout string, js bool) []byte {
	if !js {
		return t.AppendFormat(b, layout)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, layout)
	return append(b, '"')
}

// appendField writes field f of e: in JSON (js), else in text, escaping
// spaces too when bare (outside quotes).
func appendField(b []byte, f logField, e *LogEntry, js, bare bool) []byte {
	if s, ok := e.stringField(f); ok {
		switch {
		case js:
			return appendJSONString(b, s)
		case s == "":
			return append(b, '-')
		}
		return appendEscaped(b, s, bare)
	}
	switch f {
	case fTime:
		return appendTime(b, e.Time, "2006-01-02T15:04:05.000Z07:00", js)
	case fTimeLocal:
		return appendTime(b, e.Time, "02/Jan/2006:15:04:05 -0700", js)
	case fStatus:
		return strconv.AppendInt(b, int64(e.Status), 10)
	case fBytesIn:
		return strconv.AppendInt(b, e.BytesIn, 10)
	case fBytesOut:
		return strconv.AppendInt(b, e.BytesOut, 10)
	case fRequestTime:
		return strconv.AppendFloat(b, e.Duration.Seconds(), 'f', 3, 64)
	case fUpstreamTime:
		if e.UpstreamAddr == "" {
			return appendMissing(b, js)
		}
		return strconv.AppendFloat(b, e.UpstreamDuration.Seconds(), 'f', 3, 64)
	case fSessionReused:
		// A plain-HTTP request (or a stream without TLS) has no session
		// that could be reused: null in JSON as in text ("-"), not false,
		// which reads as a full handshake.
		switch {
		case !e.TLS:
			return appendMissing(b, js)
		case js:
			return strconv.AppendBool(b, e.Resumed)
		case e.Resumed:
			return append(b, 'r')
		}
		return append(b, '.')
	case fHandshakeMS:
		if e.HandshakeTime < 0 || !e.TLS {
			return appendMissing(b, js)
		}
		return strconv.AppendFloat(b, float64(e.HandshakeTime)/float64(time.Millisecond), 'f', 3, 64)
	}
	return b
}

func appendJSON(b []byte, e *LogEntry) []byte {
	b = append(b, '{')
	for i, name := range AccessLogFields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = appendField(b, logField(i+1), e, true, false)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendEscaped writes s for a text log line: '"', '\\', control bytes
// and invalid UTF-8 become \xHH (nginx style), and so do the bytes of a
// character that is not printable (C1 controls such as NEL U+0085 and CSI
// U+009B, the line and paragraph separators U+2028/U+2029, bidirectional
// overrides such as U+202E), so a client cannot inject line breaks,
// terminal escapes or text that reads otherwise, nor fake quoted fields.
// With space, a space is \x20 too: a value outside quotes stays one field.
func appendEscaped(b []byte, s string, space bool) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && (c != ' ' || !space) {
			b = append(b, c)
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r != utf8.RuneError || size > 1) && unicode.IsPrint(r) {
				b = append(b, s[i:i+size]...)
				i += size
				continue
			}
			if size > 1 { // a valid character that is not printable: all its bytes
				for _, c := range []byte(s[i : i+size]) {
					b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
				}
				i += size
				continue
			}
		}
		b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
		i++
	}
	return b
}

// appendJSONString writes s as a JSON string. Invalid UTF-8 becomes
// U+FFFD; controls and the characters appendEscaped would escape (DEL, C1
// controls, separators, bidirectional overrides) become \u escapes: valid
// JSON may hold them raw, but a terminal showing the log (tail -f) or a
// reader splitting lines at U+2028 would act on them.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x7f {
			b = append(b, c)
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, `\ufffd`...)
			case unicode.IsPrint(r):
				b = append(b, s[i:i+size]...)
			default:
				b = appendJSONEscape(b, r)
			}
			i += size
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = appendJSONEscape(b, rune(c))
		}
		i++
	}
	return append(b, '"')
}

// appendJSONEscape writes r as \uXXXX, a pair of them (UTF-16 surrogates)
// beyond the BMP.
func appendJSONEscape(b []byte, r rune) []byte {
	if r > 0xffff {
		r1, r2 := utf16.EncodeRune(r)
		return appendJSONEscape(appendJSONEscape(b, r1), r2)
	}
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
