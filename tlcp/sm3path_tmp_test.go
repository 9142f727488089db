package tlcp

import (
	"testing"

	"github.com/gmproxy/gmproxy/internal/sm3x"
)

func BenchmarkTmpSM3Path(b *testing.B) {
	p := loadPKI(b)
	hs := serverHandshakeOp(b, p, serverHandshakeCases[4])
	if !serverHandshakeCases[4].resume || !sm3x.Direct() {
		b.Fatal("setup")
	}
	direct := &timedOp{name: "direct", fn: func() { sm3x.ForceMarshal(false); hs() }}
	marshal := &timedOp{name: "marshal", fn: func() { sm3x.ForceMarshal(true); hs() }}
	ops := []*timedOp{direct, marshal}
	if testing.Verbose() {
		ops = []*timedOp{marshal, direct}
	}
	runInterleaved(b, ops, 4)
	sm3x.ForceMarshal(false)
	b.ReportMetric(direct.perOp(), "direct-ns")
	b.ReportMetric(marshal.perOp(), "marshal-ns")
	b.ReportMetric((marshal.perOp()-direct.perOp())/marshal.perOp()*100, "saved-%")
}
