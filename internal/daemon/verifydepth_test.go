package daemon

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/tlcp"
)

// deepIdentities returns client certificates for each protocol issued by
// an intermediate CA under a new SM2 and a new ECDSA root (devpki's CAs
// allow no intermediate: pathLenConstraint 0), and the roots: chains of
// one intermediate, which the clients send.
func deepIdentities(t *testing.T) (*clientIdentity, []*smx509.Certificate) {
	t.Helper()
	// issue makes a certificate for key signed by parent (nil: itself),
	// for client authentication unless it is a CA's.
	issue := func(cn string, parent *devpki.Cert, key crypto.Signer, isCA bool, ku smx509.KeyUsage) devpki.Cert {
		var eku []smx509.ExtKeyUsage
		if !isCA {
			eku = []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}
		}
		return oncaIssue(t, cn, parent, key, isCA, ku, eku, time.Now().Add(time.Hour))
	}
	sm2Key := func() crypto.Signer { return oncaSM2Key(t) }
	ecKey := func() crypto.Signer {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	smRoot := issue("deep SM2 root", nil, sm2Key(), true, smx509.KeyUsageCertSign)
	smInter := issue("deep SM2 intermediate", &smRoot, sm2Key(), true, smx509.KeyUsageCertSign)
	sign := issue("deep client sign", &smInter, sm2Key(), false, smx509.KeyUsageDigitalSignature)
	enc := issue("deep client enc", &smInter, sm2Key(), false, smx509.KeyUsageKeyEncipherment|smx509.KeyUsageDataEncipherment|smx509.KeyUsageKeyAgreement)
	ecRoot := issue("deep ECDSA root", nil, ecKey(), true, smx509.KeyUsageCertSign)
	ecInter := issue("deep ECDSA intermediate", &ecRoot, ecKey(), true, smx509.KeyUsageCertSign)
	ecLeaf := issue("deep ecdsa client", &ecInter, ecKey(), false, smx509.KeyUsageDigitalSignature)
	return &clientIdentity{
		tlcp: tlcp.Certificate{SignCertificate: [][]byte{sign.Cert.Raw, smInter.Cert.Raw}, SignKey: sign.Key,
			EncCertificate: enc.Cert.Raw, EncKey: enc.Key},
		tls13sm: pair(sign, smInter),
		tls:     tls.Certificate{Certificate: [][]byte{ecLeaf.Cert.Raw, ecInter.Cert.Raw}, PrivateKey: ecLeaf.Key},
	}, []*smx509.Certificate{smRoot.Cert, ecRoot.Cert}
}

// TestClientVerifyDepth: client_auth.verify_depth limits the intermediate
// CAs between a client's certificate and its CA of client_auth.ca, as
// nginx's ssl_verify_depth: at 0 a certificate the CA issued is served
// and one issued by an intermediate refused, on TLCP and TLS 1.3-SM with
// unknown_ca (as OpenSSL answers a chain too long), counted as
// chain_too_long; at 1, and without the key, both are served.
func TestClientVerifyDepth(t *testing.T) {
	p := testPKI(t)
	direct := clientIdentities(t, p)
	deep, deepRoots := deepIdentities(t)
	b := newBackend(t)
	for _, depth := range []*int{nil, new(0), new(1)} {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt", VerifyDepth: depth}
		cfg.Sites[0].Material.ClientCAs = append([]*smx509.Certificate{p.CA.Cert, p.ECDSACA.Cert}, deepRoots...)
		d := startDaemon(t, cfg)
		for _, proto := range []string{"tlcp", "tls13sm", "tls"} {
			if status, err := fetchWithIdentity(t, d.addr, proto, direct); err != nil || status != 200 {
				t.Errorf("verify_depth %v, %s, certificate of the CA: status %d, error %v; want served", show(depth), proto, status, err)
			}
			before := d.obs.clientCertRefusals(frontdoor.ClientCertTooDeep, 0)
			status, err := fetchWithIdentity(t, d.addr, proto, deep)
			wantServed := depth == nil || *depth >= 1
			if served := err == nil && status == 200; served != wantServed {
				t.Errorf("verify_depth %v, %s, certificate of an intermediate: status %d, error %v; want served %v", show(depth), proto, status, err, wantServed)
			}
			if wantServed {
				continue
			}
			var ae *tlcp.AlertError
			if proto != "tls" && (!errors.As(err, &ae) || ae.Alert != tlcp.AlertUnknownCA) {
				t.Errorf("verify_depth 0, %s: error %v, want the alert unknown_ca", proto, err)
			}
			if got := d.obs.clientCertRefusals(frontdoor.ClientCertTooDeep, before+1); got != before+1 {
				t.Errorf("verify_depth 0, %s: %d refusals counted as chain_too_long, want %d", proto, got, before+1)
			}
		}
		d.Close()
	}
}

