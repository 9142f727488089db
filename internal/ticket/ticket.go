// Package ticket seals and opens session tickets for both TLCP (RFC 5077
// style, as Tongsuo does in NTLS) and TLS 1.3-SM, with rotating keys: the
// newest key encrypts, older keys still decrypt, so several instances that
// share a key file or a key service resume each other's sessions.
//
// Wire form of a ticket: key name (16) || nonce (12) || SM4-GCM(state) || tag (16).
// The additional data of the AEAD is the key name and the ticket's Protocol,
// so a ticket sealed for one protocol never opens as the other's, even when
// both share one key set.
package ticket

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
)

// Overhead is the number of bytes Seal adds to the sealed state.
const Overhead = 16 + 12 + 16

// KeySize is the size of the secret from which a ticket key is derived.
const KeySize = 32

// Protocol is what a ticket holds a session of; it is authenticated with
// the ticket (additional data), never sent.
type Protocol uint8

const (
	// TLCP tickets hold TLCP sessions (RFC 5077-style tickets in NTLS).
	TLCP Protocol = iota
	// TLS13SM tickets hold TLS 1.3-SM resumption PSKs.
	TLS13SM
	// StoredSession is not a ticket: a TLCP session sealed for a shared
	// session store (package sessionstore), which must never open as a
	// ticket nor a ticket as it.
	StoredSession
	// WrappedKey is not a ticket: a fleet ticket-key secret sealed with the
	// fleet's wrap key for the shared store (package sessionstore).
	WrappedKey
	// TLS tickets hold ordinary TLS sessions (crypto/tls's SessionState).
	TLS
	numProtocols
)

// adLen is the length of a ticket's additional data: the key name and the
// protocol.
const adLen = 16 + 1

// Key is one ticket-encryption key.
type Key struct {
	// Name identifies the key inside tickets (not secret).
	Name [16]byte
	// Created is when the key was made; a Rotator retires keys by age.
	Created time.Time
	aead    cipher.AEAD
	// ad is the additional data per protocol: Name || protocol. It lives
	// in the Key (not built per call) because the AEAD interface makes
	// its arguments escape.
	ad [numProtocols][adLen]byte
}

// additionalData is the AEAD additional data of p's tickets under k (nil
// for an unknown protocol, which then neither seals nor opens).
func (k *Key) additionalData(p Protocol) []byte {
	if p >= numProtocols {
		return nil
	}
	return k.ad[p][:]
}

// NewKey derives a ticket key from a 32-byte secret. The name and the SM4 key
// are both derived with SM3 so that one secret per key is enough to share.
func NewKey(secret []byte, created time.Time) (Key, error) {
	if len(secret) < 16 {
		return Key{}, errors.New("ticket: key secret shorter than 16 bytes")
	}
	name := sm3.Sum(append([]byte("gmproxy ticket key name\x00"), secret...))
	enc := sm3.Sum(append([]byte("gmproxy ticket key enc\x00"), secret...))
	block, err := sm4.NewCipher(enc[:16])
	if err != nil {
		return Key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return Key{}, err
	}
	k := Key{Created: created, aead: aead}
	copy(k.Name[:], name[:16])
	for p := range k.ad {
		copy(k.ad[p][:], k.Name[:])
		k.ad[p][16] = byte(p)
	}
	return k, nil
}

// Source provides ticket keys: the first one encrypts, all of them decrypt.
// It must be safe for concurrent use.
type Source interface {
	TicketKeys() []Key
}

// Seal encrypts state, a session of protocol p, under the first key of src
// and appends the ticket to dst.
func Seal(dst []byte, src Source, p Protocol, state []byte) ([]byte, error) {
	keys := src.TicketKeys()
	if len(keys) == 0 || keys[0].aead == nil {
		return nil, errors.New("ticket: no ticket key available")
	}
	k := &keys[0] // not a copy: its additional data is passed to the AEAD without escaping a local
	ad := k.additionalData(p)
	if ad == nil {
		return nil, fmt.Errorf("ticket: unknown protocol %d", p)
	}
	dst = append(dst, k.Name[:]...)
	// The nonce is read straight into dst (a local array would escape to
	// the heap through the io.Reader).
	n := len(dst)
	dst = slices.Grow(dst, 12+len(state)+16)[:n+12]
	nonce := dst[n:]
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return nil, fmt.Errorf("ticket: nonce: %w", err)
	}
	// The key name and the protocol are authenticated as additional data.
	return k.aead.Seal(dst, nonce, state, ad), nil
}

// Open decrypts a ticket that Seal made for protocol p with any key of src.
// ok is false for an unknown key name, a forged or damaged ticket, or a
// ticket of another protocol. stale is true when the key that opened it is
// not the newest, so the caller should issue a new ticket.
func Open(src Source, p Protocol, ticket []byte) (state []byte, ok, stale bool) {
	return OpenTo(nil, src, p, ticket)
}

