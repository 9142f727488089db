package metrics

import (
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// BenchmarkConnectionEvents measures the observer cost of one connection's
// events (accept, handshake start/done, bytes, close), against the no-op
// observer as the baseline of the same run.
func BenchmarkConnectionEvents(b *testing.B) {
	ev := frontdoor.HandshakeEvent{State: frontdoor.ConnState{Listener: "edge", Family: frontdoor.FamilyTLCP,
		Cipher: "ECC-SM2-SM4-GCM-SM3", Resumed: true, HandshakeDuration: 300 * time.Microsecond}}
	for _, bc := range []struct {
		name string
		obs  frontdoor.Observer
	}{
		{"nop", frontdoor.NopObserver{}},
		{"metrics", MustNew(nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bc.obs.ConnAccepted("edge")
					bc.obs.HandshakeStarted("edge")
					bc.obs.HandshakeDone(ev)
					bc.obs.Bytes(frontdoor.FamilyTLCP, "ECC-SM2-SM4-GCM-SM3", 1024, 16384, 1, 1)
					bc.obs.ConnClosed("edge")
				}
			})
		})
	}
}

// BenchmarkKeyAndSessionEvents measures the observer cost of the key and
// session events of one new TLCP handshake that is stored for resumption
// (a signature, a decryption, a session-cache store and the connection's
// duration).
func BenchmarkKeyAndSessionEvents(b *testing.B) {
	m := MustNew(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.KeyOp("sign", frontdoor.FamilyTLCP, time.Microsecond, 13*time.Microsecond, nil)
			m.KeyOp("decrypt", frontdoor.FamilyTLCP, time.Microsecond, 50*time.Microsecond, nil)
			m.SessionLookup(frontdoor.FamilyTLCP, false)
			m.SessionCacheSize(frontdoor.FamilyTLCP, 100, 0)
			m.ConnDone("edge", frontdoor.FamilyTLCP, time.Millisecond)
		}
	})
}
