package tlcp

import (
	"encoding"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// Resumption ratios for every suite and both resumption kinds (issue 2:
// "Resumed handshake server CPU ≤ 10 % of a full ECC handshake").
//
// BenchmarkResumeRatio/<suite>/<kind> interleaves, on one locked thread,
// the resumed server handshake with the full ECC_SM4_GCM_SM3 server
// handshake and (CBC suites) the full ECC_SM4_CBC_SM3 one, and reports
//
//	ratio       resumed / full ECC (GCM)           target ≤ 0.10
//	ratio-same  resumed / full ECC of the same record protection (CBC only)
//
// Session-ID resumption replays recorded client flights, like
// BenchmarkServerHandshake/resumed. Ticket resumption cannot: the server
// renews the ticket under a fresh random nonce, and the client's Finished
// covers that NewSessionTicket. There the replayed connection computes the
// client's ChangeCipherSpec and Finished when the server's flight arrives
// (transcript hash, the client Finished PRF and the record seal), on the
// same thread, and that client work is timed with the same clock and
// subtracted: only server work is charged.

type resumeCase struct {
	name   string
	suite  uint16
	ticket bool
}

var resumeCases = func() []resumeCase {
	var cs []resumeCase
	for _, s := range []struct {
		name string
		id   uint16
	}{{"ECC", ECC_SM4_GCM_SM3}, {"ECC-CBC", ECC_SM4_CBC_SM3}, {"ECDHE", ECDHE_SM4_GCM_SM3}, {"ECDHE-CBC", ECDHE_SM4_CBC_SM3}} {
		cs = append(cs, resumeCase{s.name + "/session-id", s.id, false}, resumeCase{s.name + "/ticket", s.id, true})
	}
	return cs
}()

func isCBC(id uint16) bool { return id == ECC_SM4_CBC_SM3 || id == ECDHE_SM4_CBC_SM3 }

func isECDHE(id uint16) bool { return id == ECDHE_SM4_GCM_SM3 || id == ECDHE_SM4_CBC_SM3 }

// resumeOp returns one resumed server handshake of rc and, for tickets, a
// function returning (and resetting) the client-side CPU time to subtract.
func resumeOp(b *testing.B, p *testPKI, rc resumeCase, clock func() int64) (op func(), excluded func() int64) {
	if !rc.ticket {
		return serverHandshakeOp(b, p, serverHandshakeCase{name: rc.name, suite: rc.suite, mutual: isECDHE(rc.suite), resume: true}), nil
	}
	k, err := ticket.NewKey(make([]byte, 32), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	keys := ticket.Static{k}
	scfg := func() *Config {
		c := p.serverConfig()
		c.CipherSuites = []uint16{rc.suite}
		c.Rand = &detRand{}
		c.SessionCacheDisabled = true
		c.TicketKeys = keys
		c.ClientCAs = nil
		return c
	}
	ccfg := p.clientConfig()
	ccfg.CipherSuites = []uint16{rc.suite}
	if !isECDHE(rc.suite) {
		ccfg.Certificates = nil
	}
	cache := NewLRUClientSessionCache(2)
	ccfg.ClientSessionCache = cache
	recordClientFlights(b, scfg, ccfg) // full handshake: the client gets a ticket
	flights := recordClientFlights(b, scfg, ccfg)
	cs, ok := cache.Get(ccfg.ServerName)
	if !ok || len(cs.ticket) == 0 {
		b.Fatal("no ticket in the client cache")
	}
	// The ClientHello is the first record of the recorded flights.
	n := int(flights[3])<<8 | int(flights[4])
	chRecord := flights[:recordHeaderLen+n]
	chMsg := chRecord[recordHeaderLen:]
	h := sm3.New()
	h.Write(chMsg)
	chState, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	rconn := &ticketReplayConn{
		b: b, clock: clock, clockCost: clockCost(clock), suite: cipherSuiteByID(rc.suite), master: cs.master,
		clientRandom: chMsg[6 : 6+32], chState: chState,
	}
	cfg := scfg()
	op = func() {
		rconn.reset(chRecord)
		srv := Server(rconn, cfg)
		if err := srv.Handshake(); err != nil {
			b.Fatal(err)
		}
		if !srv.didResume {
			b.Fatal("ticket not resumed")
		}
	}
	excluded = func() int64 {
		e := rconn.excluded
		rconn.excluded = 0
		return e
	}
	return op, excluded
}

// ticketReplayConn feeds the server a recorded ClientHello and answers the
// server's flight with the client's ChangeCipherSpec and Finished, timing
// that client work in excluded.
type ticketReplayConn struct {
	b            *testing.B
	clock        func() int64
	clockCost    int64
	suite        *cipherSuite
	master       []byte
	clientRandom []byte
	chState      []byte

	in       []byte
	inBuf    []byte
	excluded int64
	write    *recordCipher // client write protection (fixed: both randoms are)
}

func (r *ticketReplayConn) reset(ch []byte) {
	r.inBuf = append(r.inBuf[:0], ch...)
	r.in = r.inBuf
}

func (r *ticketReplayConn) Read(b []byte) (int, error) {
	if len(r.in) == 0 {
		return 0, net.ErrClosed
	}
	n := copy(b, r.in)
	r.in = r.in[n:]
	return n, nil
}

func (r *ticketReplayConn) Write(b []byte) (int, error) {
	t0 := r.clock()
	r.answer(b)
	// The two clock readings added one reading's cost to the server's side.
	r.excluded += r.clock() - t0 + r.clockCost
	return len(b), nil
}

// clockCost estimates the CPU cost of one clock reading: the median of
// many differences between back-to-back readings.
func clockCost(clock func() int64) int64 {
	d := make([]int64, 1001)
	for i := range d {
		t0 := clock()
		d[i] = clock() - t0
	}
	slices.Sort(d)
	return max(d[len(d)/2], 0)
}

// answer computes the client's last flight from the server's flight:
// ServerHello, NewSessionTicket (plaintext), ChangeCipherSpec, Finished.
func (r *ticketReplayConn) answer(flight []byte) {
	var hsMsgs []byte
	for len(flight) >= recordHeaderLen {
		typ := flight[0]
		n := int(flight[3])<<8 | int(flight[4])
		if typ != byte(recordTypeHandshake) {
			break
		}
		hsMsgs = append(hsMsgs, flight[recordHeaderLen:recordHeaderLen+n]...)
		flight = flight[recordHeaderLen+n:]
	}
	if len(hsMsgs) < 4+2+32 || hsMsgs[0] != typeServerHello {
		r.b.Fatal("unexpected server flight")
	}
	serverRandom := hsMsgs[6 : 6+32]

	ks := scheduleFromMaster(r.master)
	defer ks.release()
	if r.write == nil {
		cMAC, _, cKey, _, cIV, _ := ks.keys(r.suite, r.clientRandom, serverRandom)
		rc, err := newRecordCipher(r.suite, cMAC, cKey, cIV)
		if err != nil {
			r.b.Fatal(err)
		}
		r.write = rc
	}
	h := sm3.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(r.chState); err != nil {
		r.b.Fatal(err)
	}
	h.Write(hsMsgs)
	var sum [sm3.Size]byte
	sf := ks.finished(false, h.Sum(sum[:0]))
	h.Write([]byte{typeFinished, 0, 0, finishedVerifyLen})
	h.Write(sf)
	cf := ks.finished(true, h.Sum(sum[:0]))
	msg := append([]byte{typeFinished, 0, 0, finishedVerifyLen}, cf...)
	out := append(r.in, byte(recordTypeChangeCipherSpec), VersionTLCP>>8, VersionTLCP&0xff, 0, 1, 1)
	hc := &halfConn{cipher: r.write}
	out, _, err := hc.appendRecords(out, recordTypeHandshake, msg, maxPlaintext, &detRand{})
	if err != nil {
		r.b.Fatal(err)
	}
	r.in = out
}

func (r *ticketReplayConn) Close() error                     { return nil }
func (r *ticketReplayConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (r *ticketReplayConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (r *ticketReplayConn) SetDeadline(time.Time) error      { return nil }
func (r *ticketReplayConn) SetReadDeadline(time.Time) error  { return nil }
func (r *ticketReplayConn) SetWriteDeadline(time.Time) error { return nil }

// TestTicketReplayConn checks the benchmark's ticket replay: the server
// resumes and accepts the computed client Finished, repeatedly.
func TestTicketReplayConn(t *testing.T) {
	if testing.Short() {
		t.Skip("benchmark helper")
	}
	res := testing.Benchmark(func(b *testing.B) {
		p := loadPKI(b)
		for _, rc := range resumeCases {
			op, excl := resumeOp(b, p, rc, processCPU)
			for range 3 {
				op()
			}
			if excl != nil && excl() <= 0 {
				b.Fatal("no client time recorded")
			}
		}
	})
	if res.N == 0 {
		t.Fatal("benchmark helper failed")
	}
}

func BenchmarkResumeRatio(b *testing.B) {
	p := loadPKI(b)
	clock := threadCPU
	if clock() < 0 {
		clock = processCPU
	}
	fullGCM := serverHandshakeOp(b, p, serverHandshakeCases[0])
	fullCBC := serverHandshakeOp(b, p, serverHandshakeCases[1])
	for _, rc := range resumeCases {
		b.Run(rc.name, func(b *testing.B) {
			hs, excl := resumeOp(b, p, rc, clock)
			ops := []*timedOp{{name: "hs", fn: hs, excluded: excl}, {name: "full", fn: fullGCM}}
			if isCBC(rc.suite) {
				ops = append(ops, &timedOp{name: "fullcbc", fn: fullCBC})
			}
			runInterleaved(b, ops, 4)
			for _, op := range ops {
				b.ReportMetric(op.perOp(), op.name+"-ns")
			}
			b.ReportMetric(ops[0].perOp()/ops[1].perOp(), "ratio")
			if len(ops) > 2 {
				b.ReportMetric(ops[0].perOp()/ops[2].perOp(), "ratio-same")
			}
		})
	}
}

// BenchmarkResumedHandshake runs each resumed server handshake of
// resumeCases alone (for profiles and allocation counts; the ratios come
// from BenchmarkResumeRatio). For tickets, "server-ns/op" is the thread
// CPU time less the replayed client's work.
func BenchmarkResumedHandshake(b *testing.B) {
	p := loadPKI(b)
	for _, rc := range resumeCases {
		b.Run(rc.name, func(b *testing.B) {
			hs, excl := resumeOp(b, p, rc, threadOrProcessCPU())
			hs()
			if excl != nil {
				excl()
			}
			b.ReportAllocs()
			b.ResetTimer()
			clock := threadOrProcessCPU()
			stop := cpuTimer(b)
			t0 := clock()
			for b.Loop() {
				hs()
			}
			t := clock() - t0
			stop()
			if excl != nil {
				t -= excl()
			}
			b.ReportMetric(float64(t)/float64(b.N), "server-ns/op")
		})
	}
}

// threadOrProcessCPU returns threadCPU where it works, else processCPU.
func threadOrProcessCPU() func() int64 {
	if threadCPU() >= 0 {
		return threadCPU
	}
	return processCPU
}
