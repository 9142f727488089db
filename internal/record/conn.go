package record

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/callgate"
)

// Conn is the connection core that tlcp.Conn and tls13sm.Conn each hold:
// the underlying connection and its net.Conn pass-through methods, the
// record Reader with the input side (lock, pending data) and the Read
// loop, the pending handshake Flight, alert sending, the application-data
// counters, the Write/Close interlock and close sequence, the once-only
// close_notify and the run-once handshake plumbing. The stacks keep their
// handshake state machines, key schedules, record protection (reading and
// checking records, sealing them), their write paths and output locks.
//
// The stacks' exported methods (LocalAddr, …, Stats) forward to Conn in
// one line each: go doc and pkg.go.dev list only methods declared in the
// stack's package, not ones promoted from another package's embedded type,
// and an embedded core would also put its stack-internal methods into the
// stacks' public method sets.
type Conn struct {
	Raw      net.Conn // the underlying connection
	Rd       Reader   // record framing and input buffers
	Flight   Flight   // the pending handshake flight
	Counters Counters // application data moved

	// The input side, guarded by InMu: decrypted application data not yet
	// read, and handshake bytes not yet consumed.
	InMu  sync.Mutex
	Input []byte
	Hand  []byte

	// Name prefixes the core's own errors ("tlcp", "tls13sm").
	Name string
	// KeepInterruptCause: the error a handshake interrupted by its context
	// latches is "<Name>: handshake interrupted: <ctx error> (<handshake's
	// own error>)" instead of the context's bare error (see Handshake).
	KeepInterruptCause bool

	calls     callgate.Gate // Write/Close interlock
	alertBody [2]byte       // SendAlert's record body; guarded by the stack's output lock

	// Guarded by the stack's output lock.
	closeNotifySent bool
	closeNotifyErr  error

	handshakeMu   sync.Mutex
	handshakeErr  error
	handshakeDone atomic.Bool
}

// Buffered is the number of bytes the connection holds that a Read has
// not returned: decrypted application data, handshake bytes and raw input
// not yet taken as records. A pooled idle connection with any is not idle:
// its peer sent something nobody asked for.
func (c *Conn) Buffered() int {
	c.InMu.Lock()
	defer c.InMu.Unlock()
	return len(c.Input) + len(c.Hand) + c.Rd.Buffered()
}

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.Raw.LocalAddr() }

// RemoteAddr returns the remote network address.
func (c *Conn) RemoteAddr() net.Addr { return c.Raw.RemoteAddr() }

// SetDeadline sets the read and write deadlines of the underlying connection.
func (c *Conn) SetDeadline(t time.Time) error { return c.Raw.SetDeadline(t) }

// SetReadDeadline sets the read deadline of the underlying connection.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.Raw.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline of the underlying connection.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.Raw.SetWriteDeadline(t) }

// Stats returns a snapshot of the application-data counters.
func (c *Conn) Stats() Stats { return c.Counters.Stats() }

// BeginWrite enters a Write; it fails once Close began. A successful
// BeginWrite is paired with EndWrite.
func (c *Conn) BeginWrite() bool { return c.calls.Enter() }

// EndWrite leaves a Write.
func (c *Conn) EndWrite() { c.calls.Leave() }

// HandshakeComplete reports whether the handshake completed.
func (c *Conn) HandshakeComplete() bool { return c.handshakeDone.Load() }

// SetHandshakeComplete marks the handshake complete (TLCP does so inside
// its handshake, before the last flight's reads are returned).
func (c *Conn) SetHandshakeComplete() { c.handshakeDone.Store(true) }

// LockHandshake and UnlockHandshake hold off a handshake (ConnectionState
// reads the handshake's results under this lock).
func (c *Conn) LockHandshake() { c.handshakeMu.Lock() }

// UnlockHandshake releases LockHandshake.
func (c *Conn) UnlockHandshake() { c.handshakeMu.Unlock() }

