package record

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// fakeConn records how the dial plumbing used it.
type fakeConn struct {
	net.Conn
	host     string
	deadline time.Time
	hasDone  bool
	err      error
}

func (c *fakeConn) HandshakeContext(ctx context.Context) error {
	c.deadline, _ = ctx.Deadline()
	c.hasDone = ctx.Done() != nil
	return c.err
}

func TestListenWrapsAccepted(t *testing.T) {
	var wrapped int
	l, err := Listen("tcp", "127.0.0.1:0", func(c net.Conn) net.Conn { wrapped++; return &fakeConn{Conn: c} })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*fakeConn); !ok || wrapped != 1 {
		t.Fatalf("accepted %T, wrapped %d", c, wrapped)
	}
	l.Close()
	if _, err := l.Accept(); err == nil {
		t.Fatal("Accept after Close succeeded")
	}
	if wrapped != 1 {
		t.Fatalf("a failed Accept was wrapped")
	}
}

func TestDial(t *testing.T) {
	// A server that hangs up at once (the wrapper closes each connection).
	l, err := Listen("tcp", "127.0.0.1:0", func(c net.Conn) net.Conn { c.Close(); return c })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for _, err := l.Accept(); err == nil; _, err = l.Accept() {
		}
	}()
	addr := l.Addr().String()
	var fc *fakeConn
	client := func(handshakeErr error) func(net.Conn, string) *fakeConn {
		return func(raw net.Conn, host string) *fakeConn {
			fc = &fakeConn{Conn: raw, host: host, err: handshakeErr}
			return fc
		}
	}

	// No timeout, no deadline: the handshake gets a context without Done.
	c, err := DialWithDialer(new(net.Dialer), "tcp", addr, client(nil))
	if err != nil || c != fc || fc.host != "127.0.0.1" || fc.hasDone || !fc.deadline.IsZero() {
		t.Fatalf("plain dial: %v host %q done %v deadline %v", err, fc.host, fc.hasDone, fc.deadline)
	}
	c.Close()

	// Timeout and Deadline: the earlier one bounds the handshake.
	early := time.Now().Add(time.Minute)
	_, err = DialWithDialer(&net.Dialer{Timeout: time.Hour, Deadline: early}, "tcp", addr, client(nil))
	if err != nil || !fc.deadline.Equal(early) {
		t.Fatalf("deadline %v, want %v (%v)", fc.deadline, early, err)
	}
	fc.Close()
	_, err = DialWithDialer(&net.Dialer{Timeout: time.Minute, Deadline: time.Now().Add(time.Hour)}, "tcp", addr, client(nil))
	if err != nil || fc.deadline.IsZero() || time.Until(fc.deadline) > 2*time.Minute {
		t.Fatalf("timeout deadline %v (%v)", fc.deadline, err)
	}
	fc.Close()

	// A failed handshake closes the raw connection and returns no conn.
	boom := errors.New("boom")
	c, err = DialContext(context.Background(), new(net.Dialer), "tcp", addr, client(boom))
	if !errors.Is(err, boom) || c != nil {
		t.Fatalf("failed handshake: %v conn %v", err, c)
	}
	if _, werr := fc.Conn.Write([]byte{0}); !errors.Is(werr, net.ErrClosed) {
		t.Fatalf("raw connection not closed after a failed handshake: %v", werr)
	}

	// A failed dial never builds a client.
	fc = nil
	if _, err := DialContext(context.Background(), new(net.Dialer), "tcp", "127.0.0.1:0", client(nil)); err == nil || fc != nil {
		t.Fatalf("dial to port 0: %v, client built %v", err, fc != nil)
	}
}

// TestDialServerNameWithoutZone: the default server name of a dial to an
// IPv6 address with a zone ([::1%lo]:port, as fe80::1%eth0) is the address
// without it: the zone names this host's interface, and a certificate's IP
// SAN holds none, so verifying against "::1%lo" always failed.
func TestDialServerNameWithoutZone(t *testing.T) {
	l, err := Listen("tcp", "[::1]:0", func(c net.Conn) net.Conn { return c })
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	defer l.Close()
	go func() {
		for c, err := l.Accept(); err == nil; c, err = l.Accept() {
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	var host string
	c, err := DialContext(context.Background(), new(net.Dialer), "tcp", net.JoinHostPort("::1%lo", port), func(raw net.Conn, h string) *fakeConn {
		host = h
		return &fakeConn{Conn: raw}
	})
	if err != nil {
		t.Skip("no dial to a zoned loopback address:", err)
	}
	c.Close()
	if host != "::1" {
		t.Fatalf("server name %q, want ::1", host)
	}
}
