// Package redisstore is the Redis backend of sessionstore.Store: one
// standalone server, a Sentinel group (with a master name) or a Cluster,
// through go-redis's universal client. Every command is bounded by the
// caller's context (gmproxy gives each one the store timeout); no command is
// retried, so a dead server costs one timeout and the caller's circuit
// breaker takes it from there.
package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
)

// Options say how to reach Redis.
type Options struct {
	// Addresses are host:port of the server, of the Sentinels (with
	// MasterName) or of some Cluster nodes.
	Addresses []string
	// MasterName names the Sentinel master; empty for a server or Cluster.
	MasterName string
	// Username and Password authenticate (Redis ACL; Username may be empty).
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels
	// (with MasterName), which have users of their own; empty: none.
	SentinelUsername, SentinelPassword string
	// TLS, when not nil, is used for every connection.
	TLS *tls.Config
	// PoolSize bounds open connections per node; 0 means go-redis's
	// default (10 per CPU).
	PoolSize int
	// Timeout bounds one command when the caller's context has no deadline.
	Timeout time.Duration
	// Cluster says that the addresses are of a Redis Cluster also when
	// there is one (a configuration endpoint, or one node of a cluster):
	// then keys on another node's slots follow its MOVED and ASK
	// redirections. Two or more addresses without MasterName are taken
	// for a Cluster anyway.
	Cluster bool
}

// debugLog sends go-redis's own messages (one per failed dial while a
// server is down) to the default slog logger at debug level: store
// failures are counted in the store metrics, not logged per call.
type debugLog struct{}

func (debugLog) Printf(_ context.Context, format string, v ...any) {
	slog.Debug("redis: " + fmt.Sprintf(format, v...))
}

var setLogger sync.Once

// Store is a sessionstore.Store on Redis.
type Store struct {
	c              redis.UniversalClient
	plainGet       atomic.Bool  // GETRANGE refused (refusedRange)
	publishRefused atomic.Int64 // Unix ns until which Publish does nothing after a refusal; 0: none
}

var (
	_ sessionstore.Store       = (*Store)(nil)
	_ sessionstore.Broadcaster = (*Store)(nil)
)

// New returns a Store; it connects lazily (a down server is not an error
// here: calls fail until it is back).
func New(o Options) *Store {
	t := o.Timeout
	if t <= 0 {
		t = sessionstore.DefaultTimeout
	}
	setLogger.Do(func() { redis.SetLogger(debugLog{}) })
	c := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:      o.Addresses,
		MasterName: o.MasterName,
		// With a master name this would ask for a Sentinel-managed
		// cluster client instead: conf refuses cluster with master_name.
		IsClusterMode: o.Cluster,
		Username:      o.Username,
		Password:      o.Password,
		// Used only with a master name (the Sentinels' AUTH).
		SentinelUsername: o.SentinelUsername,
		SentinelPassword: o.SentinelPassword,
		// The dialer makes the TLS connections (with o.TLS) and bounds
		// what a reply may announce (guard.go).
		Dialer:   dialer(max(t, time.Second), o.TLS),
		PoolSize: o.PoolSize,
		// Connections are opened ahead of need so that a lookup does not
		// pay for a dial (and TLS) within its few milliseconds.
		MinIdleConns: 2,
		// A dial may take longer than one command; a lookup still waits
		// only for its own context.
		DialTimeout:           max(t, time.Second),
		DialerRetries:         1,
		ReadTimeout:           t,
		WriteTimeout:          t,
		PoolTimeout:           t,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // the caller falls back to a full handshake instead
		Protocol:              2,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
	return &Store{c: c}
}

// MaxValue bounds the bytes read of one value: a sealed session (a few
// KiB with a long client chain) or ticket key is far smaller. Values are
// read with GETRANGE up to it, so that whoever can write gmproxy's keys
// cannot make a lookup allocate what they stored (up to 512 MiB); a longer
// value comes back cut, fails to open, and counts as absent. A missing key
// reads as empty (no value gmproxy stores is).
const MaxValue = 64 << 10

// read is GETRANGE key 0 MaxValue-1, or GET where an ACL refused GETRANGE.
func (s *Store) read(ctx context.Context, c redis.Cmdable, key string) *redis.StringCmd {
	if s.plainGet.Load() {
		return c.Get(ctx, key)
	}
	return c.GetRange(ctx, key, 0, MaxValue-1)
}

