package keyserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/tlcp"
)

// hostileServer accepts on loopback, greets (unless silent) and hands
// every request frame to answer, which writes what it wants.
func hostileServer(t *testing.T, greet bool, answer func(w net.Conn, id uint32, typ byte, body []byte)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				br := bufio.NewReader(c)
				if _, _, err := readHello(br); err != nil {
					return
				}
				if !greet {
					return // holds the connection, never answers
				}
				c.Write(appendHello(nil, Version))
				fr := &frameReader{br: br}
				for {
					id, typ, body, err := fr.next()
					if err != nil {
						return
					}
					answer(c, id, typ, body)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func rawFrame(id uint32, typ byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(5+len(body)))
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, typ)
	return append(b, body...)
}

// TestStalledEndpointFailsOver: of two addresses, one greets and answers
// pings but never an operation (stuck, overloaded, hostile). An attempt
// there gets half the operation's time and then fails over to the healthy
// one, and the stalled address is marked down, so that the operations
// after it go to the healthy one (before, every other operation went to
// the stalled address and failed after the whole timeout).
func TestStalledEndpointFailsOver(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	good := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	var stalledOps atomic.Int32
	stalled := hostileServer(t, true, func(w net.Conn, id uint32, typ byte, _ []byte) {
		if typ == byte(OpPing) {
			w.Write(rawFrame(id, 0, nil))
			return
		}
		stalledOps.Add(1)
	})
	c := &Client{Timeout: 300 * time.Millisecond, HealthInterval: 100 * time.Millisecond,
		BackoffMin: time.Minute, BackoffMax: time.Minute, // down for the whole test once marked
		Endpoints: []Endpoint{
			{Address: stalled, Dial: func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", stalled) }},
			tlsEndpoint(cliTLS, good.addr),
		}}
	t.Cleanup(c.Close)
	rk := remote(t, c, keys[0])
	const n = 10
	signAll(t, rk, n)
	if got := stalledOps.Load(); got > 1 {
		t.Errorf("the stalled address got %d of %d operations: it was not marked down after it left one unanswered", got, n)
	}
}

// TestRemoteDecryptUnavailableIsInternalError: a TLCP ECC handshake whose
// encryption key is on a key server that is down fails with
// internal_error (the README's promise), not as a bad Finished after a
// random pre-master; a key server's verdict that the ciphertext does not
// decrypt (CodeFailed) still goes on with the random pre-master, so that
// a bad ciphertext and a good one look alike until Finished.
func TestRemoteDecryptUnavailableIsInternalError(t *testing.T) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := devKeys(p)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close() // a key server that is down: nothing listens
	refusing := hostileServer(t, true, func(w net.Conn, id uint32, typ byte, _ []byte) {
		w.Write(rawFrame(id, byte(CodeFailed), []byte("decryption error")))
	})
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	for _, tc := range []struct {
		name, addr string
		internal   bool
	}{
		{"key server down", dead, true},
		{"ciphertext refused (CodeFailed)", refusing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := &Client{Timeout: 500 * time.Millisecond, Endpoints: []Endpoint{{Address: tc.addr, Dial: func(ctx context.Context) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", tc.addr)
			}}}}
			t.Cleanup(kc.Close)
			off := keyoffload.New(keyoffload.Config{Workers: 2}, nil)
			defer off.Close()
			srv := &tlcp.Config{Certificates: []tlcp.Certificate{{
				SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: off.Wrap(keys[0].Private, frontdoor.FamilyTLCP),
				EncCertificate: p.ServerEnc.Cert.Raw, EncKey: off.Wrap(remote(t, kc, keys[1]), frontdoor.FamilyTLCP),
			}}}
			cli := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}
			cerr, serr := tlcpHandshake(srv, cli)
			if serr == nil {
				t.Fatal("handshake succeeded without a decryption")
			}
			var ae *tlcp.AlertError
			internal := errors.As(serr, &ae) && !ae.Remote && ae.Alert == tlcp.AlertInternalError
			if internal != tc.internal {
				t.Errorf("server error %v (client saw %v): internal_error %v, want %v", serr, cerr, internal, tc.internal)
			}
		})
	}
}

// TestEndpointMarkedDownComesBackUp: an endpoint that left one operation
// unanswered for its attempt's time (marked down, "operations go to the
// others first") while its connection stayed alive (the health pings were
// answered meanwhile, so the connection is not closed) comes back up once
// the health check pings it after the back-off and it answers; before,
// only a new connection brought it back, and it stayed down for as long as
// that connection lived, every operation going to the other endpoint.
func TestEndpointMarkedDownComesBackUp(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	pol := &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}
	var stall atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	obsA := newRecObserver()
	a := startServer(t, pki, pol, func(s *Server) {
		s.Observer = obsA
		s.runHook = func(op Op, _ []byte) {
			if op == OpSign && stall.Load() {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-release
			}
		}
	})
	b := startServer(t, pki, pol, nil)
	kc := newClient(t, cliTLS, a.addr, b.addr)
	kc.Conns = 1
	kc.Timeout = 600 * time.Millisecond
	kc.HealthInterval = 50 * time.Millisecond
	kc.BackoffMin, kc.BackoffMax = 20*time.Millisecond, 100*time.Millisecond
	rk := remote(t, kc, keys[0])
	ctx := context.Background()
	sign := func() error { _, err := rk.SignContext(ctx, nil, testMsg, testOpts); return err }

	// Both endpoints connected and up.
	for range 4 {
		if err := sign(); err != nil {
			t.Fatal(err)
		}
	}
	// One operation stalls on A (an overloaded moment): it fails over to B
	// and A is marked down.
	stall.Store(true)
	hit := false
	for i := 0; i < 4 && !hit; i++ {
		if err := sign(); err != nil {
			t.Fatalf("operation with a healthy second endpoint: %v", err)
		}
		select {
		case <-entered:
			hit = true
		default:
		}
	}
	if !hit {
		t.Fatal("no operation reached A")
	}
	eventually(t, "A marked down", func() bool { return !kc.Healthy()[a.addr] })
	// A recovers at once.
	stall.Store(false)
	close(release)
	aOps := func() int {
		return obsA.get(func(r *recObserver) int { return r.ops["edge/sign/sign/ok"] })
	}
	// Its back-off is at most 100ms and the health check runs every
	// 50ms.
	eventually(t, "A marked up again", func() bool { return kc.Healthy()[a.addr] })
	before := aOps()
	for range 20 {
		if err := sign(); err != nil {
			t.Fatal(err)
		}
	}
	if got := aOps() - before; got == 0 {
		t.Errorf("of 20 operations after A recovered, none went to A: every operation goes to B while A's connection lives")
	}
}

