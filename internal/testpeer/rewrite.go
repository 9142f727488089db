package testpeer

import (
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/gmproxy/gmproxy/internal/record"
)

// Rewrites of outgoing handshake messages for misbehaving-peer tests
// (tlcp and tls13sm Config.testHandshakeOut). Each takes a complete
// message (type, u24 length, body), which it may modify, and returns the
// bytes to send instead: altered, several messages, or none. TLCP and
// TLS 1.3 share the handshake header (GB/T 38636 §6.4.5.1, RFC 8446 §4).

// Rewrite is one rewrite of an outgoing handshake message.
type Rewrite = func(msg []byte) []byte

// OnType applies f to messages of type typ and passes the others through.
func OnType(typ uint8, f Rewrite) Rewrite {
	return func(m []byte) []byte {
		if m[0] != typ {
			return m
		}
		return f(m)
	}
}

// FlipLast flips a bit of the last byte.
func FlipLast(m []byte) []byte { m[len(m)-1] ^= 0x01; return m }

// FlipAt flips a bit of the byte at i (counted from the end when negative).
func FlipAt(i int) Rewrite {
	return func(m []byte) []byte {
		j := i
		if j < 0 {
			j += len(m)
		}
		m[j] ^= 0x01
		return m
	}
}

// SetLen rewrites the header's length to the body's.
func SetLen(m []byte) []byte {
	n := len(m) - 4
	m[1], m[2], m[3] = byte(n>>16), byte(n>>8), byte(n)
	return m
}

// Truncate drops the last n body bytes, keeping the header consistent.
func Truncate(n int) Rewrite {
	return func(m []byte) []byte { return SetLen(m[:len(m)-n]) }
}

// Extend appends n zero body bytes, keeping the header consistent.
func Extend(n int) Rewrite {
	return func(m []byte) []byte { return SetLen(append(m, make([]byte, n)...)) }
}

// SetU16 writes v at offset off.
func SetU16(off int, v uint16) Rewrite {
	return func(m []byte) []byte { binary.BigEndian.PutUint16(m[off:], v); return m }
}

// SetType rewrites the message type.
func SetType(typ uint8) Rewrite {
	return func(m []byte) []byte { m[0] = typ; return m }
}

// OverLength claims a body of 2^24-1 bytes.
func OverLength(m []byte) []byte { m[1], m[2], m[3] = 0xff, 0xff, 0xff; return m }

// Drop sends nothing.
func Drop([]byte) []byte { return nil }

// Twice sends the message twice.
func Twice(m []byte) []byte { return append(slices.Clone(m), m...) }

// SwapNext holds a message of type first and sends it right after the next
// message of type second.
func SwapNext(first, second uint8) Rewrite {
	var held []byte
	return func(m []byte) []byte {
		switch {
		case m[0] == first && held == nil:
			held = m
			return nil
		case m[0] == second && held != nil:
			out := append(m, held...)
			held = nil
			return out
		}
		return m
	}
}

// helloSuitesOffset is the offset of the cipher_suites vector of a
// ClientHello, or of the cipher_suite of a ServerHello: header, version,
// random, session_id<1>.
func helloSuitesOffset(m []byte) int {
	off := 4 + 2 + 32
	return off + 1 + int(m[off])
}

// AppendSuite appends suite v to a ClientHello's cipher_suites.
func AppendSuite(v uint16) Rewrite {
	return func(m []byte) []byte {
		off := helloSuitesOffset(m)
		n := int(binary.BigEndian.Uint16(m[off:]))
		end := off + 2 + n
		out := append(slices.Clone(m[:end]), byte(v>>8), byte(v))
		out = append(out, m[end:]...)
		binary.BigEndian.PutUint16(out[off:], uint16(n+2))
		return SetLen(out)
	}
}

// ServerHelloSuite rewrites the suite a ServerHello selects.
func ServerHelloSuite(v uint16) Rewrite {
	return func(m []byte) []byte {
		binary.BigEndian.PutUint16(m[helloSuitesOffset(m):], v)
		return m
	}
}

