package tls13sm

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	gmecdh "github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// The Ratio benchmarks interleave the subject and its baseline inside one
// loop and time both with the thread's CPU clock (the goroutine is locked
// to its OS thread), so other processes on a shared machine do not skew the
// ratio; subject/baseline is reported as a custom metric next to both
// absolute CPU times.

// ratioLoop runs subject then baseline b.N times on a locked thread and
// returns the thread CPU time each took in all.
func ratioLoop(b *testing.B, subject, baseline func()) (subj, base time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := 0; i < b.N; i++ {
		t0 := threadCPU()
		subject()
		t1 := threadCPU()
		baseline()
		t2 := threadCPU()
		subj += t1 - t0
		base += t2 - t1
	}
	return subj, base
}

// keygenECDH is a baseline: one curveSM2 key generation (with the public
// point encoded) and one ECDH with peer.
func keygenECDH(peer *gmecdh.PublicKey) {
	k, _ := gmecdh.P256().GenerateKey(rand.Reader)
	_ = k.PublicKey().Bytes()
	k.ECDH(peer)
}

func report(b *testing.B, subject, baseline time.Duration, name string) {
	b.ReportMetric(float64(subject.Nanoseconds())/float64(b.N), "subject-ns/op")
	b.ReportMetric(float64(baseline.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(float64(subject)/float64(baseline), name)
}

// scheduleScratch holds a keySchedule and every output of the schedule
// benchmarks below, so that they allocate nothing.
type scheduleScratch struct {
	keySchedule
	hs        handshakeSecret
	chs, shs  trafficSecret
	cap_, sap trafficSecret
	ms        masterSecret
	res       resumptionMasterSecret
	psk       resumptionPSK
	derived   derivedSecret
	cfk, sfk  finishedKey
	fin       [32]byte
	key       [16]byte
	iv        [12]byte
	master    sm3state.HMACState
}

// fullSchedule is the server's key schedule of a full handshake exactly as
// handshake_server_tls13.go runs it: handshake secret, then
// scheduleFromHandshakeSecret.
func fullSchedule(x *scheduleScratch, shared, th []byte) {
	x.keySchedule.extractHandshakeNoPSK(&x.hs, shared)
	scheduleFromHandshakeSecret(x, th)
}

// scheduleFromHandshakeSecret is what full and resumed handshakes share
// once x.hs holds the handshake secret: handshake traffic secrets with keys,
// IVs and finished keys, both Finished MACs, master secret, application
// secrets with keys and IVs, resumption master secret and one ticket PSK.
func scheduleFromHandshakeSecret(x *scheduleScratch, th []byte) {
	ks := &x.keySchedule
	hs, chs, shs, ms, cap_, sap, res, psk, derived, fin, cfk, sfk := &x.hs, &x.chs, &x.shs, &x.ms, &x.cap_, &x.sap, &x.res, &x.psk, &x.derived, &x.fin, &x.cfk, &x.sfk
	key, iv, master := &x.key, &x.iv, &x.master
	ks.handshakeTrafficSecrets(chs, shs, derived, hs, th)
	ks.trafficKeysFinished(key[:], iv[:], sfk, shs)
	ks.trafficKeysFinished(key[:], iv[:], cfk, chs)
	ks.finishedMAC(fin[:], sfk, th)
	ks.extractMaster(ms, derived)
	ks.m.SetKey(ms[:])
	ks.expandLabelKeyed(cap_[:], "c ap traffic", th)
	ks.expandLabelKeyed(sap[:], "s ap traffic", th)
	ks.m.SaveState(master)
	ks.trafficKeys(key[:], iv[:], sap)
	ks.finishedMAC(fin[:], cfk, th)
	ks.trafficKeys(key[:], iv[:], cap_)
	ks.m.LoadState(master)
	ks.resumptionMasterKeyed(res, th)
	ks.resumptionPSK(psk, res, zeroKey[:1])
}

// BenchmarkRatioKeyScheduleVsSign: whole schedule of a full handshake vs one
// SM2 sign (target ≤ 0.70).
func BenchmarkRatioKeyScheduleVsSign(b *testing.B) {
	p := loadPKI(b)
	ks := new(scheduleScratch)
	shared := make([]byte, 32)
	th := sm3.Sum([]byte("transcript"))
	msg := signedMessage(serverSignatureContext, th[:])
	subj, base := ratioLoop(b, func() { fullSchedule(ks, shared, th[:]) }, func() {
		if _, err := p.server.PrivateKey.Sign(rand.Reader, msg, sm2SignerOpts.GMSM()); err != nil {
			b.Fatal(err)
		}
	})
	report(b, subj, base, "schedule/sign")
}

// resumedSchedule is the server's key schedule of a psk_dhe_ke resumption
// that issues a new ticket: binder key and binder MAC, then the same
// secrets as fullSchedule with the PSK's "derived" salt.
func resumedSchedule(x *scheduleScratch, psk *resumptionPSK, shared, th []byte) {
	ks := &x.keySchedule
	var early earlySecret
	var bk binderKey
	var derivedEarly derivedSecret
	ks.pskSecrets(&early, &bk, &derivedEarly, psk)
	ks.binderMAC(x.fin[:], &bk, th)
	ks.extractHandshake(&x.hs, &derivedEarly, shared)
	scheduleFromHandshakeSecret(x, th)
}

// BenchmarkRatioResumedScheduleVsECDH: the key schedule alone of a
// psk_dhe_ke resumption vs curveSM2 keygen + ECDH. It explains the
// resumption ratio: about 80 SM3 compressions that RFC 8446 §7.1 requires
// (two per HKDF-Expand-Label, four per HMAC under a new key) cost about
// 0.3 × (keygen + ECDH) here before any transcript hashing, record
// protection or ticket sealing.
func BenchmarkRatioResumedScheduleVsECDH(b *testing.B) {
	x := new(scheduleScratch)
	shared, psk := make([]byte, 32), new(resumptionPSK)
	th := sm3.Sum([]byte("transcript"))
	peer, _ := gmecdh.P256().GenerateKey(rand.Reader)
	subj, base := ratioLoop(b, func() { resumedSchedule(x, psk, shared, th[:]) }, func() { keygenECDH(peer.PublicKey()) })
	report(b, subj, base, "schedule/(keygen+ecdh)")
}

// rawGCMSealOpen returns the baseline of the record benchmarks: raw gmsm
// SM4-GCM seal + open of one 16 KiB buffer, in place.
func rawGCMSealOpen(b *testing.B) func() {
	blk, _ := sm4.NewCipher(make([]byte, 16))
	a, _ := cipher.NewGCM(blk)
	nonce := make([]byte, 12)
	buf := make([]byte, 16384, 16384+16)
	hdr := make([]byte, 5)
	return func() {
		ct := a.Seal(buf[:0], nonce, buf, hdr)
		pt, err := a.Open(ct[:0], nonce, ct, hdr)
		if err != nil {
			b.Fatal(err)
		}
		buf = pt
	}
}

// BenchmarkRatioRecordGCMVsRaw: a 16 KiB record written and read through the
// record layer vs raw gmsm SM4-GCM seal + open (reported as throughput
// ratio record/raw; target ≥ 0.85).
func BenchmarkRatioRecordGCMVsRaw(b *testing.B) {
	var ks keySchedule
	s := cipherSuiteByID(TLS_SM4_GCM_SM3)
	mc := &memConn{buf: make([]byte, 0, 1<<16)}
	w, r := &Conn{core: newCore(mc)}, &Conn{core: newCore(mc)}
	w.out.setTrafficSecret(&ks, s, new(trafficSecret))
	r.in.setTrafficSecret(&ks, s, new(trafficSecret))
	r.core.SetHandshakeComplete()
	data := make([]byte, 16384)
	raw := rawGCMSealOpen(b)
	b.SetBytes(16384)
	b.ReportAllocs()
	subj, base := ratioLoop(b, func() {
		if err := w.writeRecordLocked(recordTypeApplicationData, data); err != nil {
			b.Fatal(err)
		}
		if err := r.readRecord(); err != nil || len(r.core.Input) != len(data) {
			b.Fatal(err)
		}
		r.core.Input = nil
	}, raw)
	b.ReportMetric(float64(subj.Nanoseconds())/float64(b.N), "record-ns/op")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(base)/float64(subj), "record/raw-throughput")
}

// constReader returns the same byte forever: with it the server's random,
// key share and signature repeat exactly, even though gmsm's key generation
// may read one extra byte (randutil.MaybeReadByte).
type constReader byte

func (c constReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(c)
	}
	return len(b), nil
}

