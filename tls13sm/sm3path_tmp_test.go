package tls13sm

import (
	"runtime"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sm3x"
)

func BenchmarkTmpSM3Path(b *testing.B) {
	srvCfg, stream := serverBenchStream(b, true)
	hs := func() {
		srv := Server(&flightConn{in: stream}, srvCfg)
		if err := srv.Handshake(); err != nil {
			b.Fatal(err)
		}
		if !srv.didResume {
			b.Fatal("not resumed")
		}
	}
	hs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var d, m time.Duration
	for i := 0; i < b.N; i++ {
		sm3x.ForceMarshal(false)
		t0 := threadCPU()
		hs()
		t1 := threadCPU()
		sm3x.ForceMarshal(true)
		hs()
		t2 := threadCPU()
		d += t1 - t0
		m += t2 - t1
	}
	sm3x.ForceMarshal(false)
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "direct-ns")
	b.ReportMetric(float64(m.Nanoseconds())/float64(b.N), "marshal-ns")
	b.ReportMetric(float64(m-d)/float64(m)*100, "saved-%")
}
