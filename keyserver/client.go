package keyserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the Client.
const (
	DefaultHealthInterval = 2 * time.Second
	DefaultBackoffMin     = 200 * time.Millisecond
	DefaultBackoffMax     = 10 * time.Second
	defaultCallTimeout    = 30 * time.Second
)

// Endpoint is one address of a key server.
type Endpoint struct {
	// Address names the endpoint in logs.
	Address string
	// Dial opens a connection to it (for example a tls.Dialer with a client
	// certificate, or net.Dialer on a Unix socket), within ctx.
	Dial func(ctx context.Context) (net.Conn, error)
}

// Client sends operations to a key server reachable at one or more
// endpoints. Each endpoint gets up to Conns connections, each carrying
// many operations at once. Operations go to the healthy endpoints in turn;
// an endpoint whose connection fails is marked down and retried with
// exponential back-off by a background health check, which also pings the
// live connections every HealthInterval. An operation that fails on a
// connection (not one the key server answered with an error) is retried on
// the next endpoint, within Timeout: all operations are idempotent.
type Client struct {
	Endpoints []Endpoint
	// Conns is the number of connections per endpoint (default 1).
	Conns int
	// MaxInFlight bounds the operations in progress; further ones wait,
	// within their context and Timeout. 0 means unbounded.
	MaxInFlight int
	// Timeout bounds one operation (connecting and failing over included),
	// within the caller's context. 0 means only the caller's context (30 s
	// when it has no deadline).
	Timeout time.Duration
	// HealthInterval is the period of the health check (default
	// DefaultHealthInterval).
	HealthInterval time.Duration
	// BackoffMin and BackoffMax bound the wait before a down endpoint is
	// tried again; it doubles with each failure (defaults DefaultBackoffMin,
	// DefaultBackoffMax).
	BackoffMin, BackoffMax time.Duration
	// Logger receives endpoints going down and coming back (nil: none).
	Logger *slog.Logger

	once   sync.Once
	eps    []*endpoint
	slots  chan struct{}
	next   atomic.Uint32
	stop   chan struct{}
	closed atomic.Bool
	health sync.WaitGroup
}

// ErrTimeout is returned (wrapped) when an operation exceeds
// Client.Timeout.
var ErrTimeout = errors.New("key server: operation timed out")

// ErrClosed is what a Client's operations return after Close.
var ErrClosed = errors.New("key server: client closed")

func (c *Client) init() {
	c.once.Do(func() {
		if c.MaxInFlight > 0 {
			c.slots = make(chan struct{}, c.MaxInFlight)
		}
		c.stop = make(chan struct{})
		for _, e := range c.Endpoints {
			c.eps = append(c.eps, &endpoint{Endpoint: e, c: c, conns: make([]*muxConn, orDefault(c.Conns, 1))})
		}
		if len(c.eps) > 0 {
			c.health.Add(1)
			go c.healthLoop()
		}
	})
}

// Close stops the health check and closes the connections; operations in
// progress fail.
func (c *Client) Close() {
	c.init()
	if c.closed.Swap(true) {
		return
	}
	close(c.stop)
	c.health.Wait()
	for _, e := range c.eps {
		e.closeAll()
	}
}

// Healthy reports, per endpoint address, whether it is up (for tests and
// status pages).
func (c *Client) Healthy() map[string]bool {
	c.init()
	m := map[string]bool{}
	for _, e := range c.eps {
		e.mu.Lock()
		m[e.Address] = !e.down
		e.mu.Unlock()
	}
	return m
}

// Ping checks that an endpoint of the key server answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.call(ctx, OpPing, nil, nil)
	return err
}

