// Package stime is the engine of `gmproxy s_time`: it opens connections to a
// server as fast as a number of workers can, runs a client handshake on each
// through a protocol-specific Handshaker (TLCP, TLS 1.3-SM or crypto/tls; the
// command plugs them in), optionally sends HTTP requests (one per connection,
// or many over kept-alive connections), and reports connections/s,
// requests/s, handshake latency percentiles, bytes/s and errors by kind.
//
// Every run is bounded: by Duration, by Total, and each network operation by
// OpTimeout.
package stime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ConnInfo is what a Handshaker reports about an established connection.
type ConnInfo struct {
	Resumed bool
	Version string // e.g. "NTLSv1.1", "TLSv1.3"
	Cipher  string
}

// Handshaker runs the client handshake on raw and returns the secured
// connection. It must honour ctx (cancel the handshake when ctx is done) and
// close nothing on error (the caller closes raw).
type Handshaker func(ctx context.Context, raw net.Conn) (net.Conn, ConnInfo, error)

// Config describes a run.
type Config struct {
	// Addr is the host:port to connect to.
	Addr string
	// Dial opens the TCP connection (default: net.Dialer with OpTimeout).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Handshake secures each connection. Required.
	Handshake Handshaker
	// Reuse primes the session cache behind Handshake with one connection
	// that is not counted, so that measured connections resume (openssl
	// s_time -reuse). The Handshaker must share a session cache.
	Reuse bool
	// Concurrency is the number of workers (default 1).
	Concurrency int
	// Duration bounds the run (default 30 s when Total is 0, else 10 min).
	Duration time.Duration
	// Total bounds the number of measured connections, or of requests with
	// KeepAlive (0: no bound other than Duration).
	Total int64
	// Path, when set, is requested with GET after each handshake ("-www").
	Path string
	// Host is the Host header (default: the host part of Addr).
	Host string
	// KeepAlive sends requests for Path over kept-alive connections, one
	// connection per worker reopened when the server closes it.
	KeepAlive bool
	// Rate, when positive, paces the run to at most Rate connections per
	// second (requests per second with KeepAlive), spread over the workers;
	// used to measure latency below the peak rate. A worker that falls
	// behind the schedule starts its next operation at once, and latency is
	// measured from the time the schedule said the operation should start,
	// so that a slow server cannot hide its queue (no coordinated omission).
	Rate float64
	// Progress, when set, is called about once a second during the run
	// with the time elapsed and the counts so far.
	Progress func(elapsed time.Duration, conns, requests, errors int64)
	// OpTimeout bounds each dial, handshake and request (default 10 s).
	OpTimeout time.Duration
	// MaxSamples caps the handshake latencies kept for percentiles (default
	// 1<<20; beyond it a uniform reservoir sample is kept).
	MaxSamples int
}

// Latency holds handshake latency statistics in seconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
	// Histogram counts the kept samples in buckets whose upper bounds
	// double from 100 µs (the last bucket holds everything above).
	Histogram []Bucket `json:"histogram,omitempty"`
}

// Bucket is one latency histogram bucket: Count samples of at most Le
// seconds and more than the previous bucket's Le (Le is +Inf, encoded as
// 0, for the last).
type Bucket struct {
	Le    float64 `json:"le"`
	Count int64   `json:"count"`
}

// Result is the outcome of a run.
type Result struct {
	Addr        string  `json:"addr"`
	Protocol    string  `json:"protocol,omitempty"`
	Mode        string  `json:"mode"` // "new" or "reuse"
	KeepAlive   bool    `json:"keepalive"`
	Path        string  `json:"path,omitempty"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"` // pacing target, 0 = as fast as possible
	Elapsed     float64 `json:"elapsed_seconds"`
	Connections int64   `json:"connections"` // completed handshakes
	Resumed     int64   `json:"resumed"`
	Requests    int64   `json:"requests"`
	Bytes       int64   `json:"bytes"` // body bytes of the successful requests
	ConnPerSec  float64 `json:"connections_per_second"`
	ReqPerSec   float64 `json:"requests_per_second"`
	BytesPerSec float64 `json:"bytes_per_second"`
	Handshake   Latency `json:"handshake_latency"`
	// Request is the latency of successful HTTP requests, from writing the
	// request to the end of the response body.
	Request    Latency          `json:"request_latency"`
	Errors     map[string]int64 `json:"errors"`
	ErrorCount int64            `json:"error_count"`
	Versions   map[string]int64 `json:"versions"`
	Ciphers    map[string]int64 `json:"ciphers"`
	// FirstError is the text of one error, to help diagnose.
	FirstError string `json:"first_error,omitempty"`
}

