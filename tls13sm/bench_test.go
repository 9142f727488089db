package tls13sm

import (
	"crypto/cipher"
	"crypto/rand"
	"io"
	"net"
	"testing"

	gmcipher "github.com/emmansun/gmsm/cipher"
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
		if _, err := p.server.PrivateKey.Sign(rand.Reader, msg, sm2SignerOpts.GMSM()); err != nil {
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
		_ = k.PublicKey().Bytes()
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
		_ = k.PublicKey().Bytes()
		k.ECDH(peer.PublicKey())
		p.server.PrivateKey.Sign(rand.Reader, msg, sm2SignerOpts.GMSM())
	}
}

// BenchmarkKeySchedule is the whole server-side TLS 1.3 schedule of a full
// handshake (see fullSchedule); it must not allocate.
func BenchmarkKeySchedule(b *testing.B) {
	ks := new(scheduleScratch)
	shared := make([]byte, 32)
	th := sm3.Sum([]byte("transcript"))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		fullSchedule(ks, shared, th[:])
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
	secret := new(trafficSecret)
	mc := &memConn{buf: make([]byte, 0, 1<<16)}
	w := &Conn{core: newCore(mc)}
	r := &Conn{core: newCore(mc)}
	w.out.setTrafficSecret(&ks, s, secret)
	r.in.setTrafficSecret(&ks, s, secret)
	w.core.SetHandshakeComplete()
	r.core.SetHandshakeComplete()
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
		if len(r.core.Input) != size {
			b.Fatal("short record")
		}
		r.core.Input = nil
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

var _ = sm2.P256

// BenchmarkBaselineRawCCM16K is gmsm's cipher.NewCCM seal + open of 16 KiB
// (out of place), the reference for BenchmarkRecordCCM16K.
func BenchmarkBaselineRawCCM16K(b *testing.B) {
	blk, _ := sm4.NewCipher(make([]byte, 16))
	a, _ := gmcipher.NewCCM(blk)
	nonce := make([]byte, 12)
	pt := make([]byte, 16384)
	ct := make([]byte, 0, 16384+16)
	out := make([]byte, 0, 16384)
	hdr := make([]byte, 5)
	b.SetBytes(16384)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ct = a.Seal(ct[:0], nonce, pt, hdr)
		var err error
		if out, err = a.Open(out[:0], nonce, ct, hdr); err != nil {
			b.Fatal(err)
		}
	}
}