// call runs one operation, bounded by ctx and c.Timeout, failing over
// between endpoints.
func (c *Client) call(ctx context.Context, op Op, keyID []byte, payload []byte) ([]byte, error) {
	c.init()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if len(c.eps) == 0 {
		return nil, errors.New("key server: no endpoints")
	}
	if frameSize(keyID, payload) > MaxFrame {
		// Refused here, alone: a peer's oversized input (a TLCP client's
		// ClientKeyExchange ciphertext takes up to 64 KiB) must not fail
		// the connection that other operations share, nor the endpoint.
		return nil, errRequestTooLarge
	}
	parent := ctx
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, ErrTimeout)
		defer cancel()
	} else if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCallTimeout)
		defer cancel()
	}
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, c.ctxErr(parent, ctx, "waiting for a slot")
		}
		defer func() { <-c.slots }()
	}
	var last error
	eps := c.order()
	for i, e := range eps {
		// With a healthy endpoint to fail over to, an attempt has half
		// the time left: one that answers pings but not operations
		// (stuck, overloaded) must leave time for the next.
		actx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok && i+1 < len(eps) && !eps[i+1].isDown() {
			actx, cancel = context.WithDeadlineCause(ctx, time.Now().Add(time.Until(dl)/2), errAttemptTimeout)
		}
		out, err := e.call(actx, op, keyID, payload)
		cancel()
		if err == nil || !failover(err) {
			return out, err
		}
		last = err
		if expired(ctx) {
			break
		}
	}
	if expired(ctx) {
		what := "waiting for the answer"
		if errors.Is(last, errDial) {
			what = "connecting"
		}
		return nil, c.ctxErr(parent, ctx, what)
	}
	return nil, last
}

var errRequestTooLarge = fmt.Errorf("key server: request larger than a frame (%d bytes)", MaxFrame)

// expired reports whether ctx is done or its deadline (also set on the
// connections) has passed just before ctx noticed.
func expired(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || (ok && !time.Now().Before(dl))
}

// failover reports whether an operation that failed with err may succeed
// on another endpoint: a transport failure, or an answer about that key
// server's own state, which another need not share: going away, too busy,
// an internal failure, or not holding the key (a server not yet reloaded
// with a new key, or keys spread over servers). An answer about the
// request or the client holds everywhere and is final: the ciphertext does
// not decrypt (CodeFailed: a hostile client's must not cost every key
// server a decryption), the request is malformed, or the client's policy
// refuses it (forbidden, wrong role, rate limited).
func failover(err error) bool {
	var ke *Error
	if errors.As(err, &ke) {
		switch ke.Code {
		case CodeUnavailable, CodeBusy, CodeInternal, CodeUnknownKey:
			return true
		}
		return false
	}
	return true
}

// order returns the endpoints to try: the healthy ones, starting with the
// next in turn, then the down ones, soonest retry first.
func (c *Client) order() []*endpoint {
	n := len(c.eps)
	if n == 1 {
		return c.eps
	}
	start := int(c.next.Add(1)) % n
	up := make([]*endpoint, 0, n)
	var down []*endpoint
	for i := range n {
		e := c.eps[(start+i)%n]
		e.mu.Lock()
		isDown := e.down
		e.mu.Unlock()
		if isDown {
			down = append(down, e)
		} else {
			up = append(up, e)
		}
	}
	for i := 1; i < len(down); i++ { // few endpoints: insertion sort
		for j := i; j > 0 && down[j].retryAt().Before(down[j-1].retryAt()); j-- {
			down[j], down[j-1] = down[j-1], down[j]
		}
	}
	return append(up, down...)
}

// ctxErr is the error of an operation whose context ended: the caller's
// own error when its context ended (or its deadline came first), else
// ErrTimeout.
func (c *Client) ctxErr(parent, ctx context.Context, what string) error {
	if err := parent.Err(); err != nil {
		return err
	}
	if c.Timeout <= 0 {
		return context.DeadlineExceeded
	}
	if pd, ok := parent.Deadline(); ok {
		if d, _ := ctx.Deadline(); !pd.After(d) {
			return context.DeadlineExceeded
		}
	}
	return fmt.Errorf("%w after %s (%s)", ErrTimeout, c.Timeout, what)
}

// errDial marks a failure to connect.
var errDial = errors.New("connecting")

// errAttemptTimeout ends an attempt on one endpoint that took half an
// operation's time, so that the next endpoint gets the rest.
var errAttemptTimeout = errors.New("key server: no answer within half the operation's time")

// errCheckTimeout ends a health check that took its whole time.
var errCheckTimeout = errors.New("key server: no answer within the health check's time")