// recordingConn records what is read from it.
type recordingConn struct {
	net.Conn
	rec []byte
}

func (r *recordingConn) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.rec = append(r.rec, b[:n]...)
	return n, err
}

// recordClientStream runs a real handshake and returns every byte the
// server read (ClientHello, CCS, the client's second flight).
func recordClientStream(b *testing.B, srvCfg, cliCfg *Config) []byte {
	a, c := tcpPair(b)
	rc := &recordingConn{Conn: a}
	done := make(chan error, 1)
	go func() {
		s := Server(rc, srvCfg)
		err := s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{1})
		}
		done <- err
	}()
	cc := Client(c, cliCfg)
	if err := cc.Handshake(); err != nil {
		b.Fatal(err)
	}
	cc.Read(make([]byte, 1)) // takes the ticket
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	a.Close()
	c.Close()
	return rc.rec
}

// serverBenchStream returns a deterministic server configuration and the
// recorded client stream of one one-way handshake with it: full, or
// resumed with a ticket from a priming handshake.
func serverBenchStream(b *testing.B, resume bool) (*Config, []byte) {
	srvCfg, cliCfg := testConfigs(b)
	cliCfg.Certificates = nil
	now := time.Now()
	clock := func() time.Time { return now }
	srvCfg.Rand, cliCfg.Rand = constReader(0x11), constReader(0x22)
	srvCfg.Time, cliCfg.Time = clock, clock
	if !resume {
		cliCfg.ClientSessionCache = nil
	} else {
		recordClientStream(b, srvCfg, cliCfg) // puts a ticket in the client cache
	}
	return srvCfg, recordClientStream(b, srvCfg, cliCfg)
}