// Handshake runs the handshake at most once, as crypto/tls does. A
// completed handshake returns nil at once; a failed one returns the error
// it latched. Otherwise, under the handshake lock and with InMu held, run
// performs it and end post-processes its result
// (alerts, flight, callbacks) into the error latched and returned.
//
// Context rule (both stacks): when ctx can end, it is watched from the
// call on (unless it is a ConnDeadline), also while the call waits for a
// handshake another goroutine runs; if it ends first, Raw is closed, which
// fails the handshake's blocked reads and writes, and the call returns
// ctx's error. The handshake failed because of ctx when it failed after
// ctx ended: then the error end
// receives (and the handshake latches) is ctx's error, or with
// KeepInterruptCause ctx's error with the handshake's own failure in
// words (tls13sm keeps it for the logs; tlcp's callers and metrics have
// always seen the bare error).
func (c *Conn) Handshake(ctx context.Context, run func(context.Context) error, end func(error) error) (ret error) {
	if c.handshakeDone.Load() {
		return nil
	}
	if _, bound := ctx.(ConnDeadline); !bound && ctx.Done() != nil {
		stop := closeOnDone(ctx, c.Raw)
		defer func() {
			if err := stop(); err != nil {
				ret = err
			}
		}()
	}
	c.handshakeMu.Lock()
	defer c.handshakeMu.Unlock()
	if c.handshakeErr != nil {
		return c.handshakeErr
	}
	if c.handshakeDone.Load() {
		return nil
	}
	c.InMu.Lock()
	defer c.InMu.Unlock()
	err := run(ctx)
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil {
		if c.KeepInterruptCause {
			err = fmt.Errorf("%s: handshake interrupted: %w (%v)", c.Name, ctxErr, err)
		} else {
			err = ctxErr
		}
	}
	err = end(err)
	c.handshakeErr = err
	return err
}

// FlightOnAlert is what sending an alert does to a pending handshake
// flight.
type FlightOnAlert uint8

const (
	// DropFlight drops the flight and sends the alert alone: the peer
	// never sees half a flight (tlcp).
	DropFlight FlightOnAlert = iota
	// FlushFlight adds the alert to the flight and writes the two together:
	// the peer sees the messages that led to the alert (tls13sm, whose
	// write puts records into a flight while one is being built).
	FlushFlight
)

// SendAlert sends alert a at its level (Alert.Level) through write, the
// stack's record layer, which protects and writes an alert record with
// the body it is given (or adds it to the pending flight); onFlight says
// what happens to a pending flight. It returns the error of writing. The
// stack's output lock is held; the stack latches the error it reports.
func (c *Conn) SendAlert(a Alert, onFlight FlightOnAlert, write func(body []byte) error) error {
	if onFlight == DropFlight {
		c.Flight.Drop()
	}
	c.alertBody = [2]byte{a.Level(), byte(a)}
	err := write(c.alertBody[:])
	if onFlight == FlushFlight && c.Flight.Active() {
		if ferr := c.Flight.Flush(c.Raw); err == nil {
			err = ferr
		}
	}
	return err
}

// HandshakeErr returns the error the handshake latched, if any.
func (c *Conn) HandshakeErr() error { return c.handshakeErr }

// CloseNotifySent reports whether close_notify was attempted. The stack's
// output lock is held.
func (c *Conn) CloseNotifySent() bool { return c.closeNotifySent }

// CloseNotify runs send (which writes close_notify) once, under a bounded
// write deadline (SendCloseNotify); later calls return the first one's
// error. The stack's output lock is held.
func (c *Conn) CloseNotify(send func() error) error {
	if !c.closeNotifySent {
		c.closeNotifyErr = SendCloseNotify(c.Raw, send)
		c.closeNotifySent = true
	}
	return c.closeNotifyErr
}

// LastNotify is CloseNotify for a stack's WriteLast, whose send writes
// the connection's last application data with close_notify behind it: it
// runs under the caller's write deadline, which bounds a Write, and not
// under SendCloseNotify's short one, meant for an alert alone (a slow
// client would see its last response cut after a few seconds, and the
// caller's deadline would be gone). The stack's output lock is held.
func (c *Conn) LastNotify(send func() error) error {
	if !c.closeNotifySent {
		c.closeNotifyErr = send()
		c.closeNotifySent = true
	}
	return c.closeNotifyErr
}

// Close is the close sequence of both stacks' Conn.Close, interlocked with
// Writes as crypto/tls does: a second Close fails with net.ErrClosed; a
// Close during a Write closes Raw at once (which fails the Write); else,
// when the handshake completed, notify sends close_notify; then Raw is closed,
// and a failure to send close_notify is returned although the connection
// was closed anyway.
// The input buffer goes back to its pool once no Read holds it.
func (c *Conn) Close(notify func() error) error {
	err := closeSequence(&c.calls, c.Raw, c.handshakeDone.Load(), notify, c.Name)
	c.Rd.FreeOnClose(&c.InMu, &c.Input)
	return err
}

// Read is the Read of both stacks after the handshake: it returns pending
// application data or reads records until there is some (Reader.ReadData),
// under InMu. readRecord reads and processes one record; postHandshake
// handles a handshake message that arrived after the handshake.
func (c *Conn) Read(b []byte, readRecord, postHandshake func() error) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.InMu.Lock()
	defer c.InMu.Unlock()
	return c.Rd.ReadData(b, &c.Input, &c.Hand, &c.Counters, readRecord, postHandshake)
}