// refusedRange reports (once) that the server refused GETRANGE: an ACL
// written for earlier releases (+get +set +del, without +getrange). Values
// are read whole with GET from then on, and a warning says what to grant.
func (s *Store) refusedRange(err error) bool {
	if err == nil || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(strings.ToLower(err.Error()), "getrange") {
		return false
	}
	if !s.plainGet.Swap(true) {
		slog.Warn("session store: the Redis user may not run GETRANGE; values are read whole with GET. Grant +getrange so that a value planted in the store cannot make a lookup read more than 64 KiB", "err", err)
	}
	return true
}

// errMalformed is a reply go-redis could not take (it panicked: a length
// it cannot allocate, from a rogue server or someone on a plain link).
var errMalformed = errors.New("redis: malformed reply")

// recovered turns a panic of go-redis reading a reply into errMalformed:
// lookups run on the handshake's goroutine, where a panic would end the
// process. The reply guard refuses the lengths go-redis cannot allocate
// before it sees them; this stays for whatever else makes it panic.
func recovered(err *error) {
	if v := recover(); v != nil {
		*err = fmt.Errorf("%w (%v)", errMalformed, v)
	}
}

// Get implements sessionstore.Store.
func (s *Store) Get(ctx context.Context, key string) (b []byte, ok bool, err error) {
	defer recovered(&err)
	b, err = s.read(ctx, s.c, key).Bytes()
	if s.refusedRange(err) {
		b, err = s.read(ctx, s.c, key).Bytes()
	}
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(b) == 0 {
		return nil, false, nil
	}
	return b, true, nil
}

// Set implements sessionstore.Store (SET key val PX ttl).
func (s *Store) Set(ctx context.Context, key string, val []byte, ttl time.Duration) (err error) {
	defer recovered(&err)
	return s.c.Set(ctx, key, val, ttl).Err()
}

// AddOrGet implements sessionstore.Store: SET key val NX PX ttl and GET key
// in one pipeline (one round trip; the key is in one Cluster slot).
func (s *Store) AddOrGet(ctx context.Context, key string, val []byte, ttl time.Duration) (b []byte, err error) {
	defer recovered(&err)
	var get *redis.StringCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, key, val, ttl)
		get = s.read(ctx, p, key)
		return nil
	})
	if s.refusedRange(err) {
		get = s.read(ctx, s.c, key)
		err = get.Err()
	}
	if err != nil {
		return nil, err
	}
	return get.Bytes()
}

// GetMany implements sessionstore.Store with one GET per key in a pipeline
// (keys may lie in different Cluster slots, which MGET refuses).
func (s *Store) GetMany(ctx context.Context, keys []string) (out [][]byte, err error) {
	defer recovered(&err)
	cmds := make([]*redis.StringCmd, len(keys))
	pipe := func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = s.read(ctx, p, k)
		}
		return nil
	}
	_, err = s.c.Pipelined(ctx, pipe)
	if s.refusedRange(err) {
		_, err = s.c.Pipelined(ctx, pipe)
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out = make([][]byte, len(keys))
	for i, c := range cmds {
		b, err := c.Bytes()
		switch {
		case errors.Is(err, redis.Nil), err == nil && len(b) == 0:
		case err != nil:
			return nil, err
		default:
			out[i] = b
		}
	}
	return out, nil
}

// Delete implements sessionstore.Store.
func (s *Store) Delete(ctx context.Context, key string) (err error) {
	defer recovered(&err)
	return s.c.Del(ctx, key).Err()
}

// Close implements sessionstore.Store.
func (s *Store) Close() error { return s.c.Close() }

// Publish implements sessionstore.Broadcaster (PUBLISH; in a Cluster the
// message reaches the subscribers of every node). Where the Redis user may
// not publish on channel (an ACL without +publish or without the channel),
// a warning says so and Publish does nothing for refusedRetry, then tries
// again: the store's other uses go on, and a refusal is no store failure.
func (s *Store) Publish(ctx context.Context, channel string, msg []byte) (err error) {
	if until := s.publishRefused.Load(); until != 0 && time.Now().UnixNano() < until {
		return nil
	}
	defer recovered(&err)
	err = s.c.Publish(ctx, channel, msg).Err()
	switch {
	case refused(err):
		if s.publishRefused.Swap(time.Now().Add(refusedRetry).UnixNano()) == 0 {
			slog.Warn("session store: the Redis user may not publish; a session ended on this instance stays resumable from the other instances' memory until it expires there. Grant +publish +subscribe +ping and the channel (e.g. &gmproxy:*); gmproxy tries again every minute", "channel", channel, "err", err)
		}
		return nil
	case err == nil && s.publishRefused.Load() != 0:
		s.publishRefused.Store(0)
		slog.Info("session store: publishing ended sessions again", "channel", channel)
	}
	return err
}

