package keyserver

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"math/big"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestHandshakesWithRemoteKeys: TLCP (ECC and ECDHE) and TLS 1.3-SM
// handshakes whose server keys live in a key server reached over mutual
// TLS, through the offload engine.
func TestHandshakesWithRemoteKeys(t *testing.T) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := devKeys(p)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	kc := newClient(t, cliTLS, ks.addr)
	rs, re := remote(t, kc, keys[0]), remote(t, kc, keys[1])
	off := keyoffload.New(keyoffload.Config{Workers: 2}, nil)
	defer off.Close()

	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	srvTLCP := &tlcp.Config{Certificates: []tlcp.Certificate{{
		SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: off.Wrap(rs, frontdoor.FamilyTLCP),
		EncCertificate: p.ServerEnc.Cert.Raw, EncKey: off.Wrap(re, frontdoor.FamilyTLCP),
	}}}
	clientCert := tlcp.Certificate{SignCertificate: [][]byte{p.ClientSign.Cert.Raw}, SignKey: p.ClientSign.Key, EncCertificate: p.ClientEnc.Cert.Raw, EncKey: p.ClientEnc.Key}
	for _, suite := range []uint16{tlcp.ECC_SM4_GCM_SM3, tlcp.ECDHE_SM4_GCM_SM3} {
		cli := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{suite}, Certificates: []tlcp.Certificate{clientCert}}
		if cerr, serr := tlcpHandshake(srvTLCP, cli); cerr != nil || serr != nil {
			t.Errorf("%s: client: %v, server: %v", tlcp.CipherSuiteName(suite), cerr, serr)
		}
	}

	c, s := net.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- tls13sm.Server(s, &tls13sm.Config{Certificates: []tls13sm.Certificate{{Certificate: [][]byte{p.ServerSign.Cert.Raw}, PrivateKey: off.Wrap(rs, frontdoor.FamilyTLS13SM)}}}).Handshake()
	}()
	if err := tls13sm.Client(c, &tls13sm.Config{RootCAs: roots, ServerName: "localhost"}).Handshake(); err != nil {
		t.Errorf("tls13sm client: %v", err)
	}
	if err := <-errc; err != nil {
		t.Errorf("tls13sm server: %v", err)
	}
	c.Close()
	s.Close()
}

// TestOperations: every operation gives the same result as the local key;
// unknown keys, clients without a certificate, digests, gmsm's unreadable
// signer option and cancelled contexts fail.
func TestOperations(t *testing.T) {
	keys := testKeys(t)
	sk, ek := keys[0].Private, keys[1].Private
	other, _ := sm2.GenerateKey(rand.Reader)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	kc := newClient(t, cliTLS, ks.addr)
	rs, re := remote(t, kc, keys[0]), remote(t, kc, keys[1])
	ctx := context.Background()

	// Each kind of handshake message is signed with its protocol's ID:
	// the signature verifies under the standard SM2 verification of the
	// message.
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		msg  []byte
		uid  []byte
	}{
		{"TLS 1.3 CertificateVerify", testMsg, []byte("TLSv1.3+GM+Cipher+Suite")},
		{"TLCP ECDHE", ecdheMsg(t), nil},
		{"TLCP ECC", eccMsg(p.ServerEnc.Cert.Raw), nil},
	} {
		sig, err := smkey.Sign(ctx, rs, rand.Reader, c.msg, smkey.NewSM2SignerOpts(c.uid))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !sm2.VerifyASN1WithSM2(&sk.PublicKey, c.uid, c.msg, sig) {
			t.Errorf("%s: remote signature does not verify", c.name)
		}
	}
	// A digest is not sent: the key server signs messages.
	e, _ := sm2.CalculateSM2Hash(&sk.PublicKey, testMsg, testOpts.UID())
	if _, err := rs.SignContext(ctx, rand.Reader, e, crypto.Hash(0)); !errors.Is(err, errDigestSign) {
		t.Errorf("digest: err = %v", err)
	}
	if _, err := rs.SignContext(ctx, rand.Reader, testMsg, sm2.DefaultSM2SignerOpts); !errors.Is(err, errGMSMOption) {
		t.Errorf("gmsm option: err = %v", err)
	}
	// A stack asking for another ID than the one the key server signs
	// this kind of message with gets an error naming the key server.
	if _, err := rs.SignContext(ctx, rand.Reader, testMsg, smkey.DefaultSM2SignerOpts); !errors.Is(err, errBadSignature) {
		t.Errorf("TLS 1.3 CertificateVerify with the default ID: err = %v", err)
	}
	pm := preMaster(t)
	ct, _ := sm2.EncryptASN1(rand.Reader, &ek.PublicKey, pm)
	if pt, err := smkey.Decrypt(ctx, re, rand.Reader, ct, nil); err != nil || string(pt) != string(pm) {
		t.Errorf("decrypt: %q %v", pt, err)
	}
	if _, err := re.DecryptContext(ctx, rand.Reader, ct[:len(ct)-1], nil); !errors.Is(err, &Error{Code: CodeFailed}) {
		t.Errorf("bad ciphertext: err = %v", err)
	}
	peer, _ := sm2.GenerateKey(rand.Reader)
	ps, _ := peer.ECDH()
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	pe, _ := ecdh.P256().GenerateKey(rand.Reader)
	got, err := re.SM2KeyAgree(ctx, eph, ps.PublicKey(), pe.PublicKey(), false, 48, nil, nil)
	want, _ := smkey.LocalKeyAgreement{Key: ek}.SM2KeyAgree(ctx, eph, ps.PublicKey(), pe.PublicKey(), false, 48, nil, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("key agreement differs: %v", err)
	}

	// A key the server does not hold.
	ro, _ := NewRemoteKey(kc, &other.PublicKey)
	if _, err := ro.SignContext(ctx, rand.Reader, testMsg, testOpts); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: err = %v", err)
	}
	// A client without a certificate is refused by mutual TLS.
	noCert := cliTLS.Clone()
	noCert.Certificates = nil
	rb := remote(t, newClient(t, noCert, ks.addr), keys[0])
	if _, err := rb.SignContext(ctx, rand.Reader, testMsg, testOpts); err == nil {
		t.Error("client without certificate was served")
	}
	// A cancelled context returns at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := rs.SignContext(cctx, rand.Reader, testMsg, testOpts); err == nil {
		t.Error("cancelled operation succeeded")
	}
}

