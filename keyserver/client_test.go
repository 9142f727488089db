package keyserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestPipelining: one connection carries many operations at once and the
// answers come back out of order: the slow half of the operations is held
// on the server until the fast half has been answered.
func TestPipelining(t *testing.T) {
	const n = 64
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	release := make(chan struct{})
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.Observer = obs
		s.runHook = func(_ Op, msg []byte) {
			if msg[len(msg)-32] == 1 { // slow
				<-release
			}
		}
	})
	kc := newClient(t, cliTLS, ks.addr)
	kc.Conns = 1
	rk := remote(t, kc, keys[0])
	ctx := context.Background()
	var order []int
	var mu sync.Mutex
	errc := make(chan error, n)
	var fastDone sync.WaitGroup
	start := func(i int, slow bool) {
		go func() {
			digest := make([]byte, 32)
			if slow {
				digest[0] = 1
			}
			digest[1] = byte(i)
			msg := cvMsg(digest)
			sig, err := rk.SignContext(ctx, nil, msg, testOpts)
			if err == nil && !sm2.VerifyASN1WithSM2(&keys[0].Private.PublicKey, []byte("TLSv1.3+GM+Cipher+Suite"), msg, sig) {
				err = errors.New("signature does not verify")
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if !slow {
				fastDone.Done()
			}
			errc <- err
		}()
	}
	// The slow half is sent first and held on the server...
	for i := range n / 2 {
		start(i, true)
	}
	inFlight := func() int { return obs.get(func(r *recObserver) int { return r.inFlight["edge"] }) }
	eventually(t, "slow operations in flight", func() bool { return inFlight() == n/2 })
	// ...then every fast operation sent after them is answered before
	// them: answers out of order, on the same connection.
	fastDone.Add(n / 2)
	for i := n / 2; i < n; i++ {
		start(i, false)
	}
	fastDone.Wait()
	// The server counts an operation out of flight after its answer is
	// written, so the last fast one may still be counted for a moment; the
	// held slow half must be all that is left.
	eventually(t, "only the slow operations in flight once the fast ones are answered", func() bool { return inFlight() == n/2 })
	close(release)
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	for j, i := range order[:n/2] {
		if i < n/2 {
			t.Fatalf("answer %d was slow operation %d", j, i)
		}
	}
	if c := obs.get(func(r *recObserver) int { return r.conns }); c != 1 {
		t.Errorf("%d connections, want 1", c)
	}
	if m := obs.get(func(r *recObserver) int { return r.maxIn["edge"] }); m < n/2+1 {
		t.Errorf("at most %d operations in flight at once", m)
	}
}

// TestFailover: a client with two addresses keeps working when one key
// server is killed during a run: 0 failed operations, and the dead one is
// marked down.
func TestFailover(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	pol := &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}
	a, b := startServer(t, pki, pol, nil), startServer(t, pki, pol, nil)
	kc := newClient(t, cliTLS, a.addr, b.addr)
	kc.HealthInterval = 50 * time.Millisecond
	rk := remote(t, kc, keys[0])
	ctx := context.Background()
	var ops, failed atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := rk.SignContext(ctx, nil, testMsg, testOpts); err != nil {
					failed.Add(1)
					t.Errorf("operation failed: %v", err)
				}
				ops.Add(1)
			}
		}()
	}
	eventually(t, "operations before the kill", func() bool { return ops.Load() > 200 })
	a.s.Close() // killed: connections and listener gone at once
	before := ops.Load()
	eventually(t, "operations after the kill", func() bool { return ops.Load() > before+500 })
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d of %d operations failed", failed.Load(), ops.Load())
	}
	eventually(t, "killed address marked down", func() bool { h := kc.Healthy(); return !h[a.addr] && h[b.addr] })
}

// TestFailoverDown: with both addresses down the operation fails with the
// connection error (not a hang), and succeeds again when one comes back.
func TestTimeoutAndStaleConnection(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")

	// Silent: completes mutual TLS, then reads and never answers.
	hole, err := tls.Listen("tcp", "127.0.0.1:0", pki.server)
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(io.Discard, c) }()
		}
	}()
	silent := newClient(t, cliTLS, hole.Addr().String())
	silent.Timeout = 200 * time.Millisecond
	rk := remote(t, silent, keys[0])
	if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); !errors.Is(err, ErrTimeout) {
		t.Errorf("silent key server: err = %v, want ErrTimeout", err)
	}
	// The caller's own deadline is reported as such.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = rk.SignContext(ctx, nil, testMsg, testOpts)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Errorf("caller deadline: err = %v", err)
	}

	// Stale connection: the server closes it between operations (as its
	// idle timeout does); the next operation reconnects without failing.
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.IdleTimeout = 50 * time.Millisecond })
	var dials atomic.Int32
	e := tlsEndpoint(cliTLS, ks.addr)
	dial := e.Dial
	e.Dial = func(ctx context.Context) (net.Conn, error) { dials.Add(1); return dial(ctx) }
	kc := &Client{Endpoints: []Endpoint{e}, Conns: 1, Timeout: 5 * time.Second, HealthInterval: time.Hour}
	defer kc.Close()
	rk = remote(t, kc, keys[0])
	for i := 0; i < 3; i++ {
		if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); err != nil {
			t.Fatalf("operation %d after the server closed the idle connection: %v", i, err)
		}
		want := int32(i + 1)
		eventually(t, "idle connection closed", func() bool {
			kc.eps[0].mu.Lock()
			defer kc.eps[0].mu.Unlock()
			return dials.Load() == want && kc.eps[0].conns[0].isDead()
		})
	}
}

