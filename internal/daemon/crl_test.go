package daemon

import (
	"bufio"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/revocation"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// testCRL is a CRL of ca (SM2 or ECDSA) valid from an hour ago until
// next, revoking serials.
func testCRL(t testing.TB, ca devpki.Cert, next time.Time, serials ...*big.Int) *smx509.RevocationList {
	t.Helper()
	tmpl := &x509.RevocationList{Number: big.NewInt(time.Now().UnixNano()), ThisUpdate: time.Now().Add(-time.Hour), NextUpdate: next}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: time.Now().Add(-time.Minute)})
	}
	var der []byte
	var err error
	if ca.Cert.SignatureAlgorithm != smx509.SM2WithSM3 {
		var issuer *x509.Certificate
		if issuer, err = x509.ParseCertificate(ca.Cert.Raw); err != nil {
			t.Fatal(err)
		}
		der, err = x509.CreateRevocationList(rand.Reader, tmpl, issuer, ca.Key)
	} else {
		smTmpl := &smx509.RevocationList{Number: tmpl.Number, ThisUpdate: tmpl.ThisUpdate, NextUpdate: tmpl.NextUpdate}
		for _, e := range tmpl.RevokedCertificateEntries {
			smTmpl.RevokedCertificateEntries = append(smTmpl.RevokedCertificateEntries, smx509.RevocationListEntry{SerialNumber: e.SerialNumber, RevocationTime: e.RevocationTime})
		}
		der, err = smx509.CreateRevocationList(rand.Reader, smTmpl, ca.Cert, ca.Key)
	}
	if err != nil {
		t.Fatal(err)
	}
	rl, err := smx509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatal(err)
	}
	return rl
}

// crlConfig is testConfig with site main requiring client certificates of
// p's SM2 and ECDSA CAs, checked against crls.
func crlConfig(t *testing.T, backend string, p *devpki.PKI, crls ...*smx509.RevocationList) *conf.Config {
	cfg := testConfig(t, backend)
	cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt", CRL: "ca.crl"}
	cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert, p.ECDSACA.Cert}
	var signed []revocation.Signed
	for _, rl := range crls {
		for _, ca := range cfg.Sites[0].Material.ClientCAs {
			if rl.CheckSignatureFrom(ca) == nil {
				signed = append(signed, revocation.Signed{List: rl, Issuer: ca})
			}
		}
	}
	cfg.Sites[0].Material.ClientCRLs = revocation.NewIndex(signed)
	return cfg
}

// TestClientCRL: with client_auth.crl, on TLCP, TLS 1.3-SM and TLS, a
// client certificate its CA's CRL lists is refused and one it does not
// list is served; a CRL past its nextUpdate refuses every certificate of
// its CA, and so does a CA without a CRL. A TLCP client whose encryption
// certificate (not its signing one) is revoked is refused too.
func TestClientCRL(t *testing.T) {
	p := testPKI(t)
	id := clientIdentities(t, p)
	tlsLeaf, err := x509.ParseCertificate(id.tls.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	later, earlier := time.Now().Add(time.Hour), time.Now().Add(-time.Minute)
	smGood, ecGood := testCRL(t, p.CA, later), testCRL(t, *p.ECDSACA, later)
	b := newBackend(t)
	cases := []struct {
		name   string
		crls   []*smx509.RevocationList
		served map[string]bool // by protocol
	}{
		{"no certificate revoked", []*smx509.RevocationList{smGood, ecGood}, map[string]bool{"tlcp": true, "tls13sm": true, "tls": true}},
		{"client certificates revoked", []*smx509.RevocationList{testCRL(t, p.CA, later, p.ClientSign.Cert.SerialNumber), testCRL(t, *p.ECDSACA, later, tlsLeaf.SerialNumber)}, nil},
		{"TLCP encryption certificate revoked", []*smx509.RevocationList{testCRL(t, p.CA, later, p.ClientEnc.Cert.SerialNumber), ecGood}, map[string]bool{"tls13sm": true, "tls": true}},
		{"CRLs expired", []*smx509.RevocationList{testCRL(t, p.CA, earlier), testCRL(t, *p.ECDSACA, earlier)}, nil},
		{"no CRL of the SM2 CA", []*smx509.RevocationList{ecGood}, map[string]bool{"tls": true}},
		{"no CRL of the ECDSA CA", []*smx509.RevocationList{smGood}, map[string]bool{"tlcp": true, "tls13sm": true}},
	}
	for _, tc := range cases {
		d := startDaemon(t, crlConfig(t, b.Listener.Addr().String(), p, tc.crls...))
		for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
			status, err := fetchWithIdentity(t, d.addr, proto, id)
			if served := err == nil && status == 200; served != tc.served[proto] {
				t.Errorf("%s, %s: status %d, error %v; want served %v", tc.name, proto, status, err, tc.served[proto])
			}
			// TLCP and TLS 1.3-SM name the reason: certificate_revoked.
			var ae *tlcp.AlertError
			if tc.name == "client certificates revoked" && proto != "tls" && (!errors.As(err, &ae) || ae.Alert != tlcp.AlertCertificateRevoked) {
				t.Errorf("%s, %s: error %v, want the alert certificate_revoked", tc.name, proto, err)
			}
		}
		d.Close()
	}
}