// errNoAnswer is the failure of an operation whose answer did not come
// within its time (or its attempt's): its endpoint is marked down, and
// its connection closed when nothing at all came back on it meanwhile.
var errNoAnswer = errors.New("no answer from the key server")

// endpoint is one address with its connections and health.
type endpoint struct {
	Endpoint
	c *Client

	mu       sync.Mutex
	conns    []*muxConn
	next     int
	dialing  []chan struct{} // per slot, while a dial runs
	down     bool
	failures int
	retry    time.Time
}

func (e *endpoint) isDown() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.down
}

func (e *endpoint) retryAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.retry
}

// call runs one operation on a connection of e. A connection that breaks
// under an operation is replaced once when it was not new.
func (e *endpoint) call(ctx context.Context, op Op, keyID, payload []byte) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		mc, fresh, err := e.conn(ctx)
		if err != nil {
			return nil, err
		}
		out, err := mc.do(ctx, op, keyID, payload)
		var te *transportError
		if errors.As(err, &te) && !fresh && attempt == 0 && ctx.Err() == nil {
			continue // a stale connection (say, closed for idleness)
		}
		if errors.As(err, &te) && (ctx.Err() == nil || errors.Is(err, errNoAnswer)) {
			e.markDown(err)
		}
		return out, err
	}
}

// conn returns a live connection of e, dialing one into a free slot when
// needed (one dial per slot at a time); fresh reports a new one.
func (e *endpoint) conn(ctx context.Context) (*muxConn, bool, error) {
	e.mu.Lock()
	if e.dialing == nil {
		e.dialing = make([]chan struct{}, len(e.conns))
	}
	i := e.next
	e.next = (e.next + 1) % len(e.conns)
	for {
		if mc := e.conns[i]; mc != nil && !mc.isDead() {
			e.mu.Unlock()
			return mc, false, nil
		}
		wait := e.dialing[i]
		if wait == nil {
			break
		}
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		e.mu.Lock()
	}
	wait := make(chan struct{})
	e.dialing[i] = wait
	e.mu.Unlock()

	mc, err := e.dial(ctx)
	e.mu.Lock()
	e.dialing[i] = nil
	close(wait)
	if err == nil && e.c.closed.Load() {
		// Close ran during the dial: its closeAll (under e.mu, after
		// closed was set) did not see this connection, so it is closed
		// here rather than kept, with its reader, until the key server's
		// idle timeout.
		mc.close(ErrClosed)
		mc, err = nil, ErrClosed
	}
	if err == nil {
		if old := e.conns[i]; old != nil {
			old.close(ErrClosed)
		}
		e.conns[i] = mc
	}
	e.mu.Unlock()
	if err != nil {
		// A dial cut by the time its operation, attempt or health check
		// gives the endpoint failed as much as a refused one: an address
		// whose host is off (no answer at all) must go down too. One
		// whose caller gave up says nothing of the endpoint.
		if ctx.Err() == nil || timedOut(ctx) {
			e.markDown(err)
		}
		return nil, false, err
	}
	e.markUp()
	return mc, true, nil
}

// timedOut reports whether ctx ended for the time the client gives the
// key server (an operation's Timeout, an attempt's half of it, a health
// check's), not because its caller gave up.
func timedOut(ctx context.Context) bool {
	switch context.Cause(ctx) {
	case ErrTimeout, errAttemptTimeout, errCheckTimeout:
		return true
	}
	return false
}

// dial opens and greets a connection.
func (e *endpoint) dial(ctx context.Context) (*muxConn, error) {
	if e.c.closed.Load() {
		return nil, ErrClosed
	}
	nc, err := e.Dial(ctx)
	if err != nil {
		return nil, &transportError{fmt.Errorf("%w %s: %w", errDial, e.Address, err)}
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	br := bufio.NewReaderSize(nc, 16<<10)
	err = greetServer(nc, br)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		nc.Close()
		var ke *Error
		if errors.As(err, &ke) {
			return nil, err
		}
		return nil, &transportError{fmt.Errorf("%w %s: greeting: %w", errDial, e.Address, err)}
	}
	nc.SetDeadline(time.Time{})
	return newMuxConn(nc, br), nil
}