func show(d *int) any {
	if d == nil {
		return "unset"
	}
	return *d
}

// TestVerifyDepthReloadReachesSessions: a reload that lowers verify_depth
// below a client's chain stops it where it was authenticated before: its
// TLCP session ID no longer resumes (the full handshake is refused) and
// the next request of its connection kept alive gets 421.
func TestVerifyDepthReloadReachesSessions(t *testing.T) {
	p := testPKI(t)
	deep, roots := deepIdentities(t)
	b := newBackend(t)
	config := func(depth int) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt", VerifyDepth: &depth}
		cfg.Sites[0].Material.ClientCAs = append([]*smx509.Certificate{p.CA.Cert}, roots...)
		return cfg
	}
	td := startDaemon(t, config(1))
	cliCfg := &tlcp.Config{ServerName: "localhost", NextProtos: []string{"http/1.1"}, CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
		SessionTicketsDisabled: true, ClientSessionCache: tlcp.NewLRUClientSessionCache(4), Certificates: []tlcp.Certificate{deep.tlcp}}
	kept := dialTLCP(t, td.addr, cliCfg)
	if err := kept.Handshake(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(kept)
	if st, _, err := keepAliveGET(t, kept, br, "/before"); err != nil || st != 200 {
		t.Fatalf("before the reload: %d %v", st, err)
	}

	td.reloadWith(t, config(0))

	if st, _, err := keepAliveGET(t, kept, br, "/after"); err != nil || st != http.StatusMisdirectedRequest {
		t.Errorf("kept-alive TLCP connection after the reload lowered verify_depth: %d %v, want 421", st, err)
	}
	c := dialTLCP(t, td.addr, cliCfg)
	defer c.Close()
	if err := c.Handshake(); err == nil {
		t.Errorf("TLCP session ID after the reload lowered verify_depth: resumed %v; want a refused handshake", c.ConnectionState().DidResume)
	}
}

// TestCheckDepth: verify_depth counts the certificates between the
// client's and the trust anchor, and one verified chain within it
// suffices (crypto/x509 may find several).
func TestCheckDepth(t *testing.T) {
	chains := func(lens ...int) [][]int {
		var cs [][]int
		for _, n := range lens {
			cs = append(cs, make([]int, n))
		}
		return cs
	}
	for _, tc := range []struct {
		chains [][]int
		depth  *int
		want   int // intermediates reported, -1: accepted
	}{
		{chains(4), nil, -1},
		{nil, new(0), -1},
		{chains(1), new(0), -1}, // a certificate of ca itself
		{chains(2), new(0), -1},
		{chains(3), new(0), 1},
		{chains(3), new(1), -1},
		{chains(5, 3), new(1), -1},
		{chains(3, 5), new(1), -1},
		{chains(5, 4), new(1), 2},
	} {
		err := checkDepth(tc.chains, tc.depth)
		var deep *chainTooLongError
		switch {
		case tc.want < 0 && err != nil:
			t.Errorf("chains %v, depth %v: %v, want accepted", tc.chains, show(tc.depth), err)
		case tc.want >= 0 && (!errors.As(err, &deep) || deep.intermediates != tc.want):
			t.Errorf("chains %v, depth %v: %v, want %d intermediates refused", tc.chains, show(tc.depth), err, tc.want)
		}
	}
}
