package proxy

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/monoclock"
)

// Streaming, as in Caddy's streaming.go: bodies are copied through one
// pooled buffer per direction, never buffered whole (64 KiB for response
// bodies over HTTP/1: a read of that much becomes one write to the client,
// which the TLCP record layer seals as four full records side by side;
// 32 KiB over HTTP/2, where a stream whose client keeps its flow-control
// window at 0 holds its buffer until send_timeout, up to
// max_requests_per_client of them per address (with, from an HTTP/2
// target, what the target sent ahead: h2UpstreamStreamWindow); 32 KiB for the two
// directions of a tunnel, which may stay open for hours); event streams,
// gRPC and bodies of unknown length are flushed after every write; Upgrade
// responses (101) become two-way tunnels.

var (
	bufPool     = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	bodyBufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
	h2BufPool   = sync.Pool{New: func() any { b := make([]byte, h2BodyBuf); return &b }}
)

// h2BodyBuf is the response body buffer of an HTTP/2 stream. Each write
// is handed to the connection's goroutine and waited for, so smaller
// writes cost hand-offs: a 1 MiB h2 download through 16 KiB took 18-27 %
// more CPU than through 64 KiB, through 32 KiB the same (0.90-1.01);
// 32 KiB halves what a stalled stream holds.
const h2BodyBuf = 32 << 10

// errClientWrite marks a failure writing to the client (as opposed to
// reading from the backend).
var errClientWrite = errors.New("client write failed")

// flushInterval decides how the response body is flushed.
func flushInterval(res *http.Response, rt *route) time.Duration {
	ct, hasCT := "", false
	if res.Header != nil {
		if v := res.Header["Content-Type"]; len(v) > 0 {
			ct, hasCT = v[0], true
		}
	} else if h := passOnHead(res); h != nil {
		ct, hasCT = h.Get("Content-Type")
	}
	if hasCT {
		base := ct
		if i := strings.IndexByte(base, ';'); i >= 0 {
			base = base[:i]
		}
		base = strings.TrimSpace(base)
		if strings.EqualFold(base, "text/event-stream") ||
			len(base) >= 16 && strings.EqualFold(base[:16], "application/grpc") {
			return -1
		}
	}
	if res.ContentLength == -1 {
		return -1
	}
	return rt.flush
}