// greetServer exchanges the hellos: a key server of another protocol
// version gives an *Error with CodeVersion.
func greetServer(nc net.Conn, br *bufio.Reader) error {
	if _, err := nc.Write(appendHello(nil, Version)); err != nil {
		return err
	}
	v, _, err := readHello(br)
	switch {
	case errors.Is(err, errV1):
		return &Error{Code: CodeVersion, Detail: fmt.Sprintf("the key server speaks protocol version 1 (the unversioned framing of earlier releases), this gmproxy version %d: upgrade the key server", Version)}
	case err != nil:
		return err
	case v != Version:
		return &Error{Code: CodeVersion, Detail: fmt.Sprintf("the key server speaks protocol version %d, this gmproxy version %d: run the same release on both", v, Version)}
	}
	return nil
}

// markDown records a failure: the endpoint is down until the health check
// reaches it again, after a back-off that doubles with each failure.
func (e *endpoint) markDown(err error) {
	c := e.c
	e.mu.Lock()
	wasDown := e.down
	e.down = true
	e.failures++
	b := orDefault(c.BackoffMin, DefaultBackoffMin) << min(e.failures-1, 16)
	b = min(b, orDefault(c.BackoffMax, DefaultBackoffMax))
	b = b/2 + rand.N(b/2+1) // jitter: endpoints shared by a fleet
	e.retry = time.Now().Add(b)
	e.mu.Unlock()
	if !wasDown && c.Logger != nil && !c.closed.Load() {
		c.Logger.Warn("key server endpoint down", "address", e.Address, "err", err)
	}
}

func (e *endpoint) markUp() {
	e.mu.Lock()
	wasDown := e.down
	e.down, e.failures = false, 0
	e.mu.Unlock()
	if wasDown && e.c.Logger != nil {
		e.c.Logger.Info("key server endpoint up", "address", e.Address)
	}
}

func (e *endpoint) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, mc := range e.conns {
		if mc != nil {
			mc.close(ErrClosed)
			e.conns[i] = nil
		}
	}
}

// healthLoop pings every endpoint each HealthInterval: a down endpoint
// whose back-off ended is dialed, the live connections of an up one are
// pinged (a silent key server is found before operations time out on it).
func (c *Client) healthLoop() {
	defer c.health.Done()
	every := orDefault(c.HealthInterval, DefaultHealthInterval)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, e := range c.eps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.check(c.stop, min(every, orDefault(c.Timeout, every)))
			}()
		}
		wg.Wait()
	}
}

