package proxy

import (
	"bytes"
	"errors"
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
	"github.com/gmproxy/gmproxy/internal/logesc"
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
	// responses): gRPC calls fail with HTTP status 200. A call the proxy
	// fails itself (no target, a timeout, a route's refusal) gets HTTP
	// 200 and a gRPC status too (grpcReply), but Status, here and in
	// the metrics, is the proxy's HTTP status for it (503, 504, 403...),
	// so that those failures count as they do for other requests.
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

// AccessLog writes access-log lines through a bounded in-memory queue
// that one writer goroutine drains, every FlushInterval or as soon as a
// buffer's worth is queued; Reopen reopens the file for rotation
// (SIGUSR1).
//
// A request never waits for the output: a FIFO whose reader stalls, a
// hung NFS mount or a blocked logging driver behind stdout holds the
// writer only. Lines that find the queue full are dropped and reported
// as lost, as the lines of a failed write are, rather than stalling
// every request behind the log.
type AccessLog struct {
	path  string
	json  bool
	parts []logPart
	// reopens: a file (not stdout, stderr or a caller's writer).
	reopens bool

	mu     sync.Mutex
	closed bool
	// queue holds the lines Log added and the writer has not taken yet,
	// in their order; spare is the writer's last batch, reused.
	queue, spare []byte
	// queued counts the bytes queued or being written: at most
	// maxQueue, so a stalled output holds that much memory, no more.
	queued   int
	maxQueue int
	// chunk is the most written at once (BufferSize), cut at line ends;
	// the writer is woken at kickAt bytes queued (a chunk, or half the
	// queue when that is smaller), else every FlushInterval.
	chunk, kickAt int

	kick chan struct{} // a chunk is queued (capacity 1)
	reqs chan *logReq  // Flush and Reopen, taken by the writer in turn
	stop chan struct{} // closed by close: drain, close the file, exit
	done chan struct{} // closed when the writer exits

	// The writer's output; fmu guards the fields (not the writes) for
	// a close that gives up waiting for a stalled writer.
	fmu  sync.Mutex
	file *os.File // nil for stdout/stderr or a caller-supplied writer
	w    io.Writer

	// A request or stream in flight holds the log (hold, release):
	// Close with some held leaves the closing to the last release, so
	// the lines of the requests Proxy.Close cut, which end after it,
	// are written rather than dropped.
	holds   atomic.Int64
	closing atomic.Bool

	// Lines lost (a write error, or a full queue) are logged, at most
	// once per accessLogErrorEvery, with the bytes and lines lost since
	// the last report (under mu).
	logger    *slog.Logger
	lost      int64
	lostLines int64
	lastError time.Time
	// linesLost counts every line lost since the log opened.
	linesLost atomic.Int64
}

// logReq asks the writer to write the queue out, then to open the log's
// file again when reopen is set (Reopen).
type logReq struct {
	// reopen asks the writer to open the log's path again once the lines
	// queued so far are written (Reopen).
	reopen bool
	done   chan error // capacity 1: the writer never waits for the asker
}

// errReopen is the error of a reopen whose new file did not open (the
// old one stays in use).
type errReopen struct{ err error }

func (e errReopen) Error() string { return e.err.Error() }
func (e errReopen) Unwrap() error { return e.err }

// accessLogErrorEvery spaces the reports of failed access log writes (a
// full disk fails every flush).
var accessLogErrorEvery = time.Minute

// accessLogStallWait bounds how long Flush, Reopen and Close wait for the
// writer: an output that takes no writes must not hold a reload, a
// SIGUSR1 or a shutdown for ever either.
var accessLogStallWait = 5 * time.Second

// DefaultAccessLogQueue is the default bound, in bytes, of the lines
// queued for the access log's writer: some seconds of a busy proxy's
// lines, so that a slow disk loses none, and the memory an output that
// takes no writes holds.
const DefaultAccessLogQueue = 4 << 20

// errAccessLogStalled: the writer did not answer within
// accessLogStallWait, the output takes no writes.
var errAccessLogStalled = errors.New("access log: output stalled (takes no writes)")

// errAccessLogQueueFull is the reason reported for lines dropped because
// the queue was full.
var errAccessLogQueueFull = errors.New("queue full: the output takes writes slower than lines come")

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
		l.file, l.w, l.reopens = f, f, true
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
	l.chunk = intOr(cfg.BufferSize, 64<<10)
	l.maxQueue = intOr(cfg.QueueSize, DefaultAccessLogQueue)
	l.kickAt = max(min(l.chunk, l.maxQueue/2), 1)
	l.kick, l.reqs = make(chan struct{}, 1), make(chan *logReq)
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.writeLoop(durOr(cfg.FlushInterval, time.Second))
	return nil
}

// writeLoop is the writer: it alone writes to the output, so a write
// that blocks holds it and the queue fills, not the requests that log.
func (l *AccessLog) writeLoop(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			l.writeQueued()
			l.fmu.Lock()
			if l.file != nil {
				l.file.Close()
			}
			l.fmu.Unlock()
			return
		case r := <-l.reqs:
			err := l.writeQueued()
			if r.reopen {
				// The lines queued before the reopen went to the old
				// file (logrotate's rotated one); the later ones go to
				// the new, opened only now: once it exists, every line
				// logged from then on is bound for it (a rotation that
				// waits for the new file may count on that).
				if f, oerr := openLogFile(l.path); oerr != nil {
					err = errReopen{oerr}
				} else {
					l.fmu.Lock()
					old := l.file
					l.file, l.w = f, f
					l.fmu.Unlock()
					if old != nil {
						old.Close()
					}
				}
			}
			r.done <- err
		case <-l.kick:
			l.writeQueued()
		case <-t.C:
			l.writeQueued()
		}
	}
}

