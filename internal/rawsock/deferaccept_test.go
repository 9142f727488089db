package rawsock

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestDeferAccept: with the option a client that has sent its first byte
// is handed over at once and a silent one is held back; without it the
// silent one is handed over too.
func TestDeferAccept(t *testing.T) {
	if !deferAcceptSupported {
		t.Skip("TCP_DEFER_ACCEPT is Linux's")
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ln := Listener{raw}
	tl := raw.(*net.TCPListener)
	if err := SetDeferAccept(ln, -time.Second); err == nil {
		t.Fatal("negative duration accepted")
	}
	// 2.5 s, rounded up to 3: a silent connection is held for two SYN-ACK
	// retransmissions, far longer than this test waits for it.
	if err := SetDeferAccept(ln, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if v, err := DeferAccept(ln); err != nil || v != 3*time.Second {
		t.Fatalf("TCP_DEFER_ACCEPT = %v, %v after setting 2.5s, want 3s", v, err)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	accept := func(wait time.Duration) (net.Conn, error) {
		tl.SetDeadline(time.Now().Add(wait))
		c, err := ln.Accept()
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	dial() // silent
	talker := dial()
	if _, err := talker.Write([]byte{0x16}); err != nil {
		t.Fatal(err)
	}
	c, err := accept(5 * time.Second)
	if err != nil {
		t.Fatalf("the client that sent a byte was not handed over: %v", err)
	}
	if c.RemoteAddr().String() != talker.LocalAddr().String() {
		t.Fatalf("handed over %v first, want the client that sent a byte (%v)", c.RemoteAddr(), talker.LocalAddr())
	}
	if c, err := accept(300 * time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the silent client was handed over at once (%v, %v)", c, err)
	}

	if err := SetDeferAccept(ln, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := DeferAccept(ln); err != nil || v != 0 {
		t.Fatalf("TCP_DEFER_ACCEPT = %v, %v after turning it off", v, err)
	}
	quiet := dial()
	for {
		c, err := accept(5 * time.Second)
		if err != nil {
			t.Fatalf("with the option off a silent client was not handed over: %v", err)
		}
		if c.RemoteAddr().String() == quiet.LocalAddr().String() {
			break
		}
	}
}

// TestDeferAcceptOtherListeners: a listener that is not TCP is left alone.
func TestDeferAcceptOtherListeners(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	if err := SetDeferAccept(ln, time.Second); err != nil {
		t.Fatal(err)
	}
}
