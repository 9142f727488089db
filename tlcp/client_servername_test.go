package tlcp

import (
	"strings"
	"testing"

	"github.com/emmansun/gmsm/smx509"
)

// TestClientNeedsServerNameWithVerifyPeerCertificate: a client that
// verifies the server (InsecureSkipVerify off) must have a ServerName to
// check in its certificate, a VerifyPeerCertificate hook or not, as in
// crypto/tls and tls13sm. With the hook the handshake went on without
// one, and any server with a certificate from RootCAs, for whatever
// name, was accepted.
func TestClientNeedsServerNameWithVerifyPeerCertificate(t *testing.T) {
	p := loadPKI(t)
	ccfg := p.clientConfig()
	ccfg.ServerName = ""
	called := false
	ccfg.VerifyPeerCertificate = func([][]byte, [][]*smx509.Certificate) error { called = true; return nil }
	cerr, _ := handshakePair(t, p.serverConfig(), ccfg)
	if cerr == nil || !strings.Contains(cerr.Error(), "ServerName") {
		t.Fatalf("client without ServerName: %v (hook called: %v), want it refused for the missing ServerName", cerr, called)
	}
}