// refused reports an ACL refusal.
func refused(err error) bool {
	return err != nil && strings.Contains(err.Error(), "NOPERM")
}

// followCheck is the interval of a subscription's checks: each publishes
// a probe on the channel through the Store's client, as a PUBLISH of an
// ended session goes, and the subscription must hear it before the next
// check. One that does not is replaced: its connection went silent (a NAT
// or firewall that dropped it without a word), or it stayed on a server
// that no longer hears the others' messages (a Sentinel failover that
// could not make the old master a replica). Where the ACL refuses the
// probe, a PING checks the connection alone. followRetry bounds the wait
// between attempts to subscribe while the store is down; refusedRetry is
// the wait after the server refused (an ACL), for the operator to grant
// what is missing.
var (
	followCheck  = 15 * time.Second
	followRetry  = 2 * time.Second
	refusedRetry = time.Minute
)

// Subscribe implements sessionstore.Broadcaster. The subscription has a
// connection of its own (a node's in a Cluster), checked every
// followCheck (a probe it must hear); a connection that fails a check or
// breaks is replaced, and lost is called once the new one is confirmed. It
// ends with stop or when the Store is closed. stop does not wait for a
// connection being made (go-redis holds the subscription's lock while it
// dials and authenticates): the goroutine ends when that attempt does,
// and calls nothing after stop.
func (s *Store) Subscribe(channel string, deliver func([]byte), lost func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu      sync.Mutex
		current *redis.PubSub // closed by stop: a read in progress ends
		stopped bool          // under mu: deliver and lost are not called
	)
	guarded := func(call func()) {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			call()
		}
	}
	f := &follow{
		channel:     channel,
		deliver:     func(m []byte) { guarded(func() { deliver(m) }) },
		lost:        func() { guarded(lost) },
		clean:       true,
		check:       followCheck,
		refusedWait: refusedRetry,
		probe: func(ctx context.Context, msg string) (err error) {
			defer recovered(&err)
			return s.c.Publish(ctx, channel, msg).Err()
		},
	}
	go func() {
		retry := 100 * time.Millisecond
		for {
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			ps := s.c.Subscribe(ctx) // no channel yet: no connection
			current = ps
			mu.Unlock()
			next := f.on(ctx, ps)
			ps.Close()
			var wait time.Duration
			switch next {
			case followEnd:
				return
			case followRefused:
				wait = f.refusedWait
			case followConfirmed:
				retry = 100 * time.Millisecond
				wait = retry
			default:
				wait = retry
				retry = min(2*retry, followRetry)
			}
			f.clean = false
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return func() {
		mu.Lock()
		stopped = true
		cancel()
		ps := current
		mu.Unlock()
		if ps != nil {
			go ps.Close() // blocks while a dial holds the subscription's lock
		}
	}
}

// follow is the state of one subscription across its connections.
type follow struct {
	channel string
	deliver func([]byte)
	lost    func()
	// probe publishes msg on the channel through the Store's client.
	probe func(ctx context.Context, msg string) error
	check time.Duration
	// refusedWait is the wait after a refusal.
	refusedWait time.Duration
	clean       bool      // no message can have been missed yet
	refused     bool      // the last attempt was refused (warned)
	noPing      bool      // PING refused: a check without a probe only reads (warned)
	noProbe     time.Time // probes refused (warned): PINGs until then
	warnedProbe bool
}

// What follow.on ends with.
const (
	followBroken    = iota // the connection failed before a confirmation
	followConfirmed        // it failed after one
	followRefused          // the server refused the subscription
	followEnd              // stopped, or the Store closed
)

// probePrefix begins the probes, which no subscriber delivers (each
// instance hears the others' too). A sealed message beginning with it is
// as likely as a collision of 20 random bytes.
const probePrefix = "gmproxy subscription probe "

// awaitPong stands for the answer to a PING in follow.on's awaited.
const awaitPong = "\x00pong"

// on subscribes on ps and reads it until its connection fails a check or
// looks broken, ctx ends, the Store is closed or the server refuses the
// channel.
func (f *follow) on(ctx context.Context, ps *redis.PubSub) int {
	confirmed := false
	broken := func(err error) int {
		switch {
		case ctx.Err() != nil || errors.Is(err, redis.ErrClosed):
			return followEnd
		case confirmed:
			return followConfirmed
		}
		return followBroken
	}
	if err := ps.Subscribe(ctx, f.channel); err != nil {
		return broken(err)
	}
	var (
		awaited string // the probe (or awaitPong) of the last check, until heard
		next    = time.Now().Add(f.check)
	)
	for {
		m, err := receive(ctx, ps, max(time.Until(next), time.Millisecond))
		switch {
		case ctx.Err() != nil:
			return followEnd
		case refused(err) && !confirmed:
			if !f.refused {
				f.refused = true
				slog.Warn("session store: the Redis user may not subscribe; this instance does not hear of sessions ended on others. Grant +subscribe +ping and the channel (e.g. &gmproxy:*); gmproxy tries again every minute", "channel", f.channel, "err", err)
			}
			return followRefused
		case refused(err) && awaited == awaitPong:
			if !f.noPing {
				f.noPing = true
				slog.Warn("session store: the Redis user may not PING or PUBLISH; a subscription dropped without a word (a NAT or firewall timeout) goes unnoticed. Grant +publish +ping", "err", err)
			}
			awaited = ""
		case err != nil && sessionstore.IsTimeout(err):
			// A check is due.
		case err != nil:
			// Down, closed, or a reply that could not be read: a new
			// connection.
			return broken(err)
		default:
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					if f.refused {
						f.refused = false
						slog.Info("session store: subscribed to ended sessions", "channel", f.channel)
					}
					if !f.clean {
						f.lost()
					}
					f.clean, confirmed = false, true
				}
			case *redis.Message:
				switch {
				case m.Payload == awaited:
					awaited = ""
				case strings.HasPrefix(m.Payload, probePrefix):
				default:
					f.deliver([]byte(m.Payload))
				}
			case *redis.Pong:
				if awaited == awaitPong {
					awaited = ""
				}
			}
		}
		if time.Now().Before(next) {
			continue
		}
		if awaited != "" {
			// The last check went unanswered for a whole interval.
			return broken(nil)
		}
		next = time.Now().Add(f.check)
		if awaited, err = f.checkPath(ctx, ps); err != nil {
			return broken(err)
		}
	}
}

