package daemon

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestCloseCutsRemovedListener: Close closes everything at once, also the
// connections of a listener a reload removed that are still draining (a
// handshake in progress here), instead of leaving them to that listener's
// own grace period after the daemon is gone.
func TestCloseCutsRemovedListener(t *testing.T) {
	testRemovedListenerCut(t, func(td *testDaemon) { td.Close() })
}

// TestShutdownBoundsRemovedListener: Shutdown's ctx bounds the draining
// of a listener a reload removed as it bounds the others: at its end the
// listener's connections are closed and Shutdown reports them.
func TestShutdownBoundsRemovedListener(t *testing.T) {
	testRemovedListenerCut(t, func(td *testDaemon) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := td.Shutdown(ctx); err == nil {
			t.Error("Shutdown reported every connection drained while one of the removed listener was open")
		}
	})
}

// testRemovedListenerCut starts a daemon with two listeners, opens a
// connection to the second (a handshake in progress, allowed an hour),
// reloads without that listener, runs stop and checks that the connection
// was closed.
func testRemovedListenerCut(t *testing.T, stop func(*testDaemon)) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	two := cfg.Listeners[0]
	two.Address = "localhost:0" // another key, another loopback socket
	two.HandshakeTimeout = time.Hour
	cfg.Listeners = append(cfg.Listeners, two)
	cfg.ShutdownGrace = time.Hour
	td := startDaemon(t, cfg, func(*Env) {})
	addr := td.Addr(two.Address)
	if addr == "" {
		t.Fatal("test setup: the second listener is not up")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first byte of a TLS record: the kernel hands the connection
	// over (defer_accept) and its handshake waits for the rest. The
	// reload must come once the daemon holds it, not while it still sits
	// in the listener's queue (the reload's close would reset it there,
	// and Shutdown would rightly find nothing to drain).
	if _, err := c.Write([]byte{0x16}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); td.obs.startedOn(two.Address) == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("test setup: the daemon never began the connection's handshake")
		}
	}
	one := *cfg
	one.Listeners = cfg.Listeners[:1]
	td.setConfig(&one)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	if td.Addr(two.Address) != "" {
		t.Fatal("test setup: the reload kept the second listener")
	}
	stop(td)
	// Closed: the read ends at once with EOF or a reset. Still open: it
	// waits for the deadline (the handshake has an hour).
	c.SetReadDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	_, err = c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("after the daemon stopped a connection of the listener the reload removed is still open")
	}
}

// TestReloadMovingAPortSaysWhy: a reload that writes a running
// listener's port another way (here a host name for the same loopback
// address) cannot bind it while the running listener holds it; the
// refusal names that listener and what to do, instead of a bare "address
// already in use", and the running listener keeps serving.
func TestReloadMovingAPortSaysWhy(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := startDaemon(t, cfg, func(*Env) {})
	addr := td.Addr(cfg.Listeners[0].Address)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	moved := *cfg
	moved.Listeners = []conf.Listener{cfg.Listeners[0]}
	moved.Listeners[0].Address = "localhost:" + port
	td.setConfig(&moved)
	err = td.Reload()
	if err == nil {
		t.Fatal("the reload bound a port the running listener holds")
	}
	if want := "the running listener " + cfg.Listeners[0].Address + " holds that port"; !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not say %q", err, want)
	}
	if td.Addr(cfg.Listeners[0].Address) != addr {
		t.Error("the refused reload closed the running listener")
	}
}

// TestReloadPortTakenElsewhereNotBlamedOnListener: a new listener whose
// address is taken by another socket on another IP (the running listener
// shares only its port number, which the kernel allows) is refused with
// the bind's own error: the running listener does not hold that address,
// and keeping it or restarting would not help.
func TestReloadPortTakenElsewhereNotBlamedOnListener(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := startDaemon(t, cfg, func(*Env) {})
	_, port, err := net.SplitHostPort(td.Addr(cfg.Listeners[0].Address))
	if err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("tcp", "127.0.0.2:"+port)
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	defer other.Close()
	more := *cfg
	more.Listeners = []conf.Listener{cfg.Listeners[0], cfg.Listeners[0]}
	more.Listeners[1].Address = "127.0.0.2:" + port
	td.setConfig(&more)
	err = td.Reload()
	if err == nil {
		t.Fatal("the reload bound a port another socket holds")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("refusal %v, want address in use", err)
	}
	if strings.Contains(err.Error(), "running listener") {
		t.Errorf("refusal %q blames the running listener on another IP", err)
	}
}
