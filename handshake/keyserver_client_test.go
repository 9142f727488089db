package handshake

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
)

// locRec records KeyOpAt events.
type locRec struct {
	mu  sync.Mutex
	ops []string
}

func (r *locRec) KeyOp(op, family string, _, _ time.Duration, err error) {
	r.KeyOpAt(op, family, "?", 0, 0, err)
}

func (r *locRec) KeyOpAt(op, family, loc string, _, _ time.Duration, err error) {
	res := "ok"
	if err != nil {
		res = "error"
	}
	r.mu.Lock()
	r.ops = append(r.ops, op+"/"+family+"/"+loc+"/"+res)
	r.mu.Unlock()
}

func (r *locRec) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...)
}

func tlsDial(cfg *tls.Config, addr string) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		return (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	}
}

// TestKeyClientTimeoutAndRetry: an operation on a key server that never
// answers ends with ErrKeyServerTimeout after KeyClient.Timeout; an
// operation on a pooled connection the key server has closed is retried
// on a new connection.
func TestKeyClientTimeoutAndRetry(t *testing.T) {
	k, _ := sm2.GenerateKey(rand.Reader)
	srvTLS, cliTLS := mtlsPair(t)

	// Silent: completes mutual TLS, then reads and never answers.
	hole, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
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
	silent := &KeyClient{Dial: tlsDial(cliTLS, hole.Addr().String()), Timeout: 200 * time.Millisecond}
	defer silent.Close()
	rk, _ := NewRemoteKey(silent, &k.PublicKey)
	if _, err := rk.SignContext(context.Background(), rand.Reader, make([]byte, 32), nil); !errors.Is(err, ErrKeyServerTimeout) {
		t.Errorf("silent key server: err = %v, want ErrKeyServerTimeout", err)
	}
	// The caller's own deadline is reported as such.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = rk.SignContext(ctx, rand.Reader, make([]byte, 32), nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrKeyServerTimeout) {
		t.Errorf("caller deadline: err = %v", err)
	}

	// Stale pooled connection: the server side closes it between operations.
	ks := &KeyServer{}
	ks.AddKey(k)
	inner, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	ln := &recordingListener{Listener: inner}
	go ks.Serve(ln)
	defer ks.Shutdown(context.Background())
	var dials atomic.Int32
	kc := &KeyClient{Dial: func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return tlsDial(cliTLS, ln.Addr().String())(ctx)
	}, Timeout: 5 * time.Second}
	defer kc.Close()
	rk, _ = NewRemoteKey(kc, &k.PublicKey)
	for i := 0; i < 3; i++ {
		if _, err := rk.SignContext(context.Background(), rand.Reader, make([]byte, 32), nil); err != nil {
			t.Fatalf("operation %d after the server closed the pooled connection: %v", i, err)
		}
		ln.closeAll()
	}
	if n := dials.Load(); n != 3 {
		t.Errorf("%d dials; the closed pooled connections were not replaced", n)
	}
}

// TestKeyServerShutdown: Shutdown closes idle connections, refuses new
// ones, and lets the key server's Serve return.
func TestKeyServerShutdown(t *testing.T) {
	k, _ := sm2.GenerateKey(rand.Reader)
	addr, cliTLS, ks := startKeyServerKS(t, k)
	kc := &KeyClient{Dial: tlsDial(cliTLS, addr), Timeout: 5 * time.Second}
	defer kc.Close()
	rk, _ := NewRemoteKey(kc, &k.PublicKey)
	if _, err := rk.SignContext(context.Background(), rand.Reader, make([]byte, 32), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ks.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an idle connection: %v", err)
	}
	if _, err := rk.SignContext(context.Background(), rand.Reader, make([]byte, 32), nil); err == nil {
		t.Error("operation succeeded after shutdown")
	}
}

