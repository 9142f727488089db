// Package keyoffload runs private-key operations (signatures, decryption,
// SM2 key agreement) of the TLCP, TLS 1.3-SM and TLS handshakes on a
// bounded pool of workers, apart from the goroutines that do the network
// work, and reports each operation's queue wait and execution time. Keys
// held by a key server (package keyserver) bypass the workers but are
// bounded and measured the same way.
package keyoffload

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Engine is the asynchronous private-key engine: a fixed pool of workers
// fed by a bounded queue. Keys wrapped with Wrap implement
// smkey.ContextSigner, smkey.KeyAgreement and, for keys that decrypt,
// smkey.ContextDecrypter, so the TLCP and TLS 1.3-SM stacks use it without
// knowing. Each operation reports
// its queue wait and execution time to an Observer.
//
// Anything that implements those smkey interfaces can stand in for a local
// key (a remote key server client, a hardware module); Wrap accepts such a
// key too and then only bounds and measures the calls.
//
// Keys whose KeyLocation is Remote (keyserver.RemoteKey) spend their time waiting
// for the network, not computing: they do not occupy a worker (a slow key
// server must not stall the local keys) but run in the caller's goroutine
// once one of RemoteInFlight slots is free; a full set of slots fails fast
// or waits exactly like a full queue. Their queue wait is the time spent
// waiting for a slot.
type Engine struct {
	jobs    chan *keyJob
	obs     Observer
	locObs  LocationObserver
	wait    bool
	workers int
	remote  chan struct{} // slots of remote operations in flight

	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
}

// Config sizes the engine.
type Config struct {
	// Workers is the number of goroutines running operations; default
	// runtime.NumCPU().
	Workers int
	// Queue bounds operations waiting for a worker; default 4096.
	Queue int
	// WaitWhenFull makes a caller wait (bounded by its handshake's context)
	// when the queue is full, instead of failing at once (ErrBusy).
	WaitWhenFull bool
	// RemoteInFlight bounds the operations on remote keys (key servers)
	// running at once; default Queue.
	RemoteInFlight int
}

// ErrBusy is returned when the queue is full and the engine fails fast.
var ErrBusy = errors.New("keyoffload: private-key queue full")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("keyoffload: private-key engine closed")

type keyJob struct {
	ctx      context.Context
	op, fam  string
	loc      string
	enqueued time.Time
	fn       func() ([]byte, error)
	out      []byte
	err      error
	done     chan struct{}
}

// New starts the workers; obs may be nil.
func New(cfg Config, obs Observer) *Engine {
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.NumCPU()
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 4096
	}
	if cfg.RemoteInFlight <= 0 {
		cfg.RemoteInFlight = cfg.Queue
	}
	o := &Engine{jobs: make(chan *keyJob, cfg.Queue), obs: obs, wait: cfg.WaitWhenFull, workers: cfg.Workers,
		remote: make(chan struct{}, cfg.RemoteInFlight)}
	o.locObs, _ = obs.(LocationObserver)
	o.wg.Add(cfg.Workers)
	for i := 0; i < cfg.Workers; i++ {
		go o.worker()
	}
	return o
}

func (o *Engine) worker() {
	defer o.wg.Done()
	for j := range o.jobs {
		start := time.Now()
		wait := start.Sub(j.enqueued)
		if err := j.ctx.Err(); err != nil {
			// The handshake gave up while the job was queued.
			j.err = err
		} else {
			j.out, j.err = j.fn()
		}
		o.observe(j.op, j.fam, j.loc, wait, time.Since(start), j.err)
		close(j.done)
	}
}