// OpenTo is Open with the state decrypted into dst's storage (dst[:0]) when
// it has room, so that a caller with a buffer allocates nothing.
func OpenTo(dst []byte, src Source, p Protocol, ticket []byte) (state []byte, ok, stale bool) {
	if len(ticket) < Overhead {
		return nil, false, false
	}
	keys := src.TicketKeys()
	for i := range keys {
		k := &keys[i]
		if k.aead == nil || subtle.ConstantTimeCompare(k.Name[:], ticket[:16]) != 1 {
			continue
		}
		ad := k.additionalData(p)
		if ad == nil {
			return nil, false, false
		}
		out, err := k.aead.Open(dst[:0], ticket[16:28], ticket[28:], ad)
		if err != nil {
			return nil, false, false
		}
		return out, true, i != 0
	}
	return nil, false, false
}

// Static is a fixed list of keys, newest first.
type Static []Key

// TicketKeys implements Source.
func (s Static) TicketKeys() []Key { return s }

// Rotator keeps in-memory keys: a new random key every interval, keeping each
// key until it is lifetime old so that tickets issued with it still open,
// and no longer: a key that can open no valid ticket has no use left, only
// risk (RFC 5077 §5.5, §5.6). For tickets valid for L after they are
// issued, lifetime is interval + L. Keys set with SetKeys (for example read
// from a shared key file) replace the random ones.
type Rotator struct {
	interval, lifetime time.Duration
	now                func() time.Time

	mu    sync.Mutex
	keys  []Key
	fixed bool
}

// NewRotator returns a Rotator; interval and lifetime default to 1h and 12
// intervals, and a lifetime shorter than the interval is raised to it (as
// SetLifetime does).
func NewRotator(interval, lifetime time.Duration) *Rotator {
	if interval <= 0 {
		interval = time.Hour
	}
	if lifetime <= 0 {
		lifetime = 12 * interval
	}
	lifetime = max(lifetime, interval)
	return &Rotator{interval: interval, lifetime: lifetime, now: time.Now}
}

// SetLifetime changes how old a key may grow before it is dropped (at
// least the interval).
func (r *Rotator) SetLifetime(lifetime time.Duration) {
	r.mu.Lock()
	r.lifetime = max(lifetime, r.interval)
	r.mu.Unlock()
}

// SetClock replaces the clock (tests).
func (r *Rotator) SetClock(now func() time.Time) {
	r.mu.Lock()
	r.now = now
	r.mu.Unlock()
}

// SetKeys installs keys, newest first, and stops random rotation.
func (r *Rotator) SetKeys(keys []Key) {
	r.mu.Lock()
	r.keys = append([]Key(nil), keys...)
	r.fixed = true
	r.mu.Unlock()
}

// TicketKeys implements Source, rotating when the newest key is older than the interval.
func (r *Rotator) TicketKeys() []Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fixed {
		return r.keys
	}
	now := r.now()
	if len(r.keys) == 0 || now.Sub(r.keys[0].Created) >= r.interval {
		var secret [KeySize]byte
		if _, err := io.ReadFull(rand.Reader, secret[:]); err == nil {
			if k, err := NewKey(secret[:], now); err == nil {
				keys := make([]Key, 0, len(r.keys)+1)
				keys = append(keys, k)
				for _, old := range r.keys {
					if now.Sub(old.Created) < r.lifetime {
						keys = append(keys, old)
					}
				}
				r.keys = keys
			}
		}
	}
	// Keys past their lifetime go at once, not at the next rotation.
	if n := len(r.keys); n > 1 && now.Sub(r.keys[n-1].Created) >= r.lifetime {
		keys := make([]Key, 0, n)
		for i, k := range r.keys {
			if i == 0 || now.Sub(k.Created) < r.lifetime {
				keys = append(keys, k)
			}
		}
		r.keys = keys
	}
	return r.keys
}

// repeatedByte reports whether b is one byte value repeated (all zero, for
// example): a placeholder or a failed generator, never a secret.
func repeatedByte(b []byte) bool {
	for _, c := range b {
		if c != b[0] {
			return false
		}
	}
	return true
}

// ParseKeyFile reads ticket keys from file contents made of one or more
// 32-byte (or nginx-style 48/80-byte) raw secrets concatenated, newest first.
// A file of 48 or 80 bytes is taken as a single key, like nginx's
// ssl_session_ticket_key. A key made of one repeated byte (all zeros, for
// example) is refused.
func ParseKeyFile(b []byte, created time.Time) ([]Key, error) {
	var chunks [][]byte
	switch {
	case len(b) == 48 || len(b) == 80:
		chunks = [][]byte{b}
	case len(b) > 0 && len(b)%KeySize == 0:
		for i := 0; i < len(b); i += KeySize {
			chunks = append(chunks, b[i:i+KeySize])
		}
	default:
		return nil, fmt.Errorf("ticket key file has %d bytes; want 48 or 80 (one key) or a multiple of %d (newest first)", len(b), KeySize)
	}
	keys := make([]Key, 0, len(chunks))
	for i, c := range chunks {
		if repeatedByte(c) {
			return nil, fmt.Errorf("ticket key %d of %d in the file is one byte (0x%02x) repeated, not a secret; write random bytes instead", i+1, len(chunks), c[0])
		}
		k, err := NewKey(c, created)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}
