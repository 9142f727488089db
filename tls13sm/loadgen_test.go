package tls13sm

import (
	"bytes"
	"sync"
	"testing"
)

// keyShareRecorder keeps the key share of each ClientHello a client sends.
type keyShareRecorder struct {
	mu     sync.Mutex
	shares [][]byte
}

func (r *keyShareRecorder) out(m []byte) []byte {
	if m[0] == typeClientHello {
		var ch clientHelloMsg
		if ch.unmarshal(bytes.Clone(m)) && len(ch.keyShares) == 1 {
			r.mu.Lock()
			r.shares = append(r.shares, bytes.Clone(ch.keyShares[0].data))
			r.mu.Unlock()
		}
	}
	return m
}

// TestInsecureLoadGenerator: a load-generator client offers one key share
// on every connection, which the server takes each time, and does not
// check the server's CertificateVerify; an ordinary client makes a new key
// share per connection.
func TestInsecureLoadGenerator(t *testing.T) {
	for _, lg := range []bool{false, true} {
		srv, cli := testConfigs(t)
		var rec keyShareRecorder
		cli.ClientSessionCache, cli.InsecureLoadGenerator, cli.testHandshakeOut = nil, lg, rec.out
		for i := range 3 {
			if _, _, serr, cerr := runPair(t, srv, cli); serr != nil || cerr != nil {
				t.Fatalf("loadgen=%v connection %d: client %v, server %v", lg, i, cerr, serr)
			}
		}
		if len(rec.shares) != 3 {
			t.Fatalf("loadgen=%v: %d key shares, want 3", lg, len(rec.shares))
		}
		same := bytes.Equal(rec.shares[0], rec.shares[1]) && bytes.Equal(rec.shares[1], rec.shares[2])
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
