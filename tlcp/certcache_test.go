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
	pair := paddedClientPair(t, false)
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	scfg.ClientCAs = nil
	scfg.CipherSuites = []uint16{ECDHE_SM4_GCM_SM3}
	scfg.SessionCacheDisabled = true // a stored session keeps the certificate (as it should)
	ccfg.Certificates = []Certificate{pair}
	w := serverPeerCert(t, scfg, ccfg, 1, pair.EncCertificate)
	if !collected(w) {
		t.Fatal("the client's encryption certificate (and the flight it points into) is kept after its connection ended")
	}
}

// paddedClientPair returns a client sign/enc pair from a throwaway CA whose
// encryption certificate, or signing certificate when sign is set, is
// padded past maxCachedCert.
func paddedClientPair(t *testing.T, sign bool) Certificate {
	t.Helper()
	ca, caKey := genCA(t, "padded client CA")
	pair := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyAgreement|smx509.KeyUsageKeyEncipherment)
	der := &pair.EncCertificate
	if sign {
		der = &pair.SignCertificate[0]
	}
	c, err := smx509.ParseCertificate(*der)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := *c
	tmpl.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 3}, Value: make([]byte, 2*maxCachedCert)}}
	if *der, err = smx509.CreateCertificate(rand.Reader, &tmpl, ca, c.PublicKey, caKey); err != nil {
		t.Fatal(err)
	}
	return pair
}

// serverPeerCert runs a handshake and returns a weak pointer to the
// server's parsed peer certificate i, which must be der.
func serverPeerCert(t *testing.T, scfg, ccfg *Config, i int, der []byte) weak.Pointer[smx509.Certificate] {
	t.Helper()
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
	if len(peer) <= i || !bytes.Equal(peer[i].Raw, der) {
		t.Fatalf("the server did not get the padded certificate as certificate %d", i)
	}
	return weak.Make(peer[i])
}

// collected reports whether w's object is collected within the wait bound.
func collected[T any](w weak.Pointer[T]) bool {
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for {
		runtime.GC()
		if w.Value() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPreparedSessionKeepsNoFlight: the in-memory store's prepared
// sessions keep their client certificates parsed, but never ones that
// point into the handshake flight they came in (over maxCachedCert bytes,
// which parseCertificates parses in place): those held the whole flight,
// up to 64 KiB besides the stored state, for the session's lifetime, in
// each of the store's 10,000 sessions. Such a session is kept serialized
// only, and still resumes with its certificates.
func TestPreparedSessionKeepsNoFlight(t *testing.T) {
	p := loadPKI(t)
	pair := paddedClientPair(t, true)
	scfg, ccfg := p.serverConfig(), p.clientConfig()
	scfg.ClientAuth = RequireAnyClientCert
	scfg.SessionStore = NewLRUSessionStore(4, time.Hour)
	scfg.SessionTicketsDisabled = true
	ccfg.Certificates = []Certificate{pair}
	ccfg.CipherSuites = []uint16{ECC_SM4_GCM_SM3}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	w := serverPeerCert(t, scfg, ccfg, 0, pair.SignCertificate[0])
	if !collected(w) {
		t.Fatal("the client's signing certificate (and the flight it points into) is kept by the stored session")
	}
	r := runPair(t, scfg, ccfg, []byte("x"))
	if r.cerr != nil || r.serr != nil || !r.ss.DidResume {
		t.Fatalf("resumption: %v / %v, resumed %v", r.cerr, r.serr, r.ss.DidResume)
	}
	if pc := r.ss.PeerCertificates; len(pc) == 0 || !bytes.Equal(pc[0].Raw, pair.SignCertificate[0]) {
		t.Fatal("the resumed connection lacks the client's certificates")
	}
}
