package keyserver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// ecdheMsg returns the signed part of a TLCP ECDHE ServerKeyExchange as
// tlcp builds it: random randoms, then 03 || 00 29 || 41 || a fresh point.
func ecdheMsg(t testing.TB) []byte {
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	m := make([]byte, 64, 64+4+65)
	rand.Read(m)
	return append(append(m, 3, 0, 41, 65), eph.PublicKey().Bytes()...)
}

// eccMsg returns the signed part of a TLCP ECC ServerKeyExchange over the
// encryption certificate der: random randoms, 3-byte length, der.
func eccMsg(der []byte) []byte {
	m := make([]byte, 64, 64+3+len(der))
	rand.Read(m)
	return append(append(m, byte(len(der)>>16), byte(len(der)>>8), byte(len(der))), der...)
}

// edit returns a copy of b changed by f.
func edit(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }

// TestSignsHandshakeMessagesOnly: a client allowed the signing key has it
// sign TLS 1.3 server CertificateVerify contents and TLCP
// ServerKeyExchange parameters, and nothing else: a digest, random
// bytes, a CertificateVerify of another context or hash length, TLCP
// parameters with a truncated or mislabelled certificate, a certificate
// that is no SM2 encryption certificate, another curve or a point off
// the curve are refused with CodeNotHandshake, and counted like other
// refusals (metrics and audit).
func TestSignsHandshakeMessagesOnly(t *testing.T) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := devKeys(p)
	pki := newTestPKI(t)
	cliTLS, _ := pki.client(t, "edge")
	obs := newRecObserver()
	ks := startServer(t, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, func(s *Server) { s.Observer = obs })
	kc := newClient(t, cliTLS, ks.addr)
	rs := remote(t, kc, keys[0])
	ctx := context.Background()

	ecdhe := ecdheMsg(t)
	enc := p.ServerEnc.Cert.Raw
	ecc := eccMsg(enc)
	for name, m := range map[string][]byte{"TLS 1.3 CertificateVerify": testMsg, "TLCP ECDHE": ecdhe, "TLCP ECC": ecc} {
		opts := smkey.DefaultSM2SignerOpts
		if bytes.Equal(m, testMsg) {
			opts = testOpts
		}
		if _, err := rs.SignContext(ctx, nil, m, opts); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	random := make([]byte, 130)
	rand.Read(random)
	ecdsaCert := p256EncCert(t)
	offCurve := edit(ecdhe, func(b []byte) []byte { b[len(b)-1] ^= 1; return b })
	refused := []struct {
		name string
		msg  []byte
	}{
		{"empty", nil},
		{"a 32-byte digest (version 2's request)", make([]byte, 32)},
		{"random bytes", random},
		{"a document", []byte("I owe the bearer 1000000 yuan.")},
		{"CertificateVerify of a client", cvClient()},
		{"CertificateVerify of another context", edit(testMsg, func(b []byte) []byte { b[64+len("TLS 1.3, ")] = 'X'; return b })},
		{"CertificateVerify without the 0 byte", append(bytes.Clone(testMsg[:64+33]), bytes.Repeat([]byte{1}, 33)...)},
		{"CertificateVerify with a short padding", edit(testMsg, func(b []byte) []byte { b[10] = 0x21; return b })},
		{"CertificateVerify with a 31-byte hash", testMsg[:len(testMsg)-1]},
		{"CertificateVerify with a 48-byte hash", append(bytes.Clone(testMsg), make([]byte, 16)...)},
		{"ECDHE with another curve (secp256r1)", edit(ecdhe, func(b []byte) []byte { b[66] = 23; return b })},
		{"ECDHE with another curve type", edit(ecdhe, func(b []byte) []byte { b[64] = 1; return b })},
		{"ECDHE with a point off the curve", offCurve},
		{"ECDHE with a compressed point", append(append(bytes.Clone(ecdhe[:64]), 3, 0, 41, 33), ecdhe[68:68+33]...)},
		{"ECDHE with a byte more", append(bytes.Clone(ecdhe), 0)},
		{"ECDHE truncated", ecdhe[:len(ecdhe)-1]},
		{"ECC with a truncated certificate", edit(eccMsg(enc), func(b []byte) []byte { return b[:len(b)-10] })},
		{"ECC whose length covers less than the certificate", edit(ecc, func(b []byte) []byte { b[66]--; return b })},
		{"ECC whose length covers more than the certificate", edit(ecc, func(b []byte) []byte { b[66]++; return b })},
		{"ECC with a byte after the certificate", eccMsg(append(bytes.Clone(enc), 0))},
		{"ECC with no certificate", eccMsg(nil)},
		{"randoms only", ecc[:64]},
		{"randoms and part of a length", ecc[:66]},
		{"ECC with DER that is no certificate", eccMsg(append([]byte{0x30, 0x80 | 1, 200}, make([]byte, 200)...))},
		{"ECC with an ECDSA P-256 encryption certificate", eccMsg(ecdsaCert)},
		{"ECC with the signing certificate", eccMsg(p.ServerSign.Cert.Raw)},
	}
	signID, _ := KeyID(keys[0].Private.Public())
	for _, c := range refused {
		if _, err := kc.call(ctx, OpSign, signID[:], c.msg); !errors.Is(err, ErrNotHandshake) {
			t.Errorf("%s: err = %v, want CodeNotHandshake", c.name, err)
		}
	}
	// Through RemoteKey too: the refusal is the key server's.
	if _, err := rs.SignContext(ctx, nil, random, smkey.DefaultSM2SignerOpts); !errors.Is(err, ErrNotHandshake) {
		t.Errorf("RemoteKey, random bytes: err = %v", err)
	}
	if n := obs.get(func(r *recObserver) int { return r.ops["edge/sign/sign/not_handshake"] }); n != len(refused)+1 {
		t.Errorf("%d refusals counted as not_handshake, want %d", n, len(refused)+1)
	}
	if n := obs.get(func(r *recObserver) int { return r.ops["edge/sign/sign/ok"] }); n != 3 {
		t.Errorf("%d signatures counted, want 3", n)
	}
	ks.s.audit.mu.Lock()
	audited := ks.s.audit.counts[auditKey{"edge", "sign"}][OpSign-1][CodeNotHandshake]
	ks.s.audit.mu.Unlock()
	if audited != uint64(len(refused)+1) {
		t.Errorf("audit counted %d refusals, want %d", audited, len(refused)+1)
	}
}

// cvClient is the content of a TLS 1.3 client CertificateVerify: gmproxy
// keeps no client key on a key server, and signs none.
func cvClient() []byte {
	return append(bytes.Repeat([]byte{0x20}, 64), append([]byte("TLS 1.3, client CertificateVerify\x00"), make([]byte, 32)...)...)
}

// testCertDER returns the DER of an SM2 encryption certificate.
func testCertDER(t testing.TB) []byte {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	return p.ServerEnc.Cert.Raw
}

// p256EncCert returns a self-signed ECDSA P-256 certificate with the key
// usages of an encryption certificate: all but its key type is right.
func p256EncCert(t testing.TB) []byte {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "enc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}