// run is the shared state of one run.
type run struct {
	cfg   Config
	ctx   context.Context
	end   time.Time // the run's deadline
	start time.Time
	slots atomic.Int64 // pacing slots handed out
	host  string
	quota atomic.Int64 // remaining units when Total > 0

	conns, resumed, requests, bytes atomic.Int64

	mu         sync.Mutex
	hs, req    sampler // handshake and request latencies
	errors     map[string]int64
	firstError string
	versions   map[string]int64
	ciphers    map[string]int64
}

// sampler keeps latency statistics: exact count, mean and max, and a uniform
// reservoir of at most max samples for percentiles (Algorithm R).
type sampler struct {
	max     int
	rng     *rand.Rand
	samples []time.Duration
	seen    int64
	sum     time.Duration
	top     time.Duration
}

func newSampler(max int, seed uint64) sampler {
	return sampler{max: max, rng: rand.New(rand.NewPCG(seed, 2))}
}

func (s *sampler) add(d time.Duration) {
	s.sum += d
	s.top = max(s.top, d)
	s.seen++
	if len(s.samples) < s.max {
		s.samples = append(s.samples, d)
	} else if j := s.rng.Int64N(s.seen); j < int64(len(s.samples)) {
		s.samples[j] = d
	}
}

func (s *sampler) latency() Latency {
	l := Latency{Count: s.seen, Max: s.top.Seconds()}
	if s.seen == 0 || len(s.samples) == 0 {
		return l
	}
	l.Mean = s.sum.Seconds() / float64(s.seen)
	sorted := append([]time.Duration(nil), s.samples...)
	slices.Sort(sorted)
	l.P50, l.P90, l.P99 = Percentile(sorted, 50).Seconds(), Percentile(sorted, 90).Seconds(), Percentile(sorted, 99).Seconds()
	l.P999 = Percentile(sorted, 99.9).Seconds()
	l.Histogram = histogram(sorted)
	return l
}

// histogram buckets sorted samples by upper bounds doubling from 100 µs,
// up to the bucket of the largest sample.
func histogram(sorted []time.Duration) []Bucket {
	var out []Bucket
	i := 0
	for le := 100 * time.Microsecond; i < len(sorted); le *= 2 {
		n := 0
		for i < len(sorted) && sorted[i] <= le {
			i++
			n++
		}
		out = append(out, Bucket{Le: le.Seconds(), Count: int64(n)})
		if le > time.Hour {
			out = append(out, Bucket{Count: int64(len(sorted) - i)})
			break
		}
	}
	return out
}