// TestVersionMismatch: a version-1 client gets a version-1 error that
// names the versions; a client of version 2 (the release that sent
// digests to sign) or of a later version gets the server's hello and the
// connection closed; this client, facing a server of version 1, 2 or a
// later one, returns ErrVersion naming both.
func TestVersionMismatch(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Observer = obs })

	// A version-1 client: uint32 length || op || key ID || digest.
	c, err := tls.Dial("tcp", ks.addr, cliTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	id, _ := KeyID(keys[0].Private.Public())
	req := binary.BigEndian.AppendUint32(nil, 1+32+32)
	req = append(append(append(req, byte(OpSign)), id[:]...), make([]byte, 32)...)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("version-1 client got no answer: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(h[:]))
	if _, err := io.ReadFull(c, body); err != nil || body[0] != 1 || !strings.Contains(string(body), fmt.Sprintf("version %d", Version)) || !strings.Contains(string(body), "version 1") {
		t.Errorf("version-1 client: %q %v", body, err)
	}
	if obs.get(func(r *recObserver) int { return r.refused[RefusedVersion] }) != 1 {
		t.Error("version refusal not reported")
	}

	// Clients of version 2 and of a later version: the server answers its
	// own version and closes the connection.
	for i, v := range []uint16{2, Version + 1} {
		c, err := tls.Dial("tcp", ks.addr, cliTLS)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		c.Write(appendHello(nil, v))
		br := bufio.NewReader(c)
		if sv, _, err := readHello(br); err != nil || sv != Version {
			t.Errorf("version-%d client: server hello %d, %v", v, sv, err)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("version-%d client: connection not closed after the hello: %v", v, err)
		}
		if n := obs.get(func(r *recObserver) int { return r.refused[RefusedVersion] }); n != 2+i {
			t.Errorf("%d version refusals reported, want %d", n, 2+i)
		}
	}

	// Servers of other versions.
	for _, srv := range []struct {
		name   string
		answer []byte
		want   string
	}{
		{"version 1", appendV1Error(nil, "short request"), "protocol version 1"},
		{"version 2", appendHello(nil, 2), fmt.Sprintf("protocol version 2, this gmproxy version %d: run the same release on both", Version)},
		{"later version", appendHello(nil, Version+1), fmt.Sprintf("protocol version %d, this gmproxy version %d: run the same release on both", Version+1, Version)},
	} {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", pki.server)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			readHello(bufio.NewReader(c))
			c.Write(srv.answer)
			io.Copy(io.Discard, c)
		}()
		_, err = remote(t, newClient(t, cliTLS, ln.Addr().String()), keys[0]).SignContext(context.Background(), nil, testMsg, testOpts)
		ln.Close()
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), srv.want) {
			t.Errorf("%s server: err = %v", srv.name, err)
		}
	}
}

// closeRecConn records that its connection was closed.
type closeRecConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *closeRecConn) Close() error { c.closed.Store(true); return c.Conn.Close() }

// TestCloseDuringDial: a connection whose dial was under way when the
// Client closed is closed too, not kept (with its reader goroutine) until
// the key server's idle timeout, and the operation that dialed it fails
// with ErrClosed.
func TestCloseDuringDial(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	e := tlsEndpoint(cliTLS, ks.addr)
	dial := e.Dial
	dialing, release := make(chan struct{}), make(chan struct{})
	var conn atomic.Pointer[closeRecConn]
	e.Dial = func(ctx context.Context) (net.Conn, error) {
		close(dialing)
		<-release
		c, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		rc := &closeRecConn{Conn: c}
		conn.Store(rc)
		return rc, nil
	}
	kc := &Client{Endpoints: []Endpoint{e}, Timeout: 10 * time.Second, HealthInterval: time.Hour}
	rk := remote(t, kc, keys[0])
	errc := make(chan error, 1)
	go func() {
		_, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
		errc <- err
	}()
	<-dialing
	kc.Close()
	close(release)
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("operation whose dial outlived Close: err = %v, want ErrClosed", err)
	}
	eventually(t, "connection dialed across Close closed", func() bool {
		c := conn.Load()
		return c != nil && c.closed.Load()
	})
}

// TestExpiredCallerSparesSharedConnection: an operation whose context
// ended before its request went out fails alone; it does not fail the
// shared connection (a flush under a deadline already past), and with it
// the operations of other handshakes waiting on it.
func TestExpiredCallerSparesSharedConnection(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	release := make(chan struct{})
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) {
		s.Observer = obs
		s.runHook = func(Op, []byte) { <-release }
	})
	kc := newClient(t, cliTLS, ks.addr)
	kc.Conns = 1
	rk := remote(t, kc, keys[0])
	errc := make(chan error, 1)
	go func() {
		_, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
		errc <- err
	}()
	eventually(t, "operation in flight", func() bool { return obs.get(func(r *recObserver) int { return r.inFlight["edge"] }) == 1 })
	kc.eps[0].mu.Lock()
	mc := kc.eps[0].conns[0]
	kc.eps[0].mu.Unlock()
	// As when the deadline passes between call's check and the write.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := mc.do(ctx, OpPing, nil, nil); err == nil {
		t.Error("operation with an expired context succeeded")
	}
	close(release)
	if err := <-errc; err != nil {
		t.Errorf("operation on the shared connection: %v", err)
	}
	if mc.isDead() {
		t.Error("the shared connection was closed")
	}
}
