package tls13sm

import (
	"bytes"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// keyShares returns the key share of each recorded ClientHello.
func keyShares(t *testing.T, hellos [][]byte) [][]byte {
	var out [][]byte
	for _, m := range hellos {
		var ch clientHelloMsg
		if !ch.unmarshal(m) || len(ch.keyShares) != 1 {
			t.Fatal("a recorded ClientHello without exactly one key share")
		}
		out = append(out, ch.keyShares[0].data)
	}
	return out
}

// TestInsecureLoadGenerator: a load-generator client offers one key share
// on every connection, which the server takes each time, and does not
// check the server's CertificateVerify; an ordinary client makes a new key
// share per connection.
func TestInsecureLoadGenerator(t *testing.T) {
	for _, lg := range []bool{false, true} {
		srv, cli := testConfigs(t)
		rec := &testpeer.Recorder{Type: typeClientHello}
		cli.ClientSessionCache, cli.InsecureLoadGenerator, cli.testHandshakeOut = nil, lg, rec.Out
		for i := range 3 {
			if _, _, serr, cerr := runPair(t, srv, cli); serr != nil || cerr != nil {
				t.Fatalf("loadgen=%v connection %d: client %v, server %v", lg, i, cerr, serr)
			}
		}
		shares := keyShares(t, rec.Msgs())
		if len(shares) != 3 {
			t.Fatalf("loadgen=%v: %d key shares, want 3", lg, len(shares))
		}
		same := bytes.Equal(shares[0], shares[1]) && bytes.Equal(shares[1], shares[2])
		if same != lg {
			t.Errorf("loadgen=%v: key share repeated = %v", lg, same)
		}
	}

	// A wrong CertificateVerify: the ordinary client refuses it
	// (TestMisbehavingPeer), the load generator goes on.
	srv, cli := testConfigs(t)
	cli.ClientSessionCache = nil
	srv.testHandshakeOut, srv.testRewriteBeforeHash = onType(typeCertificateVerify, flipAt(-3)), true
	if _, _, _, cerr := runPair(t, srv, cli); cerr == nil {
		t.Fatal("ordinary client took a wrong CertificateVerify")
	}
	cli.InsecureLoadGenerator = true
	if _, _, serr, cerr := runPair(t, srv, cli); serr != nil || cerr != nil {
		t.Fatalf("load generator: client %v, server %v", cerr, serr)
	}
}