// Run executes a run and returns its result. The error is for an invalid
// configuration or a failed priming connection; failures during the run are
// counted in Result.Errors.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Handshake == nil {
		return nil, errors.New("stime: no handshaker")
	}
	if cfg.Addr == "" {
		return nil, errors.New("stime: no address")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 10 * time.Second
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 30 * time.Second
		if cfg.Total > 0 {
			cfg.Duration = 10 * time.Minute
		}
	}
	if cfg.MaxSamples <= 0 {
		cfg.MaxSamples = 1 << 20
	}
	if cfg.KeepAlive && cfg.Path == "" {
		cfg.Path = "/"
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.OpTimeout}
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	host := cfg.Host
	if host == "" {
		host = cfg.Addr
		if h, _, err := net.SplitHostPort(cfg.Addr); err == nil {
			host = h
			if strings.Contains(h, ":") {
				host = "[" + h + "]"
			}
		}
	}
	r := &run{cfg: cfg, host: host, errors: map[string]int64{}, versions: map[string]int64{},
		ciphers: map[string]int64{}, hs: newSampler(cfg.MaxSamples, 1), req: newSampler(cfg.MaxSamples, 3)}
	r.quota.Store(cfg.Total)

	if cfg.Reuse {
		if err := r.prime(ctx); err != nil {
			return nil, fmt.Errorf("stime: priming connection for -reuse: %w", err)
		}
		r.requests.Store(0) // the priming connection is not measured
		r.bytes.Store(0)
		r.req = newSampler(cfg.MaxSamples, 3)
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	r.ctx = runCtx
	r.end, _ = runCtx.Deadline()
	start := time.Now()
	r.start = start
	var wg sync.WaitGroup
	for i := 0; i < cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.KeepAlive {
				r.keepAliveWorker()
			} else {
				r.connWorker()
			}
		}()
	}
	stopProgress := r.progress()
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start)
	return r.result(elapsed), nil
}

