package tlcp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"

	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Benchmarks for the ratios of issue 2 "Performance". Each ratio compares
// two benchmarks of the same run:
//
//	KeySchedule / SM2Sign                                   ≤ 0.50
//	ServerHandshake/ECC / (SM2Sign + SM2Decrypt + KeySchedule) ≤ 1.25
//	ServerHandshake/ECDHE / (SM2Sign + KeyAgreement + KeySchedule) ≤ 1.25
//	ServerHandshake/resumed / ServerHandshake/ECC            ≤ 0.10
//	RecordGCM16K (write+read) vs RawGCM16K (seal+open)       ≥ 0.85 throughput
//	CBCEncrypt64K/batched vs CBCEncrypt64K/serial           ≥ 3× throughput
//	RecordCBCWrite64K vs NaiveCBCSeal64K                    ≥ 2.5× throughput
//
// The handshake ratios are also measured by BenchmarkHandshakeRatio, which
// interleaves each handshake with its baseline operations on one thread so
// that load changes on a shared machine affect both sides alike (its
// "ratio" metric is the figure to quote). BenchmarkResumeRatio does the same
// for resumption in all four suites, by session ID and by ticket
// (bench_resume_test.go). All CPU metrics come from
// cpuTimer: cpu-ns/op is process CPU, thread-ns/op the benchmark thread's.

