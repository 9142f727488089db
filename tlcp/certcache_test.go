package tlcp

import (
	"bytes"
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// TestParsedCertsBounded: the cache of parsed peer certificates, which
// any peer can fill with unverified certificates, keeps only those up to
// maxCachedCert bytes, each parsed from its own copy (not pointing into
// the handshake flight it came in).
func TestParsedCertsBounded(t *testing.T) {
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(serial int64, extra int) []byte {
		tmpl := &smx509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "cache test"}}
		if extra > 0 {
			tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 2}, Value: make([]byte, extra)}}
		}
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	small, big := mk(1001, 0), mk(1002, 2*maxCachedCert)
	flight := append(append([]byte{}, small...), big...) // as in one handshake message
	in := [][]byte{flight[:len(small)], flight[len(small):]}
	certs, err := parseCertificates(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parsedCerts.Get(string(big)); ok {
		t.Errorf("a certificate of %d bytes (over %d) was cached", len(big), maxCachedCert)
	}
	cached, ok := parsedCerts.Get(string(small))
	if !ok || cached != certs[0] {
		t.Fatal("a small certificate was not cached")
	}
	clear(flight) // the flight's buffer, reused
	if !bytes.Equal(cached.Raw, small) {
		t.Error("the cached certificate points into the handshake flight it was parsed from")
	}
}
