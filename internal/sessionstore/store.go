// Package sessionstore is the shared level of gmproxy's session state: the
// Store interface that several gmproxy instances (or several worker
// processes of one machine) share, the two-level TLCP session-ID cache that
// puts the in-process LRU in front of a Store (Tiered), and the ticket-key
// set that instances agree on through a Store without a leader (FleetKeys).
//
// Nothing leaves the process in clear: session state is sealed with the
// fleet's ticket keys (Tiered), and ticket keys are sealed with a wrap key
// that only the instances hold (FleetKeys). A slow or unreachable store
// never fails a handshake: every call is bounded by a timeout, failures
// open a circuit breaker, and the handshake goes on as a full one.
package sessionstore

import (
	"context"
	"errors"
	"time"
)

// Store types (the values of sessions.store.type).
const (
	// TypeRedis is a Redis server, Sentinel group or Cluster.
	TypeRedis = "redis"
)

// Types lists the store types gmproxy can open.
var Types = []string{TypeRedis}

// DefaultTimeout bounds one store round trip unless configured.
const DefaultTimeout = 5 * time.Millisecond

// DefaultKeyPrefix starts every key gmproxy writes.
const DefaultKeyPrefix = "gmproxy:"

// Store is a shared key-value store with expiring entries. Keys are opaque
// strings (gmproxy prefixes them), values opaque bytes that gmproxy has
// already sealed. Implementations must be safe for concurrent use and honour
// the context's deadline. A backend for another deployment (for example the
// worker processes of one machine sharing memory or a local socket) only has
// to implement this interface.
type Store interface {
	// Get returns the value under key; found is false when there is none.
	Get(ctx context.Context, key string) (val []byte, found bool, err error)
	// Set stores val under key for ttl.
	Set(ctx context.Context, key string, val []byte, ttl time.Duration) error
	// AddOrGet stores val under key for ttl unless the key exists, and
	// returns the value the key then holds: val, or the one stored before
	// (the first writer wins; every caller sees the same value).
	AddOrGet(ctx context.Context, key string, val []byte, ttl time.Duration) ([]byte, error)
	// GetMany returns the values of keys, in order, nil for a missing one.
	GetMany(ctx context.Context, keys []string) ([][]byte, error)
	// Delete removes key (no error when it is absent).
	Delete(ctx context.Context, key string) error
	// Close releases the store's connections.
	Close() error
}

// Broadcaster is a Store that also carries messages to every process
// sharing it (Redis PUBLISH and SUBSCRIBE). Tiered uses it to tell the
// other instances that a session ended, so that their in-process caches
// forget it too.
type Broadcaster interface {
	// Publish sends msg to the subscribers of channel, the publisher's
	// own included.
	Publish(ctx context.Context, channel string, msg []byte) error
	// Subscribe calls deliver with each message on channel, one at a time
	// from a goroutine of its own, until stop is called (stop returns
	// after the last call). Messages sent while the subscription was
	// broken are lost: lost is called each time that may have happened
	// (the connection failed and is up again). Both callbacks must not
	// block for long.
	Subscribe(channel string, deliver func(msg []byte), lost func()) (stop func())
}

// ErrTooLarge is what a Store returns (wrapped) when it refuses a key or
// value for its size alone, as the workers' shared table does for what
// does not fit its fixed slots (a TLCP session with a client certificate
// chain): the session then resumes only where it was made. Such a refusal
// says nothing of the store's health, so it is no failure for the circuit
// breaker; were it one, a few mutual-TLS handshakes in a row would stop
// every other session, and every ended-session message, from reaching the
// store.
var ErrTooLarge = errors.New("sessionstore: key or value too large for the store")

// Results of a store call (the result label of the store metrics).
const (
	ResultHit     = "hit"     // a lookup found a usable entry
	ResultMiss    = "miss"    // a lookup found nothing (or an entry that did not open)
	ResultOK      = "ok"      // a write succeeded
	ResultError   = "error"   // the store answered with an error or the connection failed
	ResultTimeout = "timeout" // no answer within the timeout
	ResultSkipped = "skipped" // not asked: the circuit breaker is open
)

// Results lists every result value.
var Results = []string{ResultHit, ResultMiss, ResultOK, ResultError, ResultTimeout, ResultSkipped}

// Operations (the op label of the store metrics).
const (
	OpGet    = "get"
	OpSet    = "set"
	OpDelete = "delete"
	OpKeys   = "ticket_keys" // a refresh of the fleet ticket keys
)

// Ops lists every operation value.
var Ops = []string{OpGet, OpSet, OpDelete, OpKeys}

// Observer receives one event per store call. A frontdoor.SessionObserver
// that also implements Observer (package metrics does) gets them.
type Observer interface {
	// StoreOp reports one call: op is one of Ops, result one of Results,
	// d the time it took (0 when skipped).
	StoreOp(op, result string, d time.Duration)
}

// resultOf classifies a store error.
func resultOf(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, context.DeadlineExceeded) || IsTimeout(err):
		return ResultTimeout
	default:
		return ResultError
	}
}

// IsTimeout reports whether err says it is a timeout (a net.Error's
// deadline, for one).
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
