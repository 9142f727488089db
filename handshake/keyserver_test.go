package handshake

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// mtlsPair returns a server and a client tls.Config that authenticate each
// other with a throwaway ECDSA CA.
func mtlsPair(t testing.TB) (*tls.Config, *tls.Config) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "key server CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	leaf := func(cn string, eku x509.ExtKeyUsage) tls.Certificate {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	srv := &tls.Config{Certificates: []tls.Certificate{leaf("keyserver", x509.ExtKeyUsageServerAuth)}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	cli := &tls.Config{Certificates: []tls.Certificate{leaf("gmproxy", x509.ExtKeyUsageClientAuth)}, RootCAs: pool, ServerName: "keyserver", MinVersion: tls.VersionTLS13}
	return srv, cli
}

func startKeyServer(t *testing.T, keys ...*sm2.PrivateKey) (string, *tls.Config) {
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
	go ks.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), cliTLS
}

// TestKeyServerHandshakes: TLCP (ECC and ECDHE) and TLS 1.3-SM handshakes
// whose server keys live in a key server reached over mutual TLS, through
// the offload engine.
func TestKeyServerHandshakes(t *testing.T) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	signKey, encKey := p.ServerSign.Key.(*sm2.PrivateKey), p.ServerEnc.Key.(*sm2.PrivateKey)
	addr, cliTLS := startKeyServer(t, signKey, encKey)
	kc := &KeyClient{Dial: func(ctx context.Context) (net.Conn, error) {
		return (&tls.Dialer{Config: cliTLS}).DialContext(ctx, "tcp", addr)
	}}
	defer kc.Close()
	rs, err := NewRemoteKey(kc, &signKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	re, _ := NewRemoteKey(kc, &encKey.PublicKey)
	off := NewOffload(OffloadConfig{Workers: 2}, nil)
	defer off.Close()

	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	srvTLCP := &tlcp.Config{Certificates: []tlcp.Certificate{{
		SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: off.Wrap(rs, FamilyTLCP),
		EncCertificate: p.ServerEnc.Cert.Raw, EncKey: off.Wrap(re, FamilyTLCP),
	}}}
	clientCert := tlcp.Certificate{SignCertificate: [][]byte{p.ClientSign.Cert.Raw}, SignKey: p.ClientSign.Key, EncCertificate: p.ClientEnc.Cert.Raw, EncKey: p.ClientEnc.Key}
	for _, suite := range []uint16{tlcp.ECC_SM4_GCM_SM3, tlcp.ECDHE_SM4_GCM_SM3} {
		c, s := net.Pipe()
		errc := make(chan error, 1)
		go func() { errc <- tlcp.Server(s, srvTLCP).Handshake() }()
		cc := tlcp.Client(c, &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{suite}, Certificates: []tlcp.Certificate{clientCert}})
		if err := cc.Handshake(); err != nil {
			t.Errorf("%s: client: %v", tlcp.CipherSuiteName(suite), err)
		}
		if err := <-errc; err != nil {
			t.Errorf("%s: server: %v", tlcp.CipherSuiteName(suite), err)
		}
		c.Close()
		s.Close()
	}

	c, s := net.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- tls13sm.Server(s, &tls13sm.Config{Certificates: []tls13sm.Certificate{{Certificate: [][]byte{p.ServerSign.Cert.Raw}, PrivateKey: off.Wrap(rs, FamilyTLS13SM)}}}).Handshake()
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

func TestKeyServerOperations(t *testing.T) {
	k, _ := sm2.GenerateKey(rand.Reader)
	other, _ := sm2.GenerateKey(rand.Reader)
	addr, cliTLS := startKeyServer(t, k)
	kc := &KeyClient{Dial: func(ctx context.Context) (net.Conn, error) {
		return (&tls.Dialer{Config: cliTLS}).DialContext(ctx, "tcp", addr)
	}}
	defer kc.Close()
	rk, _ := NewRemoteKey(kc, &k.PublicKey)
	ctx := context.Background()

	msg := []byte("message")
	for _, opts := range []*sm2.SM2SignerOption{sm2.DefaultSM2SignerOpts, sm2.NewSM2SignerOption(true, []byte("TLSv1.3+GM+Cipher+Suite"))} {
		sig, err := smkey.Sign(ctx, rk, rand.Reader, msg, opts)
		if err != nil {
			t.Fatal(err)
		}
		uid, _, _ := sm2OptionFields(opts)
		if !sm2.VerifyASN1WithSM2(&k.PublicKey, uid, msg, sig) {
			t.Error("remote signature does not verify")
		}
	}
	ct, _ := sm2.EncryptASN1(rand.Reader, &k.PublicKey, []byte("secret"))
	if pt, err := smkey.Decrypt(ctx, rk, rand.Reader, ct, nil); err != nil || string(pt) != "secret" {
		t.Errorf("decrypt: %q %v", pt, err)
	}
	peer, _ := sm2.GenerateKey(rand.Reader)
	ps, _ := peer.ECDH()
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	pe, _ := ecdh.P256().GenerateKey(rand.Reader)
	got, err := rk.SM2KeyAgree(ctx, eph, ps.PublicKey(), pe.PublicKey(), true, 48, nil, []byte("peer-id"))
	want, _ := smkey.LocalKeyAgreement{Key: k}.SM2KeyAgree(ctx, eph, ps.PublicKey(), pe.PublicKey(), true, 48, nil, []byte("peer-id"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("key agreement differs: %v", err)
	}

	// A key the server does not hold.
	ro, _ := NewRemoteKey(kc, &other.PublicKey)
	if _, err := ro.SignContext(ctx, rand.Reader, make([]byte, 32), nil); err == nil {
		t.Error("unknown key signed")
	}
	// A client without a certificate is refused by mutual TLS.
	noCert := cliTLS.Clone()
	noCert.Certificates = nil
	bad := &KeyClient{Dial: func(ctx context.Context) (net.Conn, error) {
		return (&tls.Dialer{Config: noCert}).DialContext(ctx, "tcp", addr)
	}}
	rb, _ := NewRemoteKey(bad, &k.PublicKey)
	if _, err := rb.SignContext(ctx, rand.Reader, make([]byte, 32), nil); err == nil {
		t.Error("client without certificate was served")
	}
	// A cancelled context returns at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := rk.SignContext(cctx, rand.Reader, make([]byte, 32), nil); err == nil {
		t.Error("cancelled operation succeeded")
	}
}

func FuzzKeyServerRequest(f *testing.F) {
	k, _ := sm2.GenerateKey(rand.Reader)
	ks := &KeyServer{}
	id, _ := ks.AddKey(k)
	f.Add(append(append([]byte{keyOpSign}, id[:]...), make([]byte, 32)...))
	ka := append([]byte{keyOpKeyAgreement}, id[:]...)
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	ka = append(ka, eph.Bytes()...)
	ka = append(ka, eph.PublicKey().Bytes()...)
	ka = append(ka, eph.PublicKey().Bytes()...)
	ka = append(ka, 0, 0, 48, 0, 0, 0, 1, 'x')
	f.Add(ka)
	f.Add([]byte{keyOpDecrypt})
	f.Fuzz(func(t *testing.T, req []byte) {
		ks.handle(req) // must not panic
	})
}