// progress calls Config.Progress once a second until the returned stop.
func (r *run) progress() (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.mu.Lock()
				var errs int64
				for _, n := range r.errors {
					errs += n
				}
				r.mu.Unlock()
				r.cfg.Progress(time.Since(r.start), r.conns.Load(), r.requests.Load(), errs)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// take reserves one unit of the Total budget and, with Rate, waits for its
// slot in the schedule. It returns false when the run is over, else the
// time the operation was due to start: the scheduled time with Rate (even
// when the worker is late), the present without.
func (r *run) take(w waiter) (time.Time, bool) {
	if r.cfg.Total > 0 && r.quota.Add(-1) < 0 {
		return time.Time{}, false
	}
	if r.cfg.Rate <= 0 {
		return time.Now(), true
	}
	slot := r.slots.Add(1) - 1
	off := float64(slot) / r.cfg.Rate * float64(time.Second)
	if !(off < float64(r.cfg.Duration)) {
		// Due after the run ends (at a very low rate, past what a
		// time.Duration holds, which would read as a time long past
		// and start it at once): the slot never comes.
		w.wait(r.ctx, r.cfg.Duration)
		r.giveBack()
		return time.Time{}, false
	}
	due := r.start.Add(time.Duration(off))
	if wait := time.Until(due); wait > 0 && !w.wait(r.ctx, wait) {
		r.giveBack()
		return time.Time{}, false
	}
	if r.done() {
		r.giveBack()
		return time.Time{}, false
	}
	return due, true
}

// waiter returns a worker's waiter for its paced starts (none is needed
// without Rate).
func (r *run) waiter() waiter {
	if r.cfg.Rate <= 0 {
		return timerWaiter{}
	}
	return newWaiter()
}

// giveBack returns a unit that was not used (the run ended during it).
func (r *run) giveBack() {
	if r.cfg.Total > 0 {
		r.quota.Add(1)
	}
}

// opDeadline bounds one request: OpTimeout from now, but not past the end
// of the run (a request cut by the end of the run is not an error).
func (r *run) opDeadline() time.Time {
	d := time.Now().Add(r.cfg.OpTimeout)
	if !r.end.IsZero() && r.end.Before(d) {
		return r.end
	}
	return d
}

// done reports whether the run is over. It also compares the clock with the
// deadline: socket deadlines can fire before the context's timer runs.
func (r *run) done() bool { return r.ctx.Err() != nil || !time.Now().Before(r.end) }

// prime runs one uncounted connection so that the session cache holds a
// session; it reads briefly so that TLS 1.3 tickets sent after the handshake
// are processed.
func (r *run) prime(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
	defer cancel()
	conn, _, _, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if r.cfg.Path != "" {
		if _, err := r.request(conn, newResponseReader(conn), false, time.Time{}); err != nil {
			return err
		}
		return nil
	}
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	conn.Read(b[:])
	return nil
}

// connect dials and handshakes, bounded by OpTimeout and ctx.
func (r *run) connect(ctx context.Context) (net.Conn, ConnInfo, time.Duration, error) {
	opCtx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
	defer cancel()
	raw, err := r.cfg.Dial(opCtx, r.cfg.Addr)
	if err != nil {
		return nil, ConnInfo{}, 0, &stageError{"dial", err}
	}
	if dl, ok := opCtx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	t0 := time.Now()
	conn, info, err := r.cfg.Handshake(opCtx, raw)
	d := time.Since(t0)
	if err != nil {
		raw.Close()
		return nil, info, d, &stageError{"handshake", err}
	}
	return conn, info, d, nil
}

// connectCounted connects and records the handshake. On failure it
// returns a nil conn and records the error, or, when the run has ended,
// gives the iteration's budget unit back and reports over. With Rate the
// recorded latency runs from due, the scheduled start, to the end of the
// handshake (dial and any lateness included).
func (r *run) connectCounted(due time.Time) (conn net.Conn, over bool) {
	c, info, d, err := r.connect(r.ctx)
	if err != nil {
		if r.done() {
			r.giveBack()
			return nil, true
		}
		r.fail(err)
		return nil, false
	}
	if r.cfg.Rate > 0 {
		d = time.Since(due)
	}
	r.handshakeOK(info, d)
	return c, false
}

// connWorker runs one new connection per iteration: handshake, optional
// request, close.
func (r *run) connWorker() {
	w := r.waiter()
	defer w.close()
	for !r.done() {
		due, ok := r.take(w)
		if !ok {
			return
		}
		conn, over := r.connectCounted(due)
		if over {
			return
		}
		if conn == nil {
			continue
		}
		if r.cfg.Path != "" {
			conn.SetDeadline(r.opDeadline())
			if _, err := r.request(conn, newResponseReader(conn), false, time.Time{}); err != nil && !r.done() {
				r.fail(&stageError{"request", err})
			}
		}
		conn.Close()
	}
}

// keepAliveWorker sends requests over one connection, reconnecting when the
// server closes it.
func (r *run) keepAliveWorker() {
	var (
		conn net.Conn
		br   *responseReader
	)
	w := r.waiter()
	defer func() {
		w.close()
		if conn != nil {
			conn.Close()
		}
	}()
	for !r.done() {
		// A request's budget unit is taken first, so that failing
		// connections also use up -n.
		due, ok := r.take(w)
		if !ok {
			return
		}
		if conn == nil {
			c, over := r.connectCounted(due)
			if over {
				return
			}
			if c == nil {
				continue
			}
			conn, br = c, newResponseReader(c)
		}
		conn.SetDeadline(r.opDeadline())
		keep, err := r.request(conn, br, true, due)
		if err != nil {
			if r.done() {
				r.giveBack()
				return
			}
			r.fail(&stageError{"request", err})
		}
		if err != nil || !keep {
			conn.Close()
			conn = nil
		}
	}
}

// request sends one GET and reads the response; it reports whether the
// connection may carry another request. With Rate, a kept-alive request's
// latency runs from due, its scheduled start.
func (r *run) request(conn net.Conn, br *responseReader, keepAlive bool, due time.Time) (bool, error) {
	connHdr := "close"
	if keepAlive {
		connHdr = "keep-alive"
	}
	req := "GET " + r.cfg.Path + " HTTP/1.1\r\nHost: " + r.host + "\r\nUser-Agent: gmproxy-s_time\r\nConnection: " + connHdr + "\r\n\r\n"
	t0 := time.Now()
	if _, err := io.WriteString(conn, req); err != nil {
		return false, err
	}
	resp, err := readFinalResponse(br)
	if err != nil {
		return false, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return false, err
	}
	if resp.StatusCode >= 400 {
		return !resp.Close, &statusError{resp.StatusCode}
	}
	// Only the bodies of the requests that count are throughput: an
	// error page or a cut body is not what -download measures.
	r.bytes.Add(n)
	r.requests.Add(1)
	if keepAlive && r.cfg.Rate > 0 && !due.IsZero() {
		t0 = due
	}
	d := time.Since(t0)
	r.mu.Lock()
	r.req.add(d)
	r.mu.Unlock()
	return keepAlive && !resp.Close, nil
}

// maxInformational bounds the informational responses read before a
// response, as a server could send them for ever.
const maxInformational = 16

// maxResponseHead bounds the bytes read from a connection while a
// response head (informational ones included) is read, as net/http's
// Transport bounds a head: a server that never ends one would otherwise
// be buffered until the operation's timeout.
const maxResponseHead = 1 << 20

// responseReader reads the responses of one connection; its budget for
// the bytes of a head is refilled before each.
type responseReader struct {
	*bufio.Reader
	budget headBudget
}

func newResponseReader(c io.Reader) *responseReader {
	rr := &responseReader{budget: headBudget{r: c}}
	rr.Reader = bufio.NewReader(&rr.budget)
	return rr
}

// headBudget passes reads through while n lasts, when on.
type headBudget struct {
	r  io.Reader
	n  int64
	on bool
}

func (h *headBudget) Read(p []byte) (int, error) {
	if !h.on {
		return h.r.Read(p)
	}
	if h.n <= 0 {
		return 0, fmt.Errorf("malformed HTTP response: head longer than %d bytes", maxResponseHead)
	}
	if int64(len(p)) > h.n {
		p = p[:h.n]
	}
	n, err := h.r.Read(p)
	h.n -= int64(n)
	return n, err
}

// readFinalResponse reads a response, skipping the informational (1xx)
// ones before it (RFC 9110, section 15.2), such as the 103 Early Hints a
// reverse proxy passes on: taken for the response, a 103 would count as a
// success whatever the status that follows, end the request's latency
// early, and leave the real response to be read as the next request's.
func readFinalResponse(br *responseReader) (*http.Response, error) {
	br.budget.n, br.budget.on = maxResponseHead, true
	defer func() { br.budget.on = false }()
	for range maxInformational + 1 {
		resp, err := http.ReadResponse(br.Reader, nil)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
	return nil, fmt.Errorf("malformed HTTP response: more than %d informational responses", maxInformational)
}

func (r *run) handshakeOK(info ConnInfo, d time.Duration) {
	r.conns.Add(1)
	if info.Resumed {
		r.resumed.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hs.add(d)
	if info.Version != "" {
		r.versions[info.Version]++
	}
	if info.Cipher != "" {
		r.ciphers[info.Cipher]++
	}
}

func (r *run) fail(err error) {
	kind := Classify(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[kind]++
	if r.firstError == "" {
		r.firstError = err.Error()
	}
}

func (r *run) result(elapsed time.Duration) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &Result{
		Addr: r.cfg.Addr, Mode: "new", KeepAlive: r.cfg.KeepAlive, Path: r.cfg.Path,
		Concurrency: r.cfg.Concurrency, Rate: r.cfg.Rate, Elapsed: elapsed.Seconds(),
		Connections: r.conns.Load(), Resumed: r.resumed.Load(), Requests: r.requests.Load(), Bytes: r.bytes.Load(),
		Errors: r.errors, Versions: r.versions, Ciphers: r.ciphers, FirstError: r.firstError,
	}
	if r.cfg.Reuse {
		res.Mode = "reuse"
	}
	for _, n := range r.errors {
		res.ErrorCount += n
	}
	if s := elapsed.Seconds(); s > 0 {
		res.ConnPerSec = float64(res.Connections) / s
		res.ReqPerSec = float64(res.Requests) / s
		res.BytesPerSec = float64(res.Bytes) / s
	}
	res.Handshake = r.hs.latency()
	res.Request = r.req.latency()
	return res
}

// Percentile returns the p-th percentile of sorted (nearest-rank method).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	if p >= 100 {
		return sorted[len(sorted)-1]
	}
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(sorted) {
		rank = len(sorted) - 1
	}
	return sorted[rank]
}