func (e *endpoint) check(stop <-chan struct{}, timeout time.Duration) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, errCheckTimeout)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	e.mu.Lock()
	down, retry := e.down, e.retry
	conns := append([]*muxConn(nil), e.conns...)
	e.mu.Unlock()
	if down {
		if time.Now().Before(retry) {
			return
		}
		// Its connection may have lived on (an operation went
		// unanswered while pings were answered): an answered ping on
		// it, as on a new one, brings it back.
		if mc, fresh, err := e.conn(ctx); err == nil {
			if _, err := mc.do(ctx, OpPing, nil, nil); err != nil {
				if !fresh {
					mc.close(err)
				}
				if !stopped(stop) {
					e.markDown(err)
				}
			} else {
				e.markUp()
			}
		}
		return
	}
	live := 0
	for _, mc := range conns {
		if mc == nil || mc.isDead() {
			continue
		}
		live++
		if _, err := mc.do(ctx, OpPing, nil, nil); err != nil {
			if stopped(stop) {
				return
			}
			mc.close(err)
			e.markDown(err)
			return
		}
	}
	if live == 0 {
		e.conn(ctx) // keep one connection ready; a failure marks e down
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// transportError is a failure of the connection, not an answer of the
// key server.
type transportError struct{ err error }

func (e *transportError) Error() string { return "key server: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// muxConn is one connection carrying many operations: requests carry
// IDs, a reader goroutine hands each answer to its waiting operation.
type muxConn struct {
	nc net.Conn
	w  *frameWriter

	mu      sync.Mutex
	pending map[uint32]chan answer
	nextID  uint32
	err     error // set when the connection is dead
	reads   atomic.Uint64
}

type answer struct {
	code Code
	body []byte
	err  error
}

func newMuxConn(nc net.Conn, br *bufio.Reader) *muxConn {
	mc := &muxConn{nc: nc, w: newFrameWriter(nc, writeTimeout), pending: map[uint32]chan answer{}}
	go mc.readLoop(&frameReader{br: br})
	return mc
}

func (mc *muxConn) isDead() bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.err != nil
}

// close fails the connection's pending operations with err.
func (mc *muxConn) close(err error) {
	mc.mu.Lock()
	if mc.err == nil {
		mc.err = err
	}
	p := mc.pending
	mc.pending = map[uint32]chan answer{}
	mc.mu.Unlock()
	mc.nc.Close()
	for _, ch := range p {
		ch <- answer{err: &transportError{err}}
	}
}

func (mc *muxConn) readLoop(fr *frameReader) {
	for {
		id, typ, body, err := fr.next()
		if err != nil {
			mc.close(err)
			return
		}
		mc.reads.Add(1)
		if id == 0 {
			// A refusal of the whole connection (say, an identity not in
			// the allow-list).
			mc.close(&Error{Code: Code(typ), Detail: string(body[:min(len(body), maxErrorText)])})
			return
		}
		mc.mu.Lock()
		ch := mc.pending[id]
		delete(mc.pending, id)
		mc.mu.Unlock()
		if ch != nil {
			ch <- answer{code: Code(typ), body: body}
		}
	}
}

var answerChans = sync.Pool{New: func() any { return make(chan answer, 1) }}

// do sends one request and waits for its answer within ctx.
func (mc *muxConn) do(ctx context.Context, op Op, keyID, payload []byte) ([]byte, error) {
	ch := answerChans.Get().(chan answer)
	mc.mu.Lock()
	if mc.err != nil {
		err := mc.err
		mc.mu.Unlock()
		answerChans.Put(ch)
		return nil, asTransport(err)
	}
	for {
		mc.nextID++
		if _, used := mc.pending[mc.nextID]; mc.nextID != 0 && !used {
			break
		}
	}
	id := mc.nextID
	mc.pending[id] = ch
	reads := mc.reads.Load()
	mc.mu.Unlock()
	// The request is written within the operation's own deadline, not
	// only the writer's timeout: a key server that stopped reading holds
	// no caller past its timeout.
	deadline := time.Now().Add(mc.w.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := mc.w.writeBy(deadline, id, byte(op), keyID, payload); errors.Is(err, errFrameLate) {
		// The operation's time ended before its request went out: it
		// fails alone, its connection (and endpoint) not blamed.
		mc.mu.Lock()
		_, waiting := mc.pending[id]
		delete(mc.pending, id)
		mc.mu.Unlock()
		if waiting {
			answerChans.Put(ch)
		}
		if err := context.Cause(ctx); err != nil {
			return nil, err
		}
		return nil, context.DeadlineExceeded // its deadline passed, not yet noticed by ctx
	} else if err != nil {
		mc.close(err)
	}
	select {
	case a := <-ch:
		answerChans.Put(ch)
		if a.err != nil {
			return nil, asTransport(a.err)
		}
		if a.code != CodeOK {
			return nil, &Error{Code: a.code, Detail: string(a.body[:min(len(a.body), maxErrorText)])}
		}
		return a.body, nil
	case <-ctx.Done():
		mc.mu.Lock()
		_, waiting := mc.pending[id]
		delete(mc.pending, id)
		mc.mu.Unlock()
		if waiting {
			answerChans.Put(ch) // no answer will be sent on it
		}
		if timedOut(ctx) {
			if mc.reads.Load() == reads {
				// Nothing came back on this connection while the
				// operation waited for its whole time: it is stuck.
				mc.close(os.ErrDeadlineExceeded)
			}
			// Either way its endpoint left an operation unanswered (one
			// that answers pings only is no better): marked down, so
			// that operations go to the others first.
			return nil, &transportError{errNoAnswer}
		}
		return nil, ctx.Err()
	}
}

// asTransport wraps a connection failure, leaving a key server's refusal
// of the connection (an *Error) as it is.
func asTransport(err error) error {
	var ke *Error
	var te *transportError
	if errors.As(err, &ke) || errors.As(err, &te) {
		return err
	}
	return &transportError{err}
}