// TestSetPolicy: SetPolicy replaces the served keys and the clients (a
// reload), also for open connections.
func TestSetPolicy(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	ks := startServer(t, pki, &Policy{Keys: keys[:1], Clients: []Grant{grantAll("edge", keys[:1])}}, nil)
	kc := newClient(t, cliTLS, ks.addr)
	r1, r2 := remote(t, kc, keys[0]), remote(t, kc, Key{Private: keys[1].Private})
	sign := func(r *RemoteKey) error {
		_, err := r.SignContext(context.Background(), rand.Reader, testMsg, testOpts)
		return err
	}
	if sign(r1) != nil || !errors.Is(sign(r2), ErrUnknownKey) {
		t.Fatal("before SetPolicy: want key 1 served, key 2 unknown")
	}
	k2 := Key{Name: "sign2", Private: keys[1].Private, Roles: RoleSign}
	if err := ks.s.SetPolicy(&Policy{Keys: []Key{k2}, Clients: []Grant{grantAll("edge", []Key{k2})}}); err != nil {
		t.Fatal(err)
	}
	if err := sign(r1); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("key 1 after SetPolicy: %v", err)
	}
	if err := sign(r2); err != nil || ks.s.Len() != 1 {
		t.Errorf("key 2 after SetPolicy: %v (%d keys)", err, ks.s.Len())
	}
	// The client is removed: its open connection stops being served.
	if err := ks.s.SetPolicy(&Policy{Keys: []Key{k2}, Clients: []Grant{grantAll("other", []Key{k2})}}); err != nil {
		t.Fatal(err)
	}
	if err := sign(r2); !errors.Is(err, ErrForbidden) {
		t.Errorf("removed client: err = %v, want forbidden", err)
	}
	// Bad policies are refused and keep the running one: among them a key
	// whose d is n-1, which cannot sign (1+d has no inverse mod n).
	outOfRange := Key{Name: "n-1", Private: &sm2.PrivateKey{}, Roles: RoleSign}
	outOfRange.Private.Curve = sm2.P256()
	outOfRange.Private.D = new(big.Int).Sub(sm2.P256().Params().N, big.NewInt(1))
	outOfRange.Private.PublicKey.X, outOfRange.Private.PublicKey.Y = sm2.P256().ScalarBaseMult(outOfRange.Private.D.Bytes())
	for _, bad := range []*Policy{
		{Keys: []Key{k2, k2}},
		{Keys: []Key{k2}, Clients: []Grant{{Name: "x", Subject: "CN=x", Keys: []string{"nope"}}}},
		{Keys: []Key{k2}, Clients: []Grant{{Name: "x", Keys: []string{"sign2"}}}},
		{Keys: []Key{{Name: "empty"}}},
		{Keys: []Key{outOfRange}},
	} {
		if err := ks.s.SetPolicy(bad); err == nil {
			t.Errorf("policy %+v accepted", bad)
		}
	}
}

// TestShutdown: Shutdown closes idle connections, refuses new ones and
// lets Serve return.
func TestShutdown(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	buf := &testpeer.SyncBuffer{}
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Logger = bufLogger(buf) })
	rk := remote(t, newClient(t, cliTLS, ks.addr), keys[0])
	if _, err := rk.SignContext(context.Background(), rand.Reader, testMsg, testOpts); err != nil {
		t.Fatal(err)
	}
	if err := ks.s.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown with an idle connection: %v", err)
	}
	if _, err := rk.SignContext(context.Background(), rand.Reader, testMsg, testOpts); err == nil {
		t.Error("operation succeeded after shutdown")
	}
	// The audit counts are logged at shutdown.
	if log := buf.String(); !bytes.Contains([]byte(log), []byte(`msg="key server audit" client=edge key=sign`)) || !bytes.Contains([]byte(log), []byte("sign.ok=1")) {
		t.Errorf("no audit line at shutdown:\n%s", log)
	}
}

// emfileListener fails its first Accepts as a process out of file
// descriptors does, then accepts from the listener it wraps.
type emfileListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeSurvivesAcceptExhaustion: running out of file descriptors
// (a flood of connections) makes Accept fail for a while; the key server
// backs off and keeps serving, as net/http does, instead of Serve
// returning and the key server exiting.
func TestServeSurvivesAcceptExhaustion(t *testing.T) {
	keys := testKeys(t)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	s := &Server{}
	if err := s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &emfileListener{Listener: tls.NewListener(raw, pki.server)}
	ln.fails.Store(3)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	defer func() {
		s.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	// Bounded by testwait, not the Client's 10 s Timeout: after a Serve
	// that returned, the connection waits in the listen backlog for a
	// handshake that never comes.
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound(10*time.Second))
	defer cancel()
	if _, err := remote(t, newClient(t, cliTLS, raw.Addr().String()), keys[0]).SignContext(ctx, rand.Reader, testMsg, testOpts); err != nil {
		t.Errorf("operation after Accept ran out of file descriptors: %v", err)
	}
}