func benchRatioServer(b *testing.B, resume bool) {
	srvCfg, stream := serverBenchStream(b, resume)
	p := loadPKI(b)
	peer, _ := gmecdh.P256().GenerateKey(rand.Reader)
	msg := make([]byte, 130)
	b.ReportAllocs()
	subj, base := ratioLoop(b, func() {
		srv := Server(&flightConn{in: stream}, srvCfg)
		if err := srv.Handshake(); err != nil {
			b.Fatal(err)
		}
		if srv.didResume != resume {
			b.Fatalf("resumed = %v", srv.didResume)
		}
	}, func() {
		keygenECDH(peer.PublicKey())
		if !resume {
			p.server.PrivateKey.Sign(rand.Reader, msg, sm2SignerOpts.GMSM())
		}
	})
	name := "server/(keygen+ecdh+sign)"
	if resume {
		name = "server/(keygen+ecdh)"
	}
	report(b, subj, base, name)
}

// flightConn serves a recorded input stream and discards output.
type flightConn struct {
	net.Conn
	in []byte
}

func (f *flightConn) Read(b []byte) (int, error) {
	if len(f.in) == 0 {
		return 0, errors.New("end of recorded stream")
	}
	n := copy(b, f.in)
	f.in = f.in[n:]
	return n, nil
}
func (f *flightConn) Write(b []byte) (int, error)      { return len(b), nil }
func (f *flightConn) Close() error                     { return nil }
func (f *flightConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkRatioServerFull: server CPU of a full handshake (one-way auth,
// ticket issued) vs curveSM2 keygen + ECDH + SM2 sign (target ≤ 1.3).
func BenchmarkRatioServerFull(b *testing.B) { benchRatioServer(b, false) }

// BenchmarkRatioServerResumed: psk_dhe_ke resumption (new ticket issued)
// vs keygen + ECDH (target ≤ 1.3).
func BenchmarkRatioServerResumed(b *testing.B) { benchRatioServer(b, true) }
