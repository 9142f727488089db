package tls13sm

import (
	"crypto/rand"
	"runtime"
	"testing"
	"time"

	gmecdh "github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// Breakdown benchmarks: the pieces of a server handshake measured alone
// with the thread CPU clock, interleaved, for the floor accounting of the
// Ratio benchmarks (a handshake cannot cost less than its key exchange,
// its signature, its SM3 compressions and its SM4 work).

// piece is one measured step: its CPU time is reported per run divided
// by per (the number of operations one run makes).
type piece struct {
	name string
	per  int
	run  func()
}

// pieceLoop runs each piece b.N times, interleaved, on a locked thread and
// reports each one's CPU time per operation (less that of an empty piece,
// which is the clock's own cost).
func pieceLoop(b *testing.B, pieces ...piece) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pieces = append(pieces, piece{"", 1, func() {}})
	tot := make([]time.Duration, len(pieces))
	for i := 0; i < b.N; i++ {
		for j, p := range pieces {
			t0 := threadCPU()
			p.run()
			tot[j] += threadCPU() - t0
		}
	}
	empty := tot[len(tot)-1]
	for j, p := range pieces[:len(pieces)-1] {
		b.ReportMetric(float64((tot[j]-empty).Nanoseconds())/float64(b.N)/float64(p.per), p.name)
	}
}

// BenchmarkBreakdownPieces: one SM3 compression (64 single-block calls, as
// the key schedule makes them, per block), the benchmark schedules, one
// SM4-GCM AEAD construction, one sealed Finished record, curveSM2
// keygen+ECDH, an SM2 sign as the Ratio baseline makes it (content and ID:
// gmsm computes Z_A and e) and as the server makes it (e from the cached
// Z_A prefix, one compression, then gmsm's sign of e).
func BenchmarkBreakdownPieces(b *testing.B) {
	p := loadPKI(b)
	key := p.server.PrivateKey.(*sm2.PrivateKey)
	x := new(scheduleScratch)
	shared, psk := make([]byte, 32), new(resumptionPSK)
	th := sm3.Sum([]byte("transcript"))
	msg := signedMessage(serverSignatureContext, th[:])
	peer, _ := gmecdh.P256().GenerateKey(rand.Reader)
	s := cipherSuiteByID(TLS_SM4_GCM_SM3)
	aeadKey := make([]byte, keyLen)
	aead, _ := s.aead(aeadKey)
	rec := make([]byte, 64)
	nonce := make([]byte, ivLen)
	var c sm3state.Compressor
	var ks keySchedule
	h := sm3state.IV()
	block := make([]byte, sm3.BlockSize)
	pieceLoop(b,
		piece{"sm3-block-ns", 64, func() {
			for i := 0; i < 64; i++ {
				c.Compress(&h, block)
			}
		}},
		piece{"fullsched-ns", 1, func() { fullSchedule(x, shared, th[:]) }},
		piece{"resumedsched-ns", 1, func() { resumedSchedule(x, psk, shared, th[:]) }},
		piece{"aead-new-ns", 1, func() { s.aead(aeadKey) }},
		piece{"seal-fin-ns", 1, func() { aead.Seal(rec[:0], nonce, rec[:37], rec[:5]) }},
		piece{"keygen+ecdh-ns", 1, func() { keygenECDH(peer.PublicKey()) }},
		piece{"sign-msg-ns", 1, func() { key.Sign(rand.Reader, msg, sm2SignerOpts.GMSM()) }},
		piece{"sign-e-ns", 1, func() {
			e, _ := certificateVerifyDigest(ks.m.Compressor(), &key.PublicKey, serverSignatureContext, th[:], ks.t[:0])
			key.Sign(rand.Reader, e, sm2DigestOpts)
		}},
	)
}

// serverBlocks runs one server handshake over stream and returns the SM3
// compressions it made through its key schedule's compressor (schedule,
// transcript and CertificateVerify digest; gmsm's own inside the SM2 sign
// are not counted).
func serverBlocks(b *testing.B, stream []byte, cfg *Config) int {
	for try := 0; try < 10; try++ {
		n := 0
		hs := serverStates.Get().(*serverHandshakeState)
		hs.ks.m.Compressor().CountBlocks(&n)
		serverStates.Put(hs)
		if err := Server(&flightConn{in: stream}, cfg).Handshake(); err != nil {
			b.Fatal(err)
		}
		hs = serverStates.Get().(*serverHandshakeState)
		hs.ks.m.Compressor().CountBlocks(nil)
		serverStates.Put(hs)
		if n > 0 {
			return n
		}
	}
	b.Fatal("the pooled handshake state was not reused")
	return 0
}

// BenchmarkBreakdownServerBlocks reports the SM3 compressions of the
// handshakes of BenchmarkRatioServerFull and BenchmarkRatioServerResumed.
func BenchmarkBreakdownServerBlocks(b *testing.B) {
	for _, resume := range []bool{false, true} {
		name := "full"
		if resume {
			name = "resumed"
		}
		b.Run(name, func(b *testing.B) {
			srvCfg, stream := serverBenchStream(b, resume)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			n := 0
			for i := 0; i < b.N; i++ {
				n = serverBlocks(b, stream, srvCfg)
			}
			b.ReportMetric(float64(n), "sm3-blocks")
		})
	}
}