// TestCRLReloadReachesSessions: a reload whose CRL revokes a client
// certificate stops it everywhere it was authenticated before: a TLCP
// session ID and a TLS 1.3-SM ticket no longer resume (the client makes
// a full handshake, which is refused), and the next request of a TLCP
// connection kept alive gets 421.
func TestCRLReloadReachesSessions(t *testing.T) {
	p := testPKI(t)
	id := clientIdentities(t, p)
	later := time.Now().Add(time.Hour)
	b := newBackend(t)
	ecGood := testCRL(t, *p.ECDSACA, later)
	td := startDaemon(t, crlConfig(t, b.Listener.Addr().String(), p, testCRL(t, p.CA, later), ecGood))

	tlcpCfg := &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		SessionTicketsDisabled: true, ClientSessionCache: tlcp.NewLRUClientSessionCache(4), Certificates: []tlcp.Certificate{id.tlcp}}
	tlcpGET := func() (resumed bool, err error) {
		c := dialTLCP(t, td.addr, tlcpCfg)
		defer c.Close()
		if err := c.Handshake(); err != nil {
			return false, err
		}
		st, _, err := keepAliveGET(t, c, bufio.NewReader(c), "/r")
		if err == nil && st != 200 {
			err = errors.New(http.StatusText(st))
		}
		return c.ConnectionState().DidResume, err
	}
	smCache := tls13sm.NewLRUClientSessionCache(4)

	kept := dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		Certificates: []tlcp.Certificate{id.tlcp}})
	if err := kept.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(kept)
	if st, _, err := keepAliveGET(t, kept, br, "/before"); err != nil || st != 200 {
		t.Fatalf("before the reload: %d %v", st, err)
	}
	for i := range 2 {
		if resumed, err := tlcpGET(); err != nil || resumed != (i == 1) {
			t.Fatalf("TLCP connection %d before the reload: resumed %v, error %v", i+1, resumed, err)
		}
		if r := smFetch(t, td.addr, "localhost", id.tls13sm, smCache); r.err != nil || r.status != 200 || r.resumed != (i == 1) {
			t.Fatalf("TLS 1.3-SM connection %d before the reload: resumed %v, status %d, error %v", i+1, r.resumed, r.status, r.err)
		}
	}

	td.reloadWith(t, crlConfig(t, b.Listener.Addr().String(), p, testCRL(t, p.CA, later, p.ClientSign.Cert.SerialNumber), ecGood))

	if resumed, err := tlcpGET(); resumed || err == nil {
		t.Errorf("TLCP session ID after the reload revoked its client certificate: resumed %v, error %v; want a refused full handshake", resumed, err)
	}
	if r := smFetch(t, td.addr, "localhost", id.tls13sm, smCache); r.resumed || (r.err == nil && r.status == 200) {
		t.Errorf("TLS 1.3-SM ticket after the reload revoked its client certificate: resumed %v, status %d, error %v; want a refused full handshake", r.resumed, r.status, r.err)
	}
	if st, _, err := keepAliveGET(t, kept, br, "/after"); err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("kept-alive TLCP connection after the reload revoked its client certificate: %d %v, want 421", st, err)
	}
}
