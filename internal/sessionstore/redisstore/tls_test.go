package redisstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
)

// selfSigned writes a certificate for 127.0.0.1 and ::1 and its key into dir and
// returns their files and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "redis.pem"), filepath.Join(dir, "redis.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// TestStoreOverTLS: with Options.TLS the store speaks TLS (its own
// dialer makes the connections, guard.go), verifies the server's
// certificate against the configured roots and for the address's host,
// and refuses a server it cannot verify.
func TestStoreOverTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	_, addr := redistest.StartTLS(t, certFile, keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	s := New(Options{Addresses: []string{addr}, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Timeout: 2 * time.Second})
	defer s.Close()
	if err := s.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatalf("Set over TLS: %v", err)
	}
	if v, ok, err := s.Get(ctx, "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get over TLS = %q %v %v", v, ok, err)
	}

	untrusted := New(Options{Addresses: []string{addr}, TLS: &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}, Timeout: 2 * time.Second})
	defer untrusted.Close()
	if _, _, err := untrusted.Get(ctx, "k"); err == nil {
		t.Fatal("a server whose certificate does not verify was used")
	}
	plain := New(Options{Addresses: []string{addr}, Timeout: 2 * time.Second})
	defer plain.Close()
	if _, _, err := plain.Get(ctx, "k"); err == nil {
		t.Fatal("the TLS port answered in plain text: TLS was not spoken")
	}
}

// TestDialerServerNameWithoutZone: sessions.store.tls without server_name
// verifies the store's certificate for the address's host; an IPv6
// address with a zone ([::1%lo]:6379) is verified without the zone,
// which names the local interface and is in no certificate.
func TestDialerServerNameWithoutZone(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "[::1]:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Skip("no IPv6 loopback:", err)
	}
	defer l.Close()
	go func() {
		for c, err := l.Accept(); err == nil; c, err = l.Accept() {
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	if c, err := net.Dial("tcp", net.JoinHostPort("::1%lo", port)); err != nil {
		t.Skip("no dial to a zoned loopback address:", err)
	} else {
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialer(5*time.Second, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})(ctx, "tcp", net.JoinHostPort("::1%lo", port))
	if err != nil {
		t.Fatalf("TLS dial of [::1%%lo]: %v", err)
	}
	c.Close()
}
