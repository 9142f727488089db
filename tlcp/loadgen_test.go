package tlcp

import (
	"bytes"
	"sync"
	"testing"
)

// ckeRecorder keeps a copy of each ClientKeyExchange a client sends.
type ckeRecorder struct {
	mu   sync.Mutex
	msgs [][]byte
}

func (r *ckeRecorder) out(m []byte) []byte {
	if m[0] == typeClientKeyExchange {
		r.mu.Lock()
		r.msgs = append(r.msgs, bytes.Clone(m))
		r.mu.Unlock()
	}
	return m
}

// TestInsecureLoadGenerator: a load-generator client sends one
// ClientKeyExchange on every connection, which the server takes each time,
// and does not check the ServerKeyExchange signature; an ordinary client
// encrypts a new pre-master per connection.
func TestInsecureLoadGenerator(t *testing.T) {
	p := loadPKI(t)
	for _, lg := range []bool{false, true} {
		var rec ckeRecorder
		ccfg := &Config{InsecureSkipVerify: true, CipherSuites: []uint16{ECC_SM4_GCM_SM3}, InsecureLoadGenerator: lg, testHandshakeOut: rec.out}
		for i := range 3 {
			if r := runPair(t, p.serverConfig(), ccfg, []byte("load")); r.cerr != nil || r.serr != nil {
				t.Fatalf("loadgen=%v connection %d: client %v, server %v", lg, i, r.cerr, r.serr)
			}
		}
		if len(rec.msgs) != 3 {
			t.Fatalf("loadgen=%v: %d ClientKeyExchange messages, want 3", lg, len(rec.msgs))
		}
		same := bytes.Equal(rec.msgs[0], rec.msgs[1]) && bytes.Equal(rec.msgs[1], rec.msgs[2])
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