func startKeyServerKS(t *testing.T, keys ...*sm2.PrivateKey) (string, *tls.Config, *KeyServer) {
	srvTLS, cliTLS := mtlsPair(t)
	ks := &KeyServer{}
	for _, k := range keys {
		if _, err := ks.AddKey(k); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- ks.Serve(ln) }()
	t.Cleanup(func() {
		ks.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), cliTLS, ks
}

// blockingRemote is a remote key whose operations wait for release.
type blockingRemote struct {
	crypto.Signer
	started chan struct{}
	release chan struct{}
}

func (b *blockingRemote) KeyLocation() string { return KeyRemote }

func (b *blockingRemote) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	b.started <- struct{}{}
	<-b.release
	return b.Signer.Sign(r, d, o)
}

// TestOffloadRemoteKeys: operations on remote keys do not occupy the
// workers (a stalled key server leaves local keys working), are bounded by
// RemoteInFlight (fail fast when full) and are reported with their
// location.
func TestOffloadRemoteKeys(t *testing.T) {
	rec := &locRec{}
	o := NewOffload(OffloadConfig{Workers: 1, Queue: 4, RemoteInFlight: 2}, rec)
	defer o.Close()
	lk, _ := sm2.GenerateKey(rand.Reader)
	rkey, _ := sm2.GenerateKey(rand.Reader)
	br := &blockingRemote{Signer: rkey, started: make(chan struct{}, 4), release: make(chan struct{})}
	remote, local := o.Wrap(br, FamilyTLCP), o.Wrap(lk, FamilyTLS13SM)
	if remote.KeyLocation() != KeyRemote || local.KeyLocation() != KeyLocal {
		t.Fatalf("locations %q %q", remote.KeyLocation(), local.KeyLocation())
	}
	ctx := context.Background()
	errc := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := remote.SignContext(ctx, rand.Reader, make([]byte, 32), nil)
			errc <- err
		}()
		<-br.started
	}
	// Both remote slots are taken: the next remote operation fails fast...
	if _, err := remote.SignContext(ctx, rand.Reader, make([]byte, 32), nil); !errors.Is(err, ErrOffloadBusy) {
		t.Errorf("third remote operation: err = %v, want ErrOffloadBusy", err)
	}
	// ...and the single worker still serves local keys.
	if _, err := local.SignContext(ctx, rand.Reader, make([]byte, 32), nil); err != nil {
		t.Errorf("local operation while remote ones are stalled: %v", err)
	}
	close(br.release)
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	counts := map[string]int{}
	for _, op := range rec.list() {
		counts[op]++
	}
	want := map[string]int{"sign/tlcp/remote/ok": 2, "sign/tlcp/remote/error": 1, "sign/tls13sm/local/ok": 1}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: %d events, want %d (all: %v)", k, counts[k], n, counts)
		}
	}
}

// recordingListener remembers accepted connections so that a test can
// close them from the server side.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *recordingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// TestKeyServerSetKeys: SetKeys replaces the served keys (a reload).
func TestKeyServerSetKeys(t *testing.T) {
	k1, _ := sm2.GenerateKey(rand.Reader)
	k2, _ := sm2.GenerateKey(rand.Reader)
	addr, cliTLS, ks := startKeyServerKS(t, k1)
	kc := &KeyClient{Dial: tlsDial(cliTLS, addr), Timeout: 5 * time.Second}
	defer kc.Close()
	r1, _ := NewRemoteKey(kc, &k1.PublicKey)
	r2, _ := NewRemoteKey(kc, &k2.PublicKey)
	sign := func(r *RemoteKey) error {
		_, err := r.SignContext(context.Background(), rand.Reader, make([]byte, 32), nil)
		return err
	}
	if sign(r1) != nil || sign(r2) == nil {
		t.Fatal("before SetKeys: want k1 served, k2 unknown")
	}
	if err := ks.SetKeys([]*sm2.PrivateKey{k2}); err != nil {
		t.Fatal(err)
	}
	if err := sign(r1); err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Errorf("k1 after SetKeys: %v", err)
	}
	if err := sign(r2); err != nil || ks.Len() != 1 {
		t.Errorf("k2 after SetKeys: %v (%d keys)", err, ks.Len())
	}
}