// FlipRandom flips a bit of a hello's random.
func FlipRandom(m []byte) []byte { m[4+2] ^= 0x01; return m }

// Endpoint is one side of a tlcp or tls13sm connection.
type Endpoint interface {
	Handshake() error
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	Close() error
}

// MisbehaveSecret is what a misbehaving endpoint writes as application
// data after its handshake; it must never reach the honest side.
const MisbehaveSecret = "application data that must not arrive"

// RunMisbehaving runs a handshake between honest and misb (whose Config
// makes it misbehave) over connections whose deadlines the caller set.
// After a successful handshake, misb runs records (which writes raw
// records) when it is not nil, or writes MisbehaveSecret, and then reads
// up to reads times, to receive the honest side's alert (a client first
// reads tickets). The honest side reads once after its handshake and must
// not get application data. With eof the honest side must see io.EOF on
// two reads (nothing after close_notify), and RunMisbehaving returns
// done; otherwise it returns the honest side's handshake or read error and
// the misbehaving side's, for the caller to check the alert.
func RunMisbehaving(t testing.TB, honest, misb Endpoint, records func() error, reads int, eof bool) (honestErr, misbErr error, done bool) {
	t.Helper()
	var accepted []byte
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		// Closing ends the misbehaving side's last Read when a check is
		// missing and the honest side sent no alert.
		defer honest.Close()
		if honestErr = honest.Handshake(); honestErr != nil {
			return
		}
		buf := make([]byte, 256)
		n, err := honest.Read(buf)
		accepted, honestErr = buf[:n], err
		if err == nil {
			honestErr = errors.New("Read returned application data")
		} else if eof {
			// A second read must not reveal what followed close_notify.
			n, err = honest.Read(buf)
			accepted = append(accepted, buf[:n]...)
			if err != io.EOF {
				honestErr = err
			}
		}
	}()
	defer misb.Close()
	misbErr = misb.Handshake()
	if misbErr == nil {
		if records != nil {
			misbErr = records()
		} else {
			misb.Write([]byte(MisbehaveSecret))
		}
		if !eof {
			buf := make([]byte, 64)
			for i := 0; i < reads && misbErr == nil; i++ {
				_, misbErr = misb.Read(buf)
			}
		}
	}
	<-finished
	if len(accepted) > 0 {
		t.Errorf("honest side accepted application data %q", accepted)
	}
	if eof && honestErr != io.EOF {
		t.Fatalf("honest side: %v, want io.EOF", honestErr)
	}
	return honestErr, misbErr, eof
}

// WantAlerts checks the outcome of RunMisbehaving for a misbehaviour the
// honest side must answer with alert want (either SM stack: both fail with
// record.AlertError): the honest side sent it, and, unless the two sides'
// transcripts diverged (then the misbehaving side may fail first on its
// own), the misbehaving side received it.
func WantAlerts(t testing.TB, honestErr, misbErr error, want record.Alert, diverged bool) {
	t.Helper()
	var ae *record.AlertError
	if !errors.As(honestErr, &ae) || ae.Remote || ae.Alert != want {
		t.Fatalf("honest side: %v, want it to send %v", honestErr, want)
	}
	if diverged {
		return
	}
	if !errors.As(misbErr, &ae) || !ae.Remote || ae.Alert != want {
		t.Fatalf("misbehaving side: %v, want the peer's %v", misbErr, want)
	}
}

// Recorder keeps a copy of each outgoing handshake message of one type
// (a Config.testHandshakeOut that changes nothing), for tests that compare
// what an endpoint sent on several connections.
type Recorder struct {
	Type uint8
	mu   sync.Mutex
	msgs [][]byte
}

// Out records m when it has r.Type and returns it unchanged.
func (r *Recorder) Out(m []byte) []byte {
	if m[0] == r.Type {
		r.mu.Lock()
		r.msgs = append(r.msgs, slices.Clone(m))
		r.mu.Unlock()
	}
	return m
}

// Msgs returns the messages recorded so far.
func (r *Recorder) Msgs() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}