// checkPath starts a check of the subscription on ps: it publishes a
// probe and returns it, or (probes refused by the ACL, or the Store's
// client failing) sends a PING and returns awaitPong, or (PING refused
// too) returns "": nothing to wait for.
func (f *follow) checkPath(ctx context.Context, ps *redis.PubSub) (awaited string, err error) {
	if time.Now().After(f.noProbe) {
		var nonce [20]byte
		rand.Read(nonce[:])
		msg := probePrefix + hex.EncodeToString(nonce[:])
		switch err := f.probe(ctx, msg); {
		case err == nil:
			if f.warnedProbe {
				f.warnedProbe = false
				slog.Info("session store: the subscription's probes are published again", "channel", f.channel)
			}
			return msg, nil
		case refused(err):
			f.noProbe = time.Now().Add(f.refusedWait)
			if !f.warnedProbe {
				f.warnedProbe = true
				slog.Warn("session store: the Redis user may not publish, so a subscription is checked with PING only, which misses a Sentinel failover that left it on the old master. Grant +publish and the channel (e.g. &gmproxy:*); gmproxy tries again every minute", "channel", f.channel, "err", err)
			}
		}
		// Otherwise the Store's client fails (its server down): the
		// subscription's own connection is checked.
	}
	if f.noPing {
		return "", nil
	}
	if err := ps.Ping(ctx); err != nil {
		return "", err
	}
	return awaitPong, nil
}

// receive is ps.ReceiveTimeout with go-redis's panics on a malformed
// reply turned into errors.
func receive(ctx context.Context, ps *redis.PubSub, d time.Duration) (m any, err error) {
	defer recovered(&err)
	return ps.ReceiveTimeout(ctx, d)
}
