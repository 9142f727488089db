// Package keyoffload bounds and measures the private-key operations
// (signatures, decryption, SM2 key agreement) of the TLCP, TLS 1.3-SM and
// TLS handshakes: a fixed number run at once, a bounded number wait in
// line, and each reports its queue wait and execution time. Keys held by a
// key server (package keyserver) have bounds of their own.
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
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/sm2sign"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Engine is the private-key engine: it bounds how many operations run at
// once (Workers) and how many wait for a turn (Queue). Keys wrapped with
// Wrap implement smkey.ContextSigner, smkey.KeyAgreement and, for keys that
// decrypt, smkey.ContextDecrypter, so the TLCP and TLS 1.3-SM stacks use it
// without knowing. Each operation reports its queue wait and execution time
// to an Observer.
//
// An operation runs in the caller's goroutine (the handshake's) once one of
// the Workers slots is free. Handing it to a pool of worker goroutines and
// waking the caller again cost two goroutine switches, often two thread
// wake-ups, per operation. The slots keep the bound the pool gave: at most
// Workers signatures or decryptions compute at once and the rest wait in
// arrival order, so a flood of handshakes cannot take every CPU from the
// established connections.
//
// Anything that implements those smkey interfaces can stand in for a local
// key (a remote key server client, a hardware module); Wrap accepts such a
// key too and then only bounds and measures the calls.
//
// Keys whose KeyLocation is Remote (keyserver.RemoteKey) spend their time
// waiting for the network, not computing: they do not take a local slot (a
// slow key server must not stall the local keys) but one of RemoteInFlight
// slots of their own; a full set of slots fails fast or waits exactly like
// a full queue. Their queue wait is the time spent waiting for a slot.
type Engine struct {
	local   slots // operations on local keys
	remote  slots // operations on remote keys (key servers)
	obs     Observer
	locObs  LocationObserver
	wait    bool
	workers int

	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup // operations admitted and not finished
}

// Config sizes the engine.
type Config struct {
	// Workers is the number of local-key operations that run at once;
	// default runtime.GOMAXPROCS(0), the CPUs the process computes on.
	Workers int
	// Queue bounds operations waiting for a turn; default 4096.
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

// slots is a counting semaphore with a bounded number of waiters.
type slots struct {
	run     chan struct{} // one token per running operation
	waiting atomic.Int64  // callers waiting for a token
	queue   int64         // bound of waiting
}

func newSlots(n, queue int) slots {
	return slots{run: make(chan struct{}, n), queue: int64(queue)}
}

// acquire takes a token: at once when one is free; else it waits in line
// when fewer than queue callers wait (or always when wait is set), bounded
// by ctx, and fails with ErrBusy otherwise.
func (s *slots) acquire(ctx context.Context, wait bool) error {
	select {
	case s.run <- struct{}{}:
		return nil
	default:
	}
	if n := s.waiting.Add(1); n > s.queue && !wait {
		s.waiting.Add(-1)
		return ErrBusy
	}
	defer s.waiting.Add(-1)
	select {
	case s.run <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slots) release() { <-s.run }

// New makes an engine; obs may be nil.
func New(cfg Config, obs Observer) *Engine {
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 4096
	}
	if cfg.RemoteInFlight <= 0 {
		cfg.RemoteInFlight = cfg.Queue
	}
	o := &Engine{obs: obs, wait: cfg.WaitWhenFull, workers: cfg.Workers,
		local: newSlots(cfg.Workers, cfg.Queue), remote: newSlots(cfg.RemoteInFlight, 0)}
	o.locObs, _ = obs.(LocationObserver)
	return o
}

// Close refuses new operations and waits for the admitted ones to finish.
func (o *Engine) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wg.Wait()
}

// Workers returns the number of local-key operations that run at once.
func (o *Engine) Workers() int { return o.workers }

// QueueCap returns the bound of the queue.
func (o *Engine) QueueCap() int { return int(o.local.queue) }

// QueueLen returns the number of local-key operations waiting for a turn.
func (o *Engine) QueueLen() int { return int(o.local.waiting.Load()) }

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
func (o *Engine) RemoteInFlight() int { return len(o.remote.run) }

// admit counts an operation in unless the engine is closed.
func (o *Engine) admit() bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed {
		return false
	}
	o.wg.Add(1)
	return true
}

// do runs fn, an operation on a key at loc, in the caller's goroutine once
// a slot of its kind is free.
func (o *Engine) do(ctx context.Context, op, family, loc string, fn func() ([]byte, error)) ([]byte, error) {
	if !o.admit() {
		return nil, ErrClosed
	}
	defer o.wg.Done()
	s := &o.local
	if loc == Remote {
		s = &o.remote
	}
	enqueued := time.Now()
	if err := s.acquire(ctx, o.wait); err != nil {
		// Refused (busy), or its handshake gave up while it waited:
		// counted as failed, with its wait.
		var waited time.Duration
		if !errors.Is(err, ErrBusy) {
			waited = time.Since(enqueued)
		}
		o.observe(op, family, loc, waited, 0, err)
		return nil, err
	}
	defer s.release()
	start := time.Now()
	var out []byte
	err := ctx.Err() // the handshake gave up while the operation waited
	if err == nil {
		out, err = fn()
	}
	o.observe(op, family, loc, start.Sub(enqueued), time.Since(start), err)
	return out, err
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
	k := &Key{o: o, key: key, signer: key, family: family, loc: Location(key)}
	if priv, ok := key.(*sm2.PrivateKey); ok {
		// An in-process SM2 key signs through sm2sign: half of gmsm's
		// CPU per signature. A key sm2sign refuses keeps gmsm's, whose
		// error the first signature then reports.
		if fast, err := sm2sign.New(priv); err == nil {
			k.signer = fast
		}
	}
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
	o   *Engine
	key crypto.Signer
	// signer signs for key: key itself, or its sm2sign.Key.
	signer crypto.Signer
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
		return smkey.Sign(ctx, k.signer, rand, digest, opts)
	})
}

// Decrypt implements crypto.Decrypter without a deadline.
func (k decrypterKey) Decrypt(rand io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	return k.DecryptContext(context.Background(), rand, msg, opts)
}

// DecryptContext implements smkey.ContextDecrypter. A decryption the
// engine refuses (ErrBusy, ErrClosed) never saw the ciphertext, so its
// error also wraps smkey.ErrKeyUnavailable: a TLCP server then fails the
// handshake with internal_error, where a decryption error would have it go
// on with a random pre-master (GB/T 38636 §6.4.5.8, RFC 5246 §7.4.7.1) and
// report its own overload as the client's wrong Finished.
func (k decrypterKey) DecryptContext(ctx context.Context, rand io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	d := k.key.(crypto.Decrypter) // checked by Wrap
	out, err := k.o.do(ctx, "decrypt", k.family, k.loc, func() ([]byte, error) {
		return smkey.Decrypt(ctx, d, rand, msg, opts)
	})
	if (errors.Is(err, ErrBusy) || errors.Is(err, ErrClosed)) && !errors.Is(err, smkey.ErrKeyUnavailable) {
		err = fmt.Errorf("%w: %w", smkey.ErrKeyUnavailable, err)
	}
	return out, err
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
