package record

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// writesConn records each Write separately.
type writesConn struct {
	net.Conn
	writes [][]byte
}

func (c *writesConn) Write(b []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(b))
	return len(b), nil
}

func TestHandshakeRunsOnceAndLatches(t *testing.T) {
	boom := errors.New("boom")
	runs := 0
	c := &Conn{Raw: &writesConn{}, Name: "tlcp"}
	end := func(err error) error { return err }
	fail := func(context.Context) error { runs++; return boom }
	for range 2 {
		if err := c.Handshake(context.Background(), fail, end); err != boom {
			t.Fatalf("Handshake = %v, want the first run's error", err)
		}
	}
	if runs != 1 {
		t.Fatalf("a failed handshake ran %d times", runs)
	}

	ok := &Conn{Raw: &writesConn{}}
	runs = 0
	succeed := func(context.Context) error { runs++; ok.SetHandshakeComplete(); return nil }
	for range 2 {
		if err := ok.Handshake(context.Background(), succeed, end); err != nil {
			t.Fatal(err)
		}
	}
	if runs != 1 || !ok.HandshakeComplete() {
		t.Fatalf("a completed handshake ran %d times (complete %v)", runs, ok.HandshakeComplete())
	}
}

// TestHandshakeContextRule: a context that ends during the handshake
// closes the connection; the call returns the context's error and the
// handshake latches it, bare or with the handshake's own failure
// (KeepInterruptCause).
func TestHandshakeContextRule(t *testing.T) {
	for _, keep := range []bool{false, true} {
		a, b := net.Pipe()
		defer b.Close()
		c := &Conn{Raw: a, Name: "tls13sm", KeepInterruptCause: keep}
		ctx, cancel := context.WithCancel(context.Background())
		var seen error
		run := func(context.Context) error {
			cancel()
			_, err := a.Read(make([]byte, 1)) // fails once the watch closes a
			return err
		}
		err := c.Handshake(ctx, run, func(err error) error { seen = err; return err })
		if err != context.Canceled {
			t.Fatalf("keep=%v: Handshake = %v, want context.Canceled", keep, err)
		}
		latched := c.HandshakeErr()
		if seen != latched || !errors.Is(latched, context.Canceled) {
			t.Fatalf("keep=%v: end saw %v, latched %v", keep, seen, latched)
		}
		wrapped := strings.HasPrefix(latched.Error(), "tls13sm: handshake interrupted: context canceled (") &&
			strings.Contains(latched.Error(), io.ErrClosedPipe.Error())
		if keep != wrapped {
			t.Fatalf("keep=%v: latched %q", keep, latched)
		}
		if err := c.Handshake(context.Background(), run, nil); err != latched {
			t.Fatalf("keep=%v: later Handshake = %v, want the latched %v", keep, err, latched)
		}
	}
}

func TestSendAlertFlight(t *testing.T) {
	pending := []byte("flight")
	start := func(c *Conn) {
		c.Flight.Set(append(c.Flight.Room(len(pending)), pending...))
	}

	// DropFlight: the alert goes out alone.
	w := &writesConn{}
	c := &Conn{Raw: w}
	start(c)
	direct := func(body []byte) error { _, err := c.Raw.Write(body); return err }
	if err := c.SendAlert(AlertDecodeError, DropFlight, direct); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 1 || !bytes.Equal(w.writes[0], []byte{AlertLevelFatal, byte(AlertDecodeError)}) || c.Flight.Active() {
		t.Fatalf("DropFlight wrote %q (flight active %v)", w.writes, c.Flight.Active())
	}

	// FlushFlight: the alert joins the flight, written in one write.
	w = &writesConn{}
	c = &Conn{Raw: w}
	start(c)
	queue := func(body []byte) error { c.Flight.Set(append(c.Flight.Room(len(body)), body...)); return nil }
	if err := c.SendAlert(AlertCloseNotify, FlushFlight, queue); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(pending), AlertLevelWarning, byte(AlertCloseNotify))
	if len(w.writes) != 1 || !bytes.Equal(w.writes[0], want) || c.Flight.Active() {
		t.Fatalf("FlushFlight wrote %q, want %q in one write", w.writes, want)
	}
}
