// Package ocsptest builds, for tests, a CA, a leaf certificate whose
// Authority Information Access names an OCSP responder on loopback, and
// that responder, whose answers the test chooses.
package ocsptest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
)

// PKI is a CA with one server certificate and its OCSP responder.
type PKI struct {
	CA      *x509.Certificate
	CAKey   crypto.Signer
	Leaf    *x509.Certificate
	LeafKey crypto.Signer
	// Responder answers POSTed OCSP requests with what Serve set (500
	// before); Requests counts them, once each answer is chosen.
	Responder *httptest.Server
	Requests  atomic.Int64

	mu     sync.Mutex
	answer []byte
}

// New makes a PKI whose leaf (for localhost, valid an hour around now)
// names the responder.
func New(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{}
	p.Responder = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		der := p.answer
		p.mu.Unlock()
		p.Requests.Add(1) // after the answer is chosen
		if r.Method != http.MethodPost || der == nil {
			http.Error(w, "no answer", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		w.Write(der)
	}))
	t.Cleanup(p.Responder.Close)
	p.CA, p.CAKey = NewCA(t, "OCSP Test CA")
	now := time.Now()
	p.Leaf, p.LeafKey = Issue(t, p.CA, p.CAKey, &x509.Certificate{
		SerialNumber: big.NewInt(0x1234567), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		OCSPServer: []string{p.Responder.URL + "/ocsp"},
	})
	return p
}

// Serve makes the responder answer der (nil: 500).
func (p *PKI) Serve(der []byte) {
	p.mu.Lock()
	p.answer = der
	p.mu.Unlock()
}

// NewCA makes a self-signed ECDSA CA.
func NewCA(t testing.TB, name string) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	return Sign(t, tmpl, tmpl, key, key), key
}

// Issue makes a certificate from tmpl, with a new ECDSA key, signed by
// the CA.
func Issue(t testing.TB, ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Sign(t, tmpl, ca, key, caKey), key
}

// Sign makes the certificate tmpl of key's public half, signed by
// parent's key.
func Sign(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey crypto.Signer) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Delegate issues a responder certificate under the CA, for OCSP signing
// when ocspSigning is set, valid from notBefore to notAfter.
func (p *PKI) Delegate(t testing.TB, ocspSigning bool, notBefore, notAfter time.Time) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "OCSP Responder"},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if ocspSigning {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageOCSPSigning}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	return Issue(t, p.CA, p.CAKey, tmpl)
}

// Response is an OCSP response about the leaf with status good from
// thisUpdate to nextUpdate, signed by the CA.
func (p *PKI) Response(t testing.TB, thisUpdate, nextUpdate time.Time) []byte {
	t.Helper()
	return p.Sign(t, ocsp.Response{Status: ocsp.Good, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: thisUpdate, NextUpdate: nextUpdate}, nil, nil)
}

// Sign makes the response of tmpl about a certificate of the CA, signed
// by signer with key (the CA's when signer is nil; signer is embedded
// otherwise).
func (p *PKI) Sign(t testing.TB, tmpl ocsp.Response, signer *x509.Certificate, key crypto.Signer) []byte {
	t.Helper()
	responder := p.CA
	if signer != nil {
		responder, tmpl.Certificate = signer, signer
	} else {
		key = p.CAKey
	}
	der, err := ocsp.CreateResponse(p.CA, responder, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}