// writeQueued writes the queued lines out (the writer only), at most a
// chunk per write(2) and whole lines per write: with O_APPEND, two
// generations of the proxy (during a reload) may share the file. A write
// that fails loses its lines, which are reported, not the later ones.
func (l *AccessLog) writeQueued() error {
	l.mu.Lock()
	batch := l.queue
	l.queue, l.spare = l.spare[:0], nil
	l.mu.Unlock()
	var first error
	for b := batch; len(b) > 0; {
		n := len(b)
		if n > l.chunk {
			if n = bytes.LastIndexByte(b[:l.chunk], '\n') + 1; n == 0 {
				n = bytes.IndexByte(b, '\n') + 1 // one line longer than a chunk: alone
			}
		}
		if _, err := l.w.Write(b[:n]); err != nil {
			if first == nil {
				first = err
			}
			l.mu.Lock()
			report := l.failed(err, b[:n])
			l.mu.Unlock()
			report()
		}
		b = b[n:]
	}
	l.mu.Lock()
	l.queued -= len(batch)
	l.spare = batch
	l.mu.Unlock()
	return first
}

// failed counts the lines lost (l.mu held) and returns the report to make
// once l.mu is released, if one is due: the log would otherwise lose
// them without a trace. The report is made outside l.mu as the program
// log may go where the access log goes (stderr), stalled as well.
func (l *AccessLog) failed(err error, lines []byte) func() {
	n := int64(bytes.Count(lines, []byte{'\n'}))
	l.lost += int64(len(lines))
	l.lostLines += n
	l.linesLost.Add(n)
	if now := time.Now(); now.Sub(l.lastError) >= accessLogErrorEvery {
		l.lastError = now
		bytesLost, linesLost := l.lost, l.lostLines
		l.lost, l.lostLines = 0, 0
		return func() {
			l.logger.Error("access log: write failed, lines lost", "path", l.path, "err", err,
				"bytes_lost", bytesLost, "lines_lost", linesLost)
		}
	}
	return func() {}
}

// LinesLost returns the number of lines lost since the log opened: lines
// a write failed to write, and lines dropped because the queue was full.
func (l *AccessLog) LinesLost() int64 { return l.linesLost.Load() }

// request hands r to the writer and waits for its answer, for
// accessLogStallWait at most; sent tells whether the writer took r (it
// then does it, later if the wait ran out). It returns nil, unsent, once
// the writer has exited (the log is closed).
func (l *AccessLog) request(r *logReq) (sent bool, err error) {
	t := time.NewTimer(accessLogStallWait)
	defer t.Stop()
	select {
	case l.reqs <- r:
	case <-l.done:
		return false, nil
	case <-t.C:
		return false, errAccessLogStalled
	}
	select {
	case err := <-r.done:
		return true, err
	case <-t.C:
		// The writer will do it once the output takes writes again.
		return true, errAccessLogStalled
	}
}

// Flush writes the lines queued so far out, and returns the first write
// error; errAccessLogStalled when the output took none for
// accessLogStallWait.
func (l *AccessLog) Flush() error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil
	}
	_, err := l.request(&logReq{done: make(chan error, 1)})
	return err
}

// Reopen reopens the log file (after logrotate moved it): the lines
// queued until then go to the old file (a loss is reported), those after
// to the new.
func (l *AccessLog) Reopen() error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil
	}
	if !l.reopens {
		l.Flush()
		return nil
	}
	_, err := l.request(&logReq{reopen: true, done: make(chan error, 1)})
	var open errReopen
	if errors.Is(err, errAccessLogStalled) {
		return err
	}
	if errors.As(err, &open) {
		return open.err
	}
	return nil // a write error lost lines of the old file: reported
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

// close takes no more lines, has the writer write the queue out and close
// the file, and waits for it (accessLogStallWait at most: a stalled
// output must not hold a shutdown). A writer that does not finish has
// its file closed under it, which ends a write blocked on a pipe; the
// lines it could not write are reported lost.
func (l *AccessLog) close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	t := time.NewTimer(accessLogStallWait)
	defer t.Stop()
	select {
	case <-l.done:
		return nil
	case <-t.C:
	}
	l.fmu.Lock()
	if l.file != nil {
		l.file.Close()
	}
	l.fmu.Unlock()
	return errAccessLogStalled
}

var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Log queues one entry for the writer; it never waits for the output.
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
	report := func() {}
	l.mu.Lock()
	switch {
	case l.closed:
	case l.queued+len(b) > l.maxQueue:
		// The output is stalled (or slower than the lines come): this
		// line is lost, not the request's time.
		report = l.failed(errAccessLogQueueFull, b)
	default:
		l.queue = append(l.queue, b...)
		l.queued += len(b)
		if len(l.queue) >= l.kickAt {
			select {
			case l.kick <- struct{}{}:
			default: // already kicked
			}
		}
	}
	l.mu.Unlock()
	report()
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
		return logesc.Append(b, s, bare)
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

// appendJSONString writes s as a JSON string. Invalid UTF-8 becomes
// U+FFFD; controls and the characters logesc.Append would escape (DEL, C1
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
