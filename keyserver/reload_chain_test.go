package keyserver

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// dialAndPing dials addr with cfg, greets, pings; it returns whether the
// TLS session was resumed and whether the ping was answered OK.
func dialAndPing(t *testing.T, addr string, cfg *tls.Config) (resumed, ok bool) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return false, false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
	if _, err := c.Write(appendHello(nil, Version)); err != nil {
		return c.ConnectionState().DidResume, false
	}
	br := bufio.NewReader(c)
	if _, _, err := readHello(br); err != nil {
		return c.ConnectionState().DidResume, false
	}
	fr := &frameReader{br: br}
	if err := newFrameWriter(c, time.Second).write(1, byte(OpPing), nil, nil); err != nil {
		return c.ConnectionState().DidResume, false
	}
	id, code, _, err := fr.next()
	return c.ConnectionState().DidResume, err == nil && id == 1 && code == byte(CodeOK)
}

// chainPKI: root -> intermediate (short-lived) -> client leaf.
func chainedClient(t *testing.T, root *testPKI, interLife time.Duration) *tls.Config {
	ik, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	it := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "intermediate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(interLife), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	ider, err := x509.CreateCertificate(rand.Reader, it, root.ca, &ik.PublicKey, root.caKey)
	if err != nil {
		t.Fatal(err)
	}
	inter, _ := x509.ParseCertificate(ider)
	lk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	lt := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano() + 1), Subject: pkix.Name{CommonName: "edge", Organization: []string{"test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	lder, err := x509.CreateCertificate(rand.Reader, lt, inter, &lk.PublicKey, ik)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{lder, ider}, PrivateKey: lk}}, RootCAs: root.pool, ServerName: "keyserver", MinVersion: tls.VersionTLS13}
}

// TestExpiredIntermediateEndsAccess: a connection does not outlive its
// client's chain: once the intermediate CA certificate has expired, a new
// connection is refused and the open one is cut at its next request.
func TestExpiredIntermediateEndsAccess(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cli := chainedClient(t, pki, 2*time.Second)
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}, ClientCAs: pki.pool}, nil)
	kc := newClient(t, cli, ks.addr)
	kc.Conns = 1
	rk := remote(t, kc, keys[0])
	sign := func() error {
		_, err := rk.SignContext(context.Background(), nil, testMsg, testOpts)
		return err
	}
	if err := sign(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	// A new connection with the same chain is refused now.
	c2 := newClient(t, cli, ks.addr)
	if _, err := remote(t, c2, keys[0]).SignContext(context.Background(), nil, testMsg, testOpts); err == nil {
		t.Fatal("new connection with an expired intermediate served (test premise)")
	}
	if err := sign(); err == nil {
		t.Error("open connection whose client chain (intermediate CA) has expired is still served")
	}
}

// TestHandshakeAcrossReloadVerifiedUnderNewCAs: a reload (SIGHUP) that
// distrusts a client CA lands while a TLS handshake is in progress: the
// handshake took the old tls.Config (old client CAs), its greeting finds
// the new policy. The chain is verified against the new policy's CAs at
// the greeting, so the connection is refused, as a new one is.
func TestHandshakeAcrossReloadVerifiedUnderNewCAs(t *testing.T) {
	keys := testKeys(t)
	oldPKI, newPKI := newTestPKI(t), newTestPKI(t)
	cliTLS, _ := oldPKI.client(t, "edge")
	pol := func(cas *x509.CertPool) *Policy {
		return &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}, ClientCAs: cas}
	}
	var cfg atomic.Pointer[tls.Config]
	cfg.Store(oldPKI.server)
	var s *Server
	var reloadOnce atomic.Bool
	reload := func() {
		// What reloadKeys does on SIGHUP.
		if err := s.SetPolicy(pol(newPKI.pool)); err != nil {
			t.Error(err)
		}
		nc := oldPKI.server.Clone()
		nc.ClientCAs = newPKI.pool
		cfg.Store(nc)
	}
	s = &Server{}
	if err := s.SetPolicy(pol(oldPKI.pool)); err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS13, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := cfg.Load()
		if reloadOnce.CompareAndSwap(false, true) {
			// The SIGHUP lands while this handshake is in progress.
			reload()
		}
		return c, nil
	}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
	addr := ln.Addr().String()
	kc := newClient(t, cliTLS, addr)
	kc.Conns = 1
	rk := remote(t, kc, keys[0])
	for i := range 3 {
		if _, err := rk.SignContext(context.Background(), nil, testMsg, testOpts); err == nil {
			t.Errorf("sign %d: a certificate of the client CA removed by the reload is served on a connection whose handshake straddled the reload", i)
		}
	}
	// A connection made after the reload is refused, as it should be.
	if ok := func() bool { _, ok := dialAndPing(t, addr, cliTLS); return ok }(); ok {
		t.Error("new connection after the reload served (test premise)")
	}
}
