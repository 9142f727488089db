package tlcp

import (
	"bytes"
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testwait"
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

// TestECDHKeysKeepNoCertificate: the cache of peer encryption keys in
// their key-agreement form keeps no certificate. It was keyed by the
// parsed certificate, so an ECDHE client under a server that does not
// verify client certificates (gmproxy's default TLCP site: ECDHE suites
// on, no client_auth) could fill its 1024 entries, for an hour each, with
// self-made encryption certificates over maxCachedCert bytes (parsed anew
// each handshake) that also held their whole handshake flights: some 64
// MiB that parsedCerts' bound was meant to prevent.
func TestECDHKeysKeepNoCertificate(t *testing.T) {
	p := loadPKI(t)
	ca, caKey := genCA(t, "ecdh cache test CA")
	pair := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyAgreement|smx509.KeyUsageKeyEncipherment)
	// The encryption certificate again, padded past maxCachedCert.
	enc, err := smx509.ParseCertificate(pair.EncCertificate)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *enc
	tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 3}, Value: make([]byte, 2*maxCachedCert)}}
	if pair.EncCertificate, err = smx509.CreateCertificate(rand.Reader, &tmpl, ca, enc.PublicKey, caKey); err != nil {
		t.Fatal(err)
	}
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	scfg.ClientCAs = nil
	scfg.CipherSuites = []uint16{ECDHE_SM4_GCM_SM3}
	scfg.SessionCacheDisabled = true // a stored session keeps the certificate (as it should)
	ccfg.Certificates = []Certificate{pair}

	w := func() weak.Pointer[smx509.Certificate] {
		c1, c2 := tcpPair(t)
		cli, srv := Client(c1, ccfg), Server(c2, scfg)
		defer cli.Close()
		defer srv.Close()
		done := make(chan error, 1)
		go func() { done <- srv.Handshake() }()
		if err := cli.Handshake(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		peer := srv.ConnectionState().PeerCertificates
		if len(peer) < 2 || !bytes.Equal(peer[1].Raw, pair.EncCertificate) {
			t.Fatal("the server did not get the padded encryption certificate")
		}
		return weak.Make(peer[1])
	}()
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for {
		runtime.GC()
		if w.Value() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's encryption certificate (and the flight it points into) is kept after its connection ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