func BenchmarkSM2Sign(b *testing.B) {
	p := loadPKI(b)
	msg := make([]byte, 64+3+600)
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		if _, err := signSM2(context.Background(), p.server.SignKey, rand.Reader, msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSM2Verify is one SM2 signature verification (the ECDHE server
// must verify the client's CertificateVerify).
func BenchmarkSM2Verify(b *testing.B) {
	p := loadPKI(b)
	msg := make([]byte, 32)
	sig, err := signSM2(context.Background(), p.server.SignKey, rand.Reader, msg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		if !verifySM2(p.server.Leaf.PublicKey, msg, sig) {
			b.Fatal("verify")
		}
	}
}

func BenchmarkSM2Decrypt(b *testing.B) {
	p := loadPKI(b)
	pm := make([]byte, 48)
	ct, err := sm2.EncryptASN1(rand.Reader, p.server.EncLeaf.PublicKey.(*ecdsaPublicKey), pm)
	if err != nil {
		b.Fatal(err)
	}
	dec := p.server.EncKey.(cryptoDecrypter)
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		if _, err := smkey.Decrypt(context.Background(), dec, rand.Reader, ct, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyAgreement is the SM2 key agreement of an ECDHE server: the
// ephemeral key generation plus SM2MQV and the KDF.
func BenchmarkKeyAgreement(b *testing.B) {
	p := loadPKI(b)
	cliEph, _ := ecdh.P256().GenerateKey(rand.Reader)
	cliStatic, _ := ecdhPublic(p.client.EncLeaf)
	ka := smkey.AsKeyAgreement(p.server.EncKey)
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		eph, err := ecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ka.SM2KeyAgree(context.Background(), eph, cliStatic, cliEph.PublicKey(), false, 48, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeySchedule: master secret, key block and both Finished.
func BenchmarkKeySchedule(b *testing.B) { benchKeySchedule(b, ECC_SM4_GCM_SM3) }

// BenchmarkKeyScheduleCBC is the key schedule of a CBC suite (a 128-byte
// key block instead of GCM's 40 bytes).
func BenchmarkKeyScheduleCBC(b *testing.B) { benchKeySchedule(b, ECC_SM4_CBC_SM3) }

func benchKeySchedule(b *testing.B, id uint16) {
	pm := make([]byte, 48)
	cr, sr := make([]byte, 32), make([]byte, 32)
	h := sm3.Sum(nil)
	suite := cipherSuiteByID(id)
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		ks := masterFromPreMaster(pm, cr, sr)
		ks.keys(suite, cr, sr)
		ks.finished(true, h[:])
		ks.finished(false, h[:])
		ks.release()
	}
}

// BenchmarkKeyScheduleNaive is the same with a fresh HMAC per PRF step (for reference).
func BenchmarkKeyScheduleNaive(b *testing.B) {
	pm := make([]byte, 48)
	cr, sr := make([]byte, 32), make([]byte, 32)
	h := sm3.Sum(nil)
	naive := func(secret []byte, n int, label string, seed []byte) []byte {
		seed = append([]byte(label), seed...)
		var out []byte
		mac := func(data ...[]byte) []byte {
			m := hmac.New(sm3.New, secret)
			for _, d := range data {
				m.Write(d)
			}
			return m.Sum(nil)
		}
		a := mac(seed)
		for len(out) < n {
			out = append(out, mac(a, seed)...)
			a = mac(a)
		}
		return out[:n]
	}
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		m := naive(pm, 48, "master secret", append(append([]byte{}, cr...), sr...))
		naive(m, 40, "key expansion", append(append([]byte{}, sr...), cr...))
		naive(m, 12, "client finished", h[:])
		naive(m, 12, "server finished", h[:])
	}
}

// ---- server handshake CPU: replay recorded client flights ----

// detRand returns a constant byte, so the server's output does not depend
// on how its random reads are split (ecdh key generation may read an extra
// byte at random).
type detRand struct{}

func (d *detRand) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 0x5c
	}
	return len(b), nil
}

// replayConn serves recorded input and discards output.
type replayConn struct {
	in  []byte
	out int
}

func (r *replayConn) Read(b []byte) (int, error) {
	if len(r.in) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.in)
	r.in = r.in[n:]
	return n, nil
}
func (r *replayConn) Write(b []byte) (int, error)      { r.out += len(b); return len(b), nil }
func (r *replayConn) Close() error                     { return nil }
func (r *replayConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (r *replayConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (r *replayConn) SetDeadline(time.Time) error      { return nil }
func (r *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (r *replayConn) SetWriteDeadline(time.Time) error { return nil }

// recordingConn records what the client wrote.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recordingConn) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.buf.Write(b)
	r.mu.Unlock()
	return r.Conn.Write(b)
}

// recordClientFlights runs one handshake with a deterministic server and
// returns the client's bytes (valid for any server run with the same Rand).
func recordClientFlights(b *testing.B, scfg func() *Config, ccfg *Config) []byte {
	c1, c2 := net.Pipe()
	rc := &recordingConn{Conn: c1}
	cli, srv := Client(rc, ccfg), Server(c2, scfg())
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	c1.Close()
	c2.Close()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]byte(nil), rc.buf.Bytes()...)
}

type serverHandshakeCase struct {
	name   string
	suite  uint16
	mutual bool
	resume bool
	verify bool
}

var serverHandshakeCases = []serverHandshakeCase{
	{"ECC", ECC_SM4_GCM_SM3, false, false, false},
	{"ECC-CBC", ECC_SM4_CBC_SM3, false, false, false},
	{"ECDHE", ECDHE_SM4_GCM_SM3, true, false, false},
	{"ECDHE-verifychain", ECDHE_SM4_GCM_SM3, true, false, true},
	{"resumed", ECC_SM4_GCM_SM3, false, true, false},
	// Added after the cases above, which keep their definitions: the
	// fourth suite (BenchmarkResumeRatio has resumption for all four).
	{"ECDHE-CBC", ECDHE_SM4_CBC_SM3, true, false, false},
}

// caseFlights returns the server configuration of tc (a fresh Config per
// call, all sharing one session store) and the recorded client flights of
// one handshake of tc, after a priming full handshake when tc resumes.
func caseFlights(b *testing.B, p *testPKI, tc serverHandshakeCase) (scfg func() *Config, flights []byte) {
	store := NewLRUSessionStore(100, time.Hour)
	scfg = func() *Config {
		c := p.serverConfig()
		c.CipherSuites = []uint16{tc.suite}
		c.Rand = &detRand{}
		c.SessionStore = store
		c.SessionTicketsDisabled = true
		if !tc.verify {
			c.ClientCAs = nil
		}
		return c
	}
	ccfg := p.clientConfig()
	ccfg.CipherSuites = []uint16{tc.suite}
	if !tc.mutual {
		ccfg.Certificates = nil
	}
	if tc.resume {
		ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
		recordClientFlights(b, scfg, ccfg) // full handshake fills caches
	}
	return scfg, recordClientFlights(b, scfg, ccfg)
}

// serverHandshakeOp returns one server handshake of tc replayed from
// recorded client flights: only server work runs, on the calling goroutine.
func serverHandshakeOp(b *testing.B, p *testPKI, tc serverHandshakeCase) func() {
	scfg, flights := caseFlights(b, p, tc)
	cfg := scfg()
	return func() {
		srv := Server(&replayConn{in: flights}, cfg)
		if err := srv.Handshake(); err != nil {
			b.Fatal(err)
		}
		if srv.didResume != tc.resume {
			b.Fatal("resumption mismatch")
		}
	}
}

func BenchmarkServerHandshake(b *testing.B) {
	p := loadPKI(b)
	for _, tc := range serverHandshakeCases {
		b.Run(tc.name, func(b *testing.B) {
			hs := serverHandshakeOp(b, p, tc)
			b.ReportAllocs()
			b.ResetTimer()
			defer cpuTimer(b)()
			for b.Loop() {
				hs()
			}
		})
	}
}

// ---- interleaved ratios ----

// baselineOps returns the operations the ratios are made of, each
// exactly as the server performs it alone: one SM2 sign of the ECC
// ServerKeyExchange's signed data, one SM2 decrypt of a 48-byte pre-master,
// one SM2 key agreement (ephemeral key generation + SM2MQV + KDF, through
// the same smkey interface), one SM2 verification (the client's
// CertificateVerify, for reference), and the key schedule.
func baselineOps(b *testing.B, p *testPKI, suiteID uint16) (sign, decrypt, keyAgree, verify, keySchedule func()) {
	ctx := context.Background()
	msg := make([]byte, 64+3+len(p.server.EncCertificate))
	sign = func() {
		if _, err := signSM2(ctx, p.server.SignKey, rand.Reader, msg); err != nil {
			b.Fatal(err)
		}
	}
	ct, err := sm2.EncryptASN1(rand.Reader, p.server.EncLeaf.PublicKey.(*ecdsaPublicKey), make([]byte, 48))
	if err != nil {
		b.Fatal(err)
	}
	dec := p.server.EncKey.(cryptoDecrypter)
	decrypt = func() {
		if _, err := smkey.Decrypt(ctx, dec, rand.Reader, ct, nil); err != nil {
			b.Fatal(err)
		}
	}
	cliEph, _ := ecdh.P256().GenerateKey(rand.Reader)
	cliStatic, _ := ecdhPublic(p.client.EncLeaf)
	ka := smkey.AsKeyAgreement(p.server.EncKey)
	keyAgree = func() {
		eph, err := ecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ka.SM2KeyAgree(ctx, eph, cliStatic, cliEph.PublicKey(), false, 48, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	vmsg := make([]byte, 32)
	sig, err := signSM2(ctx, p.client.SignKey, rand.Reader, vmsg)
	if err != nil {
		b.Fatal(err)
	}
	verify = func() {
		if !verifySM2(p.client.Leaf.PublicKey, vmsg, sig) {
			b.Fatal("verify")
		}
	}
	pm := make([]byte, 48)
	cr, sr := make([]byte, 32), make([]byte, 32)
	h := sm3.Sum(nil)
	suite := cipherSuiteByID(suiteID) // "that key schedule": CBC derives a longer key block
	keySchedule = func() {
		ks := masterFromPreMaster(pm, cr, sr)
		ks.keys(suite, cr, sr)
		ks.finished(true, h[:])
		ks.finished(false, h[:])
		ks.release()
	}
	return
}

// BenchmarkHandshakeRatio measures the server handshakes and their
// baselines interleaved on one locked thread: every round runs a few of
// each operation in turn and charges each its own thread CPU time. Load
// changes on a shared machine then hit numerator and denominator alike,
// which separate benchmarks (minutes apart) do not. Reported:
//
//	ECC:     ratio = hs / (sign + decrypt + keysched)          target ≤ 1.25
//	         (keysched of the handshake's suite: CBC's key block is longer)
//	ECDHE*:  ratio = hs / (sign + keyagree + keysched)         target ≤ 1.25
//	         ratio+verify = hs / (sign + keyagree + keysched + verify)
//	resumed: ratio = resumed hs / full ECC hs                  target ≤ 0.10
//
// ECDHE's ratio+verify adds the one SM2 verification the server cannot
// skip (the client's CertificateVerify: client certificates are mandatory
// with ECDHE) to the baseline; both figures are reported. Every
// operation's ns/op (thread CPU on Linux, else process CPU).
func BenchmarkHandshakeRatio(b *testing.B) {
	p := loadPKI(b)
	full := serverHandshakeOp(b, p, serverHandshakeCases[0])
	for _, tc := range serverHandshakeCases {
		b.Run(tc.name, func(b *testing.B) {
			sign, decrypt, keyAgree, verify, keySchedule := baselineOps(b, p, tc.suite)
			hs := serverHandshakeOp(b, p, tc)
			var ops []*timedOp
			add := func(name string, fn func()) *timedOp {
				op := &timedOp{name: name, fn: fn}
				ops = append(ops, op)
				return op
			}
			h := add("hs", hs)
			var s, d, k, v, f *timedOp
			if tc.resume {
				f = add("full", full)
			} else {
				s = add("sign", sign)
				if tc.suite == ECC_SM4_GCM_SM3 || tc.suite == ECC_SM4_CBC_SM3 {
					d = add("decrypt", decrypt)
				} else {
					d = add("keyagree", keyAgree)
					v = add("verify", verify)
				}
				k = add("keysched", keySchedule)
			}
			runInterleaved(b, ops, 4)
			for _, op := range ops {
				b.ReportMetric(op.perOp(), op.name+"-ns")
			}
			if tc.resume {
				b.ReportMetric(h.perOp()/f.perOp(), "ratio")
				return
			}
			base := s.perOp() + d.perOp() + k.perOp()
			b.ReportMetric(h.perOp()/base, "ratio")
			if v != nil {
				b.ReportMetric(h.perOp()/(base+v.perOp()), "ratio+verify")
			}
		})
	}
}

type timedOp struct {
	name string
	fn   func()
	// excluded, when set, returns (and resets) CPU time spent inside fn on
	// work that is not the server's (see BenchmarkResumeRatio); it is
	// subtracted.
	excluded func() int64
	total    int64
	n        int
}

func (o *timedOp) perOp() float64 { return float64(o.total) / float64(o.n) }

// runInterleaved runs reps of each op per round, b.N rounds, timing each
// batch with the thread's CPU clock.
func runInterleaved(b *testing.B, ops []*timedOp, reps int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock := threadCPU
	if clock() < 0 {
		clock = processCPU
	}
	for _, op := range ops { // warm up pools and caches
		op.fn()
		if op.excluded != nil {
			op.excluded()
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, op := range ops {
			t0 := clock()
			for range reps {
				op.fn()
			}
			op.total += clock() - t0
			if op.excluded != nil {
				op.total -= op.excluded()
			}
			op.n += reps
		}
	}
}

// ---- record layer ----

// loopConn is a single-goroutine in-memory byte pipe.
type loopConn struct {
	buf []byte
	off int
}

func (l *loopConn) Read(b []byte) (int, error) {
	if l.off == len(l.buf) {
		return 0, io.EOF
	}
	n := copy(b, l.buf[l.off:])
	l.off += n
	if l.off == len(l.buf) {
		l.buf, l.off = l.buf[:0], 0
	}
	return n, nil
}
func (l *loopConn) Write(b []byte) (int, error)      { l.buf = append(l.buf, b...); return len(b), nil }
func (l *loopConn) Close() error                     { return nil }
func (l *loopConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (l *loopConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (l *loopConn) SetDeadline(time.Time) error      { return nil }
func (l *loopConn) SetReadDeadline(time.Time) error  { return nil }
func (l *loopConn) SetWriteDeadline(time.Time) error { return nil }

// connectedPair returns a writer and a reader Conn sharing keys over a loopConn.
func connectedPair(b testing.TB, suite uint16) (w, r *Conn, lc *loopConn) {
	s := cipherSuiteByID(suite)
	key := bytes.Repeat([]byte{3}, 64)
	mk := func() *recordCipher {
		rc, err := newRecordCipher(s, key[:32], key[32:48], key[48:48+s.ivLen])
		if err != nil {
			b.Fatal(err)
		}
		return rc
	}
	lc = &loopConn{buf: make([]byte, 0, 1<<20)}
	cfg := &Config{}
	w, r = &Conn{core: record.Conn{Raw: lc, Name: "tlcp"}, config: cfg}, &Conn{core: record.Conn{Raw: lc, Name: "tlcp"}, config: cfg}
	w.out.cipher, r.in.cipher = mk(), mk()
	w.core.SetHandshakeComplete()
	r.core.SetHandshakeComplete()
	return
}

func benchRecordRoundTrip(b *testing.B, suite uint16, size int) {
	w, r, _ := connectedPair(b, suite)
	data := make([]byte, size)
	got := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, got); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordGCM16K: Conn.Write + Conn.Read of one 16 KiB record.
func BenchmarkRecordGCM16K(b *testing.B) { benchRecordRoundTrip(b, ECC_SM4_GCM_SM3, 16384) }

// BenchmarkRecordCBC16K: the same for SM4-CBC + HMAC-SM3.
func BenchmarkRecordCBC16K(b *testing.B) { benchRecordRoundTrip(b, ECC_SM4_CBC_SM3, 16384) }

// BenchmarkRawGCM16K: gmsm SM4-GCM seal + open of the same bytes (baseline).
func BenchmarkRawGCM16K(b *testing.B) {
	block, _ := sm4.NewCipher(make([]byte, 16))
	aead, _ := cipher.NewGCM(block)
	nonce := make([]byte, 12)
	aad := make([]byte, 13)
	data := make([]byte, 16384)
	buf := make([]byte, 0, 16384+16)
	b.SetBytes(16384)
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		ct := aead.Seal(buf[:0], nonce, data, aad)
		if _, err := aead.Open(ct[:0], nonce, ct, aad); err != nil {
			b.Fatal(err)
		}
	}
}

const write64K = 65536

// BenchmarkCBCEncrypt64K compares the encryption step of a 64 KiB write:
// serial CBC (gmsm's CBC encrypter, one block after another) against this
// package's side-by-side encryption of the write's records.
func BenchmarkCBCEncrypt64K(b *testing.B) {
	block, _ := sm4.NewCipher(make([]byte, 16))
	b.Run("serial", func(b *testing.B) {
		buf := make([]byte, write64K+4*64)
		iv := make([]byte, 16)
		b.SetBytes(write64K)
		b.ReportAllocs()
		defer cpuTimer(b)()
		for b.Loop() {
			// One CBC chain per 16 KiB record, as a naive sender does.
			for off := 0; off < len(buf); off += len(buf) / 4 {
				cipher.NewCBCEncrypter(block, iv).CryptBlocks(buf[off:off+len(buf)/4], buf[off:off+len(buf)/4])
			}
		}
	})
	b.Run("batched", func(b *testing.B) {
		rc, _ := newRecordCipher(cipherSuiteByID(ECC_SM4_CBC_SM3), make([]byte, 32), make([]byte, 16), make([]byte, 16))
		hc := &halfConn{cipher: rc}
		// Lay out the records exactly as Conn.Write does for a 64 KiB write
		// (cbcRecordSize: 16 records of 4 KiB), then time only the
		// side-by-side encryption.
		var buf []byte
		var starts []int
		size := cbcRecordSize(write64K)
		for off := 0; off < write64K; off += size {
			body := rc.sealedLen(size)
			starts = append(starts, len(buf)+recordHeaderLen)
			buf = append(buf, 23, 1, 1, byte(body>>8), byte(body))
			buf = append(buf, make([]byte, body)...)
		}
		b.SetBytes(write64K)
		b.ReportAllocs()
		defer cpuTimer(b)()
		for b.Loop() {
			hc.cbcEncryptBatch(rc, buf, starts)
		}
	})
}

// BenchmarkRecordCBCWrite64K: a whole 64 KiB Conn.Write (MAC, padding, IVs,
// side-by-side encryption, headers).
func BenchmarkRecordCBCWrite64K(b *testing.B) {
	w, _, lc := connectedPair(b, ECC_SM4_CBC_SM3)
	data := make([]byte, write64K)
	b.SetBytes(write64K)
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		lc.buf = lc.buf[:0]
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordCBCWrite1K: a 1 KiB Conn.Write (a small HTTP response):
// two records of 512 bytes, encrypted side by side (cbcRecordSize).
func BenchmarkRecordCBCWrite1K(b *testing.B) {
	w, _, lc := connectedPair(b, ECC_SM4_CBC_SM3)
	data := make([]byte, 1024)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		lc.buf = lc.buf[:0]
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNaiveCBCSeal64K: the baseline — per 16 KiB record a fresh
// HMAC-SM3 and a serial CBC encryption.
func BenchmarkNaiveCBCSeal64K(b *testing.B) {
	block, _ := sm4.NewCipher(make([]byte, 16))
	macKey := make([]byte, 32)
	data := make([]byte, write64K)
	b.SetBytes(write64K)
	b.ReportAllocs()
	defer cpuTimer(b)()
	for b.Loop() {
		var out []byte
		for off := 0; off < len(data); off += maxPlaintext {
			frag := data[off : off+maxPlaintext]
			m := hmac.New(sm3.New, macKey)
			m.Write(make([]byte, 13))
			m.Write(frag)
			p := append(append([]byte{}, frag...), m.Sum(nil)...)
			pad := 16 - len(p)%16
			for i := 0; i < pad; i++ {
				p = append(p, byte(pad-1))
			}
			iv := make([]byte, 16)
			rand.Read(iv)
			cipher.NewCBCEncrypter(block, iv).CryptBlocks(p, p)
			out = append(append(out, iv...), p...)
		}
		benchSink = out
	}
}

// benchSink keeps a benchmark's output alive.
var benchSink []byte

type (
	ecdsaPublicKey  = ecdsa.PublicKey
	cryptoDecrypter = crypto.Decrypter
)