// copyBody streams src to w, flushing per interval (negative: after every
// write). size is the body's length, or -1 when unknown: once that many
// bytes were read, the final EOF is read before the last write, so that the
// backend connection is back in the idle pool before the client can see
// the end of the response and send its next request. h2 picks the HTTP/2
// stream's smaller buffer.
func copyBody(w *respWriter, src io.Reader, interval time.Duration, size int64, h2 bool) error {
	pool := &bodyBufPool
	if h2 {
		pool = &h2BufPool
	}
	bp := pool.Get().(*[]byte)
	defer pool.Put(bp)
	buf := *bp
	var lw *latencyWriter
	if interval > 0 {
		lw = &latencyWriter{w: w, interval: interval}
		defer lw.stop()
	}
	var total int64
	for {
		n, rerr := src.Read(buf)
		total += int64(n)
		if rerr == nil && size >= 0 && total >= size && n < len(buf) {
			if m, err := src.Read(buf[n : n+1]); m == 0 {
				rerr = err // io.EOF: the connection went back to the pool
			}
		}
		if n > 0 {
			var werr error
			if lw != nil {
				werr = lw.write(buf[:n])
			} else {
				_, werr = w.Write(buf[:n])
				if werr == nil && interval < 0 {
					w.Flush()
				}
			}
			if werr != nil {
				return errors.Join(errClientWrite, werr)
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// latencyWriter flushes at most interval after a write.
type latencyWriter struct {
	mu       sync.Mutex
	w        *respWriter
	interval time.Duration
	t        *time.Timer
	pending  bool
	stopped  bool
}

func (l *latencyWriter) write(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(b)
	if err == nil && !l.pending {
		l.pending = true
		if l.t == nil {
			l.t = time.AfterFunc(l.interval, l.flush)
		} else {
			l.t.Reset(l.interval)
		}
	}
	return err
}

func (l *latencyWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || !l.pending {
		return
	}
	l.pending = false
	l.w.Flush()
}

func (l *latencyWriter) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.t != nil {
		l.t.Stop()
	}
	if l.pending {
		l.w.Flush()
	}
}

// handleUpgrade turns a 101 response of target t into a two-way tunnel
// between the hijacked client connection and the backend connection,
// closed after the upstream's tunnel idle timeout without data either way.
func (s *site) handleUpgrade(rs *reqState, r *http.Request, rt *route, t *Target, res *http.Response, reqUp string) {
	resUp := upgradeType(res.Header)
	backConn, ok := res.Body.(io.ReadWriteCloser)
	if reqUp == "" || !strings.EqualFold(reqUp, resUp) || !ok {
		res.Body.Close()
		if reqUp == "" {
			// The target switched protocols although the request sent
			// it asked for none (RFC 9110 §15.2.2: a server switches
			// only to a protocol the client listed): its failure, as a
			// malformed response is, which no client can provoke. A
			// switch to another protocol than asked is not charged: a
			// version the client added to the name ("websocket/13")
			// may be left out of a conforming answer.
			rt.up.fail(t, "switched to protocol "+strconv.Quote(resUp)+" unasked")
		}
		s.errorResponse(rs, r, http.StatusBadGateway, "upstream protocol switch failed", "backend switched to protocol "+resUp+" but "+reqUp+" was requested")
		return
	}
	defer backConn.Close()
	// The tunnel is tracked before the hijack: from the hijack on, the
	// HTTP/1.1 server no longer counts this connection, and Shutdown must
	// not find nothing to wait for in between.
	if !s.p.trackAdd(backConn) {
		s.errorResponse(rs, r, http.StatusServiceUnavailable, "shutting down", "the proxy closed before the protocol switch")
		return
	}
	defer s.p.trackDone(backConn)
	conn, brw, err := http.NewResponseController(rs.w.rw).Hijack()
	if err != nil {
		s.errorResponse(rs, r, http.StatusInternalServerError, "protocol switch failed", "cannot hijack client connection: "+err.Error())
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	hdr := res.Header.Clone()
	// Only the switch itself is hop-by-hop that goes on (RFC 9110 §7.6.1,
	// §7.8): the other fields the backend named in Connection, Keep-Alive
	// and the like are removed as for any response.
	upgrade := hdr["Upgrade"]
	removeHopByHop(hdr)
	hdr["Connection"], hdr["Upgrade"] = []string{"Upgrade"}, upgrade
	if rs.reqID != "" {
		hdr[rt.reqIDHeader] = []string{rs.reqID} // the proxy's, not the target's
	}
	rt.resOps.apply(hdr)
	res.Header = hdr
	res.Body = nil
	// The status line is the proxy's, as for any other response: its
	// version (RFC 9110 §6.2) and reason. The backend's reason may hold
	// a bare CR, which net/http's reader keeps and no sender may generate
	// (RFC 9112 §2.2): a client ending lines there would read fields the
	// edits above never saw.
	res.Status = ""
	res.Proto, res.ProtoMajor, res.ProtoMinor = "HTTP/1.1", 1, 1
	if err = res.Write(brw); err == nil {
		err = brw.Flush()
	}
	rs.w.wroteHeader, rs.w.status = true, http.StatusSwitchingProtocols
	if err != nil {
		s.p.logger.Debug("upgrade: writing 101 failed", "error", err)
		return
	}
	client := io.ReadWriteCloser(conn)
	if n := brw.Reader.Buffered(); n > 0 {
		client = &prefixConn{Conn: conn, r: io.MultiReader(io.LimitReader(brw.Reader, int64(n)), conn)}
	}
	if d := s.p.limitsOf(rs.ci).SendTimeout; d > 0 {
		// A client that stops reading would otherwise hold the tunnel
		// (and its target) for as long as it sends a byte now and then.
		// The bound is the connection's listener's, as for its
		// responses, not the proxy's own.
		client = &sendBounded{ReadWriteCloser: client, conn: conn, d: d}
	}
	if !s.p.trackAdd(conn) {
		return
	}
	defer s.p.trackDone(conn)
	defer s.p.streamOpened(s.name, rt.up.name)()
	in, out := pipe(client, backConn, rt.up.tunnelIdle, func(in, out int64) { s.p.obs.StreamBytes(s.name, rt.up.name, in, out) })
	rs.bytesIn += in
	rs.w.bytes += out
}

// forwardExtendedConnect serves an RFC 8441 extended CONNECT (WebSocket
// over an h2 stream) by opening an HTTP/1.1 Upgrade to the backend and
// shuttling bytes between the h2 stream and the backend connection.
// x/net/http2 only lets such requests through when the process runs with
// GODEBUG=http2xconnect=1 (read when that package initialises); the daemon
// starts with it (package proxy/extendedconnect; gmproxy re-executes itself).
func (s *site) forwardExtendedConnect(rs *reqState, r *http.Request, rt *route) {
	proto := rt.allowedUpgrade(r.Header.Get(":protocol"))
	if proto == "" {
		s.errorResponse(rs, r, http.StatusNotImplemented, "protocol not supported", "extended CONNECT to protocol "+r.Header.Get(":protocol")+" that the route does not allow")
		return
	}
	h := rs.outgoingHeader(r.Header, rt)
	delete(h, ":protocol")
	h["Connection"] = connUpgrade
	h["Upgrade"] = []string{proto}
	if strings.EqualFold(proto, "websocket") {
		var k [16]byte
		rand.Read(k[:])
		h["Sec-Websocket-Key"] = []string{base64.StdEncoding.EncodeToString(k[:])}
		if h.Get("Sec-Websocket-Version") == "" {
			h["Sec-Websocket-Version"] = []string{"13"}
		}
	}
	clientIP := s.setForwarded(rs, rt, h, r)
	rt.reqOps.apply(h)
	noDefaultUserAgent(h)
	// The WebSocket handshake with the target is the proxy's own (RFC
	// 8441 §5 has none on the h2 side), so the proxy checks its answer
	// as a client must (RFC 6455 §4.1).
	var wantAccept string
	if key := h.Get("Sec-Websocket-Key"); key != "" && strings.EqualFold(proto, "websocket") {
		wantAccept = websocketAccept(key)
	}
	rs.setURL(r, rt)
	outreq := rs.newOutgoing(r, rt, nil)
	outreq.Method = http.MethodGet
	outreq.ContentLength = 0
	outreq.Proto, outreq.ProtoMajor, outreq.ProtoMinor = "HTTP/1.1", 1, 1
	res, t := s.roundTrip(rs, r, rt, outreq, clientIP, nil, nil)
	defer rs.endWatches()
	if res == nil {
		return
	}
	defer t.inflight.Add(-1)
	// Any 2xx answer to a CONNECT opens the tunnel (RFC 9110 §9.3.6, RFC
	// 8441 §5): only the target's switch to the protocol asked for may
	// become one. A refusal (4xx, 5xx, 3xx) goes to the client as it is.
	if sc := res.StatusCode; sc != http.StatusSwitchingProtocols && (sc < 200 || sc > 299) {
		s.handleResponse(rs, r, rt, t, res, "")
		return
	}
	resUp := upgradeType(res.Header)
	backConn, ok := res.Body.(io.ReadWriteCloser)
	if res.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resUp, proto) || !ok {
		res.Body.Close()
		s.errorResponse(rs, r, http.StatusBadGateway, "upstream protocol switch failed",
			"extended CONNECT to "+proto+": backend answered "+res.Status+" switching to "+strconv.Quote(resUp))
		return
	}
	if wantAccept != "" && res.Header.Get("Sec-Websocket-Accept") != wantAccept {
		backConn.Close()
		// The key is the proxy's, not the client's: a wrong answer is
		// the target's failure, which no client can provoke.
		rt.up.fail(t, "Sec-WebSocket-Accept does not answer the key sent")
		s.errorResponse(rs, r, http.StatusBadGateway, "upstream protocol switch failed",
			"extended CONNECT to websocket: the backend's Sec-WebSocket-Accept does not answer the key sent")
		return
	}
	defer backConn.Close()
	// The switch's fields go to the client in the 200 that opens its
	// tunnel (a cookie set in the handshake among them), as
	// handleUpgrade passes them in a 101, less what belongs to the
	// proxy's own handshake with the target: the hop-by-hop fields and
	// those Connection names, Sec-WebSocket-Accept (none over h2, RFC
	// 8441 §5), and Content-Length, which a 2xx to a CONNECT must not
	// carry (RFC 9110 §9.3.6).
	removeHopByHop(res.Header)
	delete(res.Header, "Sec-Websocket-Accept")
	delete(res.Header, "Content-Length")
	dst := rs.w.Header()
	for k, vv := range res.Header {
		if k != rt.reqIDHeader { // the proxy's, set in dst, stays
			dst[k] = vv
		}
	}
	rt.resOps.apply(dst)
	// The tunnel outlives its request: read_timeout and write_timeout
	// bound a request and its response, and the HTTP/1.1 server's
	// deadlines are cleared at the hijack (handleUpgrade). Here the
	// tunnel is the request's stream, whose deadlines would cut it:
	// they go, and send_timeout (armed anew, without the write_timeout
	// bound) still bounds each write, the idle timeout the tunnel.
	if rd, ok := rs.w.rw.(readDeadliner); ok {
		rd.SetReadDeadline(time.Time{})
	}
	if wd, ok := rs.w.rw.(writeDeadliner); ok {
		wd.SetWriteDeadline(time.Time{})
	}
	rs.w.send.limit, rs.w.send.last = time.Time{}, 0
	rs.w.WriteHeader(http.StatusOK)
	rs.w.Flush()
	if !s.p.trackAdd(backConn) {
		return
	}
	defer s.p.trackDone(backConn)
	defer s.p.streamOpened(s.name, rt.up.name)()
	in, _ := pipe(streamSide{r.Body, &rs.w}, backConn, rt.up.tunnelIdle, func(in, out int64) { s.p.obs.StreamBytes(s.name, rt.up.name, in, out) })
	rs.bytesIn += in
}

// websocketAccept is the Sec-WebSocket-Accept that answers key (RFC 6455
// §4.2.2): base64 of the SHA-1 of key and the protocol's GUID.
func websocketAccept(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// streamSide is the client's side of an extended CONNECT tunnel for
// pipe: the request body in, the response out, flushed after every
// write. Closing it closes the request body, which fails a blocked read;
// the stream ends when the handler returns. A tunnel cut (abort) also
// fails a blocked write, so that the handler returns at once rather than
// when send_timeout passes.
type streamSide struct {
	body io.ReadCloser
	w    *respWriter
}

func (s streamSide) Read(p []byte) (int, error) { return s.body.Read(p) }

func (s streamSide) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err == nil {
		s.w.Flush()
	}
	return n, err
}

func (s streamSide) Close() error { return s.body.Close() }

// abort is pipe's end of the tunnel for an idle timeout or an error: the
// write deadline set to now fails a write blocked on a client that no
// longer reads, and x/net/http2 resets the stream.
func (s streamSide) abort() {
	if wd, ok := s.w.rw.(writeDeadliner); ok {
		wd.SetWriteDeadline(time.Now())
	}
}

// aborter is a side of a tunnel that ends differently when the tunnel is
// cut (idle, error) than when it ends in order.
type aborter interface{ abort() }

// sendBounded is the client's side of a tunnel whose writes must each go
// out within d (send_timeout; a stream site's idle_timeout): the write
// deadline is moved 9/8 of d ahead at most every eighth of d, so a write
// that takes no byte fails after between d and 9/8 of d (never before d)
// and cuts the tunnel. The idle
// watchdog alone would not: a client that reads nothing but sends a byte
// now and then keeps the tunnel busy.
type sendBounded struct {
	io.ReadWriteCloser
	conn net.Conn // the connection underneath, for its deadline and half-close
	d    time.Duration
	set  int64 // monoclock ns when the deadline was last moved; 0: never
}

func (c *sendBounded) Write(p []byte) (int, error) {
	// Aged on the monotonic clock the deadline runs on: after a step
	// back of the wall clock, a deadline long past was kept.
	if now := monoclock.Now(); c.set == 0 || now-c.set >= int64(c.d/8) {
		c.set = now
		c.conn.SetWriteDeadline(time.Now().Add(c.d + c.d/8))
	}
	return c.ReadWriteCloser.Write(p)
}

// NetConn returns the connection underneath (closeWrite looks through it).
func (c *sendBounded) NetConn() net.Conn { return c.conn }

// prefixConn reads buffered bytes first.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// streamReportInterval is how often long tunnels and streams report the
// bytes moved so far (Observer.StreamBytes takes deltas), in ns (tests
// shorten it).
var streamReportInterval = func() *atomic.Int64 {
	var d atomic.Int64
	d.Store(int64(5 * time.Second))
	return &d
}()

// pipe copies a→b and b→a until both directions end and returns the byte
// counts (a→b, b→a). A direction ending with EOF half-closes the other
// side when possible; an error closes both. idle > 0 closes both when
// neither direction moved data for that long. The idle check is a
// watchdog, not read deadlines, so it works the same on every connection
// type (TLCP, TLS 1.3-SM, hijacked HTTP) and costs nothing per read.
// report, if set, receives the bytes moved since its previous call
// every streamReportInterval and once at the end.
func pipe(a, b io.ReadWriteCloser, idle time.Duration, report func(ab, ba int64)) (ab, ba int64) {
	// last is when data last moved (monoclock ns): idle is a duration, which
	// a step of the wall clock must neither end nor stretch.
	var last, nab, nba atomic.Int64
	last.Store(monoclock.Now())
	// end closes both sides once; aborted (an idle timeout or an error,
	// not an orderly end) tells a that can tell (aborter).
	var closeOnce sync.Once
	end := func(aborted bool) {
		closeOnce.Do(func() {
			if ab, ok := a.(aborter); ok && aborted {
				ab.abort()
			}
			a.Close()
			b.Close()
		})
	}
	var reported [2]int64
	flush := func() {
		x, y := nab.Load(), nba.Load()
		if report != nil && (x != reported[0] || y != reported[1]) {
			report(x-reported[0], y-reported[1])
			reported = [2]int64{x, y}
		}
	}
	stop := make(chan struct{})
	watch := make(chan struct{})
	if idle > 0 || report != nil {
		go func() {
			defer close(watch)
			every := time.Duration(streamReportInterval.Load())
			period := every
			if idle > 0 {
				period = min(period, max(idle/4, 5*time.Millisecond))
			}
			tick := time.NewTicker(period)
			defer tick.Stop()
			lastReport := time.Now()
			for {
				select {
				case <-stop:
					return
				case now := <-tick.C:
					if idle > 0 && monoclock.Now()-last.Load() >= int64(idle) {
						end(true)
						return
					}
					if report != nil && now.Sub(lastReport) >= every {
						lastReport = now
						flush()
					}
				}
			}
		}()
	} else {
		close(watch)
	}
	// half copies one direction; an error cuts the tunnel, and a side
	// that cannot take a half close ends it in order.
	half := func(dst, src io.ReadWriteCloser, n *atomic.Int64) {
		if _, err := copyDir(dst, src, &last, n); err != nil {
			end(true)
		} else if !closeWrite(dst) {
			end(false)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		half(a, b, &nba)
	}()
	half(b, a, &nab)
	<-done
	close(stop)
	<-watch
	end(false)
	flush()
	return nab.Load(), nba.Load()
}

// closeWrite half-closes c, looking through wrappers (prefixConn, and
// connections with NetConn such as frontdoor.Conn) for a CloseWrite.
// closeWriteOf is closeWrite as a CloseWrite method's error.
func closeWriteOf(c io.Closer) error {
	if !closeWrite(c) {
		return errors.ErrUnsupported
	}
	return nil
}

func closeWrite(c io.Closer) bool {
	for range 4 {
		if pc, ok := c.(*prefixConn); ok {
			c = pc.Conn
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			return cw.CloseWrite() == nil
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		c = nc.NetConn()
	}
	return false
}

// copyDir copies src to dst, noting activity in last and the count in n;
// it returns nil on EOF.
func copyDir(dst io.Writer, src io.Reader, last, n *atomic.Int64) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var total int64
	for {
		nr, err := src.Read(buf)
		if nr > 0 {
			last.Store(monoclock.Now())
			w, werr := dst.Write(buf[:nr])
			if w > 0 {
				// A write to a slow reader moves data until it
				// returns: the idle time counts from its end.
				last.Store(monoclock.Now())
			}
			total += int64(w)
			n.Add(int64(w))
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
