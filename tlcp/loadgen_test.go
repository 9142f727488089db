package tlcp

import (
	"bytes"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestInsecureLoadGenerator: a load-generator client sends one
// ClientKeyExchange on every connection, which the server takes each time,
// and does not check the ServerKeyExchange signature; an ordinary client
// encrypts a new pre-master per connection.
func TestInsecureLoadGenerator(t *testing.T) {
	p := loadPKI(t)
	for _, lg := range []bool{false, true} {
		rec := &testpeer.Recorder{Type: typeClientKeyExchange}
		ccfg := &Config{InsecureSkipVerify: true, CipherSuites: []uint16{ECC_SM4_GCM_SM3}, InsecureLoadGenerator: lg, testHandshakeOut: rec.Out}
		for i := range 3 {
			if r := runPair(t, p.serverConfig(), ccfg, []byte("load")); r.cerr != nil || r.serr != nil {
				t.Fatalf("loadgen=%v connection %d: client %v, server %v", lg, i, r.cerr, r.serr)
			}
		}
		msgs := rec.Msgs()
		if len(msgs) != 3 {
			t.Fatalf("loadgen=%v: %d ClientKeyExchange messages, want 3", lg, len(msgs))
		}
		same := bytes.Equal(msgs[0], msgs[1]) && bytes.Equal(msgs[1], msgs[2])
		if same != lg {
			t.Errorf("loadgen=%v: ClientKeyExchange repeated = %v", lg, same)
		}
	}

	// A wrong ServerKeyExchange signature: the ordinary client refuses it
	// (TestMisbehavingPeer), the load generator goes on.
	scfg := p.serverConfig()
	scfg.testHandshakeOut, scfg.testRewriteBeforeHash = onType(typeServerKeyExchange, flipAt(-3)), true
	ccfg := &Config{InsecureSkipVerify: true, CipherSuites: []uint16{ECC_SM4_GCM_SM3}}
	if r := runPair(t, scfg, ccfg, []byte("load")); r.cerr == nil {
		t.Fatal("ordinary client took a wrong ServerKeyExchange signature")
	}
	ccfg.InsecureLoadGenerator = true
	if r := runPair(t, scfg, ccfg, []byte("load")); r.cerr != nil || r.serr != nil {
		t.Fatalf("load generator: client %v, server %v", r.cerr, r.serr)
	}
}