// TestUnreachableEndpointFailsOver: of two addresses, one cannot be
// reached (a host that is off or cut off: connection attempts go
// unanswered, as with packets dropped, until the dial's context ends).
// An attempt there gets half the operation's time, fails over to the
// healthy one, and marks the address down, so that the operations after
// it go to the healthy one first. Before, a dial cut by the attempt's
// time marked nothing (the daemon's defaults, a 3 s timeout and a 2 s
// connect timeout, give an attempt 1.5 s), and every other operation
// waited for the unreachable address again; the health check, whose own
// timeout also cuts its dial, did not mark it either.
func TestUnreachableEndpointFailsOver(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	good := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	var dials atomic.Int32
	unreachable := Endpoint{Address: "192.0.2.1:7000", Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}}

	// Operations alone: no health check runs during the test.
	c := &Client{Timeout: 300 * time.Millisecond, HealthInterval: time.Hour,
		BackoffMin: time.Minute, BackoffMax: time.Minute, // down for the whole test once marked
		Endpoints: []Endpoint{unreachable, tlsEndpoint(cliTLS, good.addr)}}
	t.Cleanup(c.Close)
	rk := remote(t, c, keys[0])
	const n = 10
	signAll(t, rk, n)
	if got := dials.Load(); got > 1 {
		t.Errorf("the unreachable address was dialed by %d of %d operations: a dial cut by its attempt's time did not mark it down", got, n)
	}
	if c.Healthy()[unreachable.Address] {
		t.Error("the unreachable address is reported up")
	}

	// The health check alone: its dial, cut by the check's timeout,
	// marks the address down.
	hc := &Client{Timeout: 300 * time.Millisecond, HealthInterval: 20 * time.Millisecond,
		BackoffMin: time.Minute, BackoffMax: time.Minute,
		Endpoints: []Endpoint{unreachable, tlsEndpoint(cliTLS, good.addr)}}
	t.Cleanup(hc.Close)
	hc.Healthy() // starts the health check
	for deadline := time.Now().Add(5 * time.Second); hc.Healthy()[unreachable.Address]; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the health check did not mark the unreachable address down in 5 s")
		}
	}
}

// TestAnsweredErrorsFailOver: of two key servers, the first answers every
// operation with an error code. An answer about that server's state
// (unknown key, busy, internal failure, going away) sends the operation to
// the second, which holds the key and signs; an answer about the request
// or the client (the operation failed, malformed, forbidden, wrong role,
// rate limited) is final: the second server sees no operation.
func TestAnsweredErrorsFailOver(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	good := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Observer = obs })
	served := func() int {
		return obs.get(func(r *recObserver) int {
			n := 0
			for _, v := range r.ops {
				n += v
			}
			return n
		})
	}
	for _, tc := range []struct {
		code     Code
		failover bool
	}{
		{CodeUnknownKey, true}, {CodeBusy, true}, {CodeInternal, true}, {CodeUnavailable, true},
		{CodeFailed, false}, {CodeMalformed, false}, {CodeForbidden, false}, {CodeWrongRole, false}, {CodeRateLimited, false},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			answering := hostileServer(t, true, func(w net.Conn, id uint32, typ byte, _ []byte) {
				if typ == byte(OpPing) {
					w.Write(rawFrame(id, 0, nil))
					return
				}
				w.Write(rawFrame(id, byte(tc.code), []byte("answered")))
			})
			c := &Client{Timeout: 5 * time.Second, Endpoints: []Endpoint{
				{Address: answering, Dial: func(ctx context.Context) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "tcp", answering)
				}},
				tlsEndpoint(cliTLS, good.addr),
			}}
			t.Cleanup(c.Close)
			rk := remote(t, c, keys[0])
			before := served()
			// Two operations: the client takes the endpoints in turn, so
			// one of them starts at the answering server.
			var errs []error
			for range 2 {
				_, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
				errs = append(errs, err)
			}
			failed := slices.IndexFunc(errs, func(err error) bool { return err != nil }) >= 0
			if tc.failover && failed {
				t.Errorf("an answer %v did not fail over to the key server that holds the key: %v", tc.code, errs)
			}
			if !tc.failover {
				if !failed {
					t.Errorf("an answer %v was not final: every operation succeeded", tc.code)
				}
				if served()-before == 2 {
					t.Errorf("an answer %v failed over: the second key server served both operations", tc.code)
				}
			}
		})
	}
}

// signAll makes n signatures with rk, the second key server healthy:
// each must succeed.
func signAll(t *testing.T, rk *RemoteKey, n int) {
	t.Helper()
	failed := 0
	for range n {
		if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); err != nil {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d operations failed with a healthy second key server", failed, n)
	}
}
