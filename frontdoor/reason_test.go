package frontdoor

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// decryptingECDSA is an ECDSA key that claims to decrypt, as the offload
// wrapper once made every key look.
type decryptingECDSA struct{ *ecdsa.PrivateKey }

func (decryptingECDSA) Decrypt(io.Reader, []byte, crypto.DecrypterOpts) ([]byte, error) {
	return nil, errors.New("cannot decrypt")
}

// TestClassifyTLSKeyFailure: a crypto/tls server whose certificate key it
// cannot use fails the handshake with internal_error, and the reason
// counted is internal_error, not protocol_error.
func TestClassifyTLSKeyFailure(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: decryptingECDSA{key}}}}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	a.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	b.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	errc := make(chan error, 1)
	go func() {
		c := tls.Client(b, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})
		errc <- c.Handshake()
		b.Close()
	}()
	serr := tls.Server(a, srvCfg).Handshake()
	if serr == nil {
		t.Fatal("handshake succeeded")
	}
	if got := Classify(serr); got != ReasonInternal {
		t.Errorf("Classify(%q) = %s, want %s", serr, got, ReasonInternal)
	}
	if cerr := <-errc; cerr == nil {
		t.Error("client handshake succeeded")
	}
	for _, msg := range []string{"tls: failed to sign ECDHE parameters: busy", "tls: unsupported signing key type (*sm2.PublicKey)"} {
		if got := Classify(errors.New(msg)); got != ReasonInternal {
			t.Errorf("Classify(%q) = %s, want %s", msg, got, ReasonInternal)
		}
	}
}
