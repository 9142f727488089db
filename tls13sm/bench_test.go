package tls13sm

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"

	gmecdh "github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
)

// Baselines measured in the same run as the figures they are compared to.

func BenchmarkBaselineSM2Sign(b *testing.B) {
	p := loadPKI(b)
	msg := make([]byte, 130)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := p.server.PrivateKey.Sign(rand.Reader, msg, sm2SignerOpts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBaselineCurveSM2KeygenECDH(b *testing.B) {
	peer, _ := gmecdh.P256().GenerateKey(rand.Reader)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		k, err := gmecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.ECDH(peer.PublicKey()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBaselineKeygenECDHSign(b *testing.B) {
	p := loadPKI(b)
	msg := make([]byte, 130)
	peer, _ := gmecdh.P256().GenerateKey(rand.Reader)
	for i := 0; i < b.N; i++ {
		k, _ := gmecdh.P256().GenerateKey(rand.Reader)
		k.ECDH(peer.PublicKey())
		p.server.PrivateKey.Sign(rand.Reader, msg, sm2SignerOpts)
	}
}

// BenchmarkKeySchedule is the whole server-side TLS 1.3 schedule of a full
// handshake: handshake secret, both handshake traffic secrets with keys and
// IVs, both Finished MACs, master secret, both application secrets with keys
// and IVs, and the resumption master + ticket PSK.
func BenchmarkKeySchedule(b *testing.B) {
	var ks keySchedule
	var hs, chs, shs, ms, cap_, sap, res, psk, derived, fin [32]byte
	var key [16]byte
	var iv [12]byte
	shared := make([]byte, 32)
	th := sm3.Sum([]byte("transcript"))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ks.extract(hs[:], derivedNoPSKSecret[:], shared)
		ks.m.setKey(hs[:])
		ks.expandLabelKeyed(chs[:], "c hs traffic", th[:])
		ks.expandLabelKeyed(shs[:], "s hs traffic", th[:])
		ks.expandLabelKeyed(derived[:], "derived", emptyHash[:])
		ks.trafficKeys(key[:], iv[:], shs[:])
		ks.trafficKeys(key[:], iv[:], chs[:])
		ks.finishedMAC(fin[:], shs[:], th[:])
		ks.extract(ms[:], derived[:], zeroKey[:])
		ks.m.setKey(ms[:])
		ks.expandLabelKeyed(cap_[:], "c ap traffic", th[:])
		ks.expandLabelKeyed(sap[:], "s ap traffic", th[:])
		ks.expandLabelKeyed(res[:], "res master", th[:])
		ks.trafficKeys(key[:], iv[:], sap[:])
		ks.finishedMAC(fin[:], chs[:], th[:])
		ks.trafficKeys(key[:], iv[:], cap_[:])
		ks.expandLabel(psk[:], res[:], "resumption", []byte{0})
	}
}

// recordPair is a connected pair of halfConns over an in-memory buffer,
// exercising writeRecordLocked / readRecord exactly as connections do.
type memConn struct {
	net.Conn
	buf []byte
	off int
}

func (m *memConn) Write(b []byte) (int, error) { m.buf = append(m.buf, b...); return len(b), nil }
func (m *memConn) Read(b []byte) (int, error) {
	if m.off == len(m.buf) {
		m.buf, m.off = m.buf[:0], 0
		return 0, io.EOF
	}
	n := copy(b, m.buf[m.off:])
	m.off += n
	if m.off == len(m.buf) {
		m.buf, m.off = m.buf[:0], 0
	}
	return n, nil
}

func benchRecords(b *testing.B, suite uint16, size int) {
	var ks keySchedule
	s := cipherSuiteByID(suite)
	secret := make([]byte, 32)
	mc := &memConn{buf: make([]byte, 0, 1<<16)}
	w := &Conn{conn: mc}
	r := &Conn{conn: mc}
	w.out.setTrafficSecret(&ks, s, secret)
	r.in.setTrafficSecret(&ks, s, secret)
	w.isHandshakeComplete.Store(true)
	r.isHandshakeComplete.Store(true)
	data := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.writeRecordLocked(recordTypeApplicationData, data); err != nil {
			b.Fatal(err)
		}
		if err := r.readRecord(); err != nil {
			b.Fatal(err)
		}
		if len(r.input) != size {
			b.Fatal("short record")
		}
		r.input = nil
	}
}

func BenchmarkRecordGCM16K(b *testing.B) { benchRecords(b, TLS_SM4_GCM_SM3, 16384) }
func BenchmarkRecordCCM16K(b *testing.B) { benchRecords(b, TLS_SM4_CCM_SM3, 16384) }
func BenchmarkRecordGCM1K(b *testing.B)  { benchRecords(b, TLS_SM4_GCM_SM3, 1024) }

// BenchmarkBaselineRawGCM16K is raw gmsm SM4-GCM seal + open of 16 KiB.
func BenchmarkBaselineRawGCM16K(b *testing.B) {
	blk, _ := sm4.NewCipher(make([]byte, 16))
	a, _ := cipher.NewGCM(blk)
	nonce := make([]byte, 12)
	buf := make([]byte, 16384, 16384+16)
	hdr := make([]byte, 5)
	b.SetBytes(16384)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ct := a.Seal(buf[:0], nonce, buf, hdr)
		pt, err := a.Open(ct[:0], nonce, ct, hdr)
		if err != nil {
			b.Fatal(err)
		}
		buf = pt
	}
}

// handshakePair runs full (or resumed) handshakes over in-memory pipes and
// reports the server's share of CPU via separate timing is not possible with
// both in one process, so BenchmarkServerHandshake* measure client+server
// and BenchmarkServerOnly* replay a recorded client flight.
type flightConn struct {
	net.Conn
	in  []byte
	out []byte
}

func (f *flightConn) Read(b []byte) (int, error) {
	if len(f.in) == 0 {
		return 0, io.EOF
	}
	n := copy(b, f.in)
	f.in = f.in[n:]
	return n, nil
}
func (f *flightConn) Write(b []byte) (int, error) { f.out = append(f.out, b...); return len(b), nil }
func (f *flightConn) Close() error                { return nil }

// serverCPU measures the server side of a handshake alone: a client runs
// over a pipe once per iteration with the timer stopped, and the server's
// work is timed by running it on the same goroutine through lockstep conns.
func benchServerHandshake(b *testing.B, resume bool) {
	srvCfg, cliCfg := testConfigs(b)
	cliCfg.Certificates = nil
	if resume {
		// prime the client cache
		a, c := net.Pipe()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); s := Server(a, srvCfg); s.Handshake(); s.Write([]byte{1}); s.Close() }()
		cc := Client(c, cliCfg)
		cc.Handshake()
		cc.Read(make([]byte, 1))
		cc.Close()
		wg.Wait()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Client first flight.
		cli := &flightConn{}
		cc := Client(cli, cliCfg)
		hs := &clientHandshakeState{c: cc, ctx: context.Background(), config: cliCfg, transcript: sm3.New()}
		hs.makeClientHello()
		hs.loadSession()
		hs.computeBinders()
		cc.writeHandshake(hs.hello.raw, hs.transcript)
		srvIn := append([]byte(nil), cli.out...)
		srvConn := &flightConn{in: srvIn}
		b.StartTimer()
		// Server: reads ClientHello, writes its flight, then stops at
		// reading the client Finished (EOF) — that is all its crypto except
		// the Finished check and the ticket (measured in KeySchedule).
		s := Server(srvConn, srvCfg)
		s.Handshake()
	}
}

func BenchmarkServerFullHandshake(b *testing.B)    { benchServerHandshake(b, false) }
func BenchmarkServerResumedHandshake(b *testing.B) { benchServerHandshake(b, true) }

var _ = sm2.P256