// Close stops the workers after the queued operations ran.
func (o *Engine) Close() {
	o.mu.Lock()
	if !o.closed {
		o.closed = true
		close(o.jobs)
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// Workers returns the number of worker goroutines.
func (o *Engine) Workers() int { return o.workers }

// QueueCap returns the bound of the queue.
func (o *Engine) QueueCap() int { return cap(o.jobs) }

// QueueLen returns the number of operations waiting for a worker.
func (o *Engine) QueueLen() int { return len(o.jobs) }

// observe reports one operation to the observer, with the key's location
// when the observer wants it.
func (o *Engine) observe(op, family, loc string, wait, exec time.Duration, err error) {
	switch {
	case o.locObs != nil:
		o.locObs.KeyOpAt(op, family, loc, wait, exec, err)
	case o.obs != nil:
		o.obs.KeyOp(op, family, wait, exec, err)
	}
}

// RemoteInFlight returns the remote operations running now.
func (o *Engine) RemoteInFlight() int { return len(o.remote) }

// doRemote runs fn (an operation on a remote key) in the caller's
// goroutine once a remote slot is free.
func (o *Engine) doRemote(ctx context.Context, op, family string, fn func() ([]byte, error)) ([]byte, error) {
	o.mu.RLock()
	closed := o.closed
	o.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	enqueued := time.Now()
	select {
	case o.remote <- struct{}{}:
	default:
		if !o.wait {
			o.observe(op, family, Remote, 0, 0, ErrBusy)
			return nil, ErrBusy
		}
		select {
		case o.remote <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer func() { <-o.remote }()
	start := time.Now()
	var out []byte
	err := ctx.Err()
	if err == nil {
		out, err = fn()
	}
	o.observe(op, family, Remote, start.Sub(enqueued), time.Since(start), err)
	return out, err
}

func (o *Engine) do(ctx context.Context, op, family, loc string, fn func() ([]byte, error)) ([]byte, error) {
	if loc == Remote {
		return o.doRemote(ctx, op, family, fn)
	}
	j := &keyJob{ctx: ctx, op: op, fam: family, loc: loc, enqueued: time.Now(), fn: fn, done: make(chan struct{})}
	o.mu.RLock()
	if o.closed {
		o.mu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case o.jobs <- j:
	default:
		if !o.wait {
			o.mu.RUnlock()
			o.observe(op, family, loc, 0, 0, ErrBusy)
			return nil, ErrBusy
		}
		select {
		case o.jobs <- j:
		case <-ctx.Done():
			o.mu.RUnlock()
			return nil, ctx.Err()
		}
	}
	o.mu.RUnlock()
	select {
	case <-j.done:
		return j.out, j.err
	case <-ctx.Done():
		// The worker will see ctx done (or finish) and drop the result.
		return nil, ctx.Err()
	}
}

// WrappedKey is a private key behind an offload engine (see Engine.Wrap).
type WrappedKey interface {
	smkey.ContextSigner
	smkey.KeyAgreement
	Locator
	// Unwrap returns the wrapped key.
	Unwrap() crypto.Signer
}

// Wrap returns key behind the engine for protocol family (used in events).
// The result implements crypto.Decrypter (and smkey.ContextDecrypter) only
// when key decrypts, that is an RSA or SM2 key with a Decrypt method:
// crypto/tls takes any Decrypter for an RSA key-exchange key and fails
// every TLS 1.2 handshake on an ECDSA certificate whose key claims to be one.
func (o *Engine) Wrap(key crypto.Signer, family string) WrappedKey {
	k := &Key{o: o, key: key, family: family, loc: Location(key)}
	if decrypts(key) {
		return decrypterKey{k}
	}
	return k
}

// decrypts reports whether key can decrypt: it has a Decrypt method and an
// RSA or SM2 public key.
func decrypts(key crypto.Signer) bool {
	if _, ok := key.(crypto.Decrypter); !ok {
		return false
	}
	switch pub := key.Public().(type) {
	case *rsa.PublicKey:
		return true
	case *ecdsa.PublicKey:
		return pub.Curve == sm2.P256()
	}
	return false
}

// Key is a private key whose operations run on the engine's workers
// (signatures and SM2 key agreement; decrypterKey adds decryption).
type Key struct {
	o      *Engine
	key    crypto.Signer
	family string
	loc    string
}

// decrypterKey is a Key of a key that decrypts.
type decrypterKey struct{ *Key }

var (
	_ WrappedKey             = (*Key)(nil)
	_ smkey.ContextDecrypter = decrypterKey{}
)

// Public implements crypto.Signer.
func (k *Key) Public() crypto.PublicKey { return k.key.Public() }

// KeyLocation implements Locator: where the wrapped key lives.
func (k *Key) KeyLocation() string { return k.loc }

// Unwrap returns the wrapped key.
func (k *Key) Unwrap() crypto.Signer { return k.key }

// Sign implements crypto.Signer without a deadline.
func (k *Key) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.SignContext(context.Background(), rand, digest, opts)
}

// SignContext implements smkey.ContextSigner.
func (k *Key) SignContext(ctx context.Context, rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.o.do(ctx, "sign", k.family, k.loc, func() ([]byte, error) {
		return smkey.Sign(ctx, k.key, rand, digest, opts)
	})
}

// Decrypt implements crypto.Decrypter without a deadline.
func (k decrypterKey) Decrypt(rand io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	return k.DecryptContext(context.Background(), rand, msg, opts)
}

// DecryptContext implements smkey.ContextDecrypter.
func (k decrypterKey) DecryptContext(ctx context.Context, rand io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	d := k.key.(crypto.Decrypter) // checked by Wrap
	return k.o.do(ctx, "decrypt", k.family, k.loc, func() ([]byte, error) {
		return smkey.Decrypt(ctx, d, rand, msg, opts)
	})
}

// SM2KeyAgree implements smkey.KeyAgreement.
func (k *Key) SM2KeyAgree(ctx context.Context, ephemeral *ecdh.PrivateKey, peerStatic, peerEphemeral *ecdh.PublicKey, responder bool, keyLen int, uid, peerUID []byte) ([]byte, error) {
	ka := smkey.AsKeyAgreement(k.key)
	if ka == nil {
		return nil, fmt.Errorf("keyoffload: %T cannot do SM2 key agreement", k.key)
	}
	return k.o.do(ctx, "key_agreement", k.family, k.loc, func() ([]byte, error) {
		return ka.SM2KeyAgree(ctx, ephemeral, peerStatic, peerEphemeral, responder, keyLen, uid, peerUID)
	})
}
