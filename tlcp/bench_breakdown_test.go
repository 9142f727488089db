package tlcp

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// BenchmarkHandshakeBreakdown splits a full server handshake (ECC with GCM
// and CBC, ECDHE with GCM) into the work the protocol requires and the
// rest, all
// interleaved on one locked thread like BenchmarkHandshakeRatio:
//
//	sign, decrypt | keyagree + verify, keysched   the ratio baselines
//	transcript   SM3 over every handshake message the server hashes
//	             (measured sizes), with its three digests
//	records      both directions' record protection setup (SM4-GCM, or
//	             SM4-ECB and the HMAC-SM3 keys), sealing the server
//	             Finished and opening the client's
//	point        (ECDHE) checking the client's ephemeral point
//
// and reports other-ns = hs − all of them (parsing, marshaling, record
// framing, session storage, allocation), and other-share = other / hs.
//
// For the resumed case (ECC_SM4_GCM_SM3, session ID) the parts are the PRF
// work of a resumed handshake (key block and both Finished from the saved
// master-secret HMAC states: 21 SM3 compressions), its transcript and the
// records, interleaved with the full ECC handshake; floor-ratio = (prf +
// transcript + records) / full is the least the resumed/full ratio can be
// with this SM3 and SM4-GCM.
func BenchmarkHandshakeBreakdown(b *testing.B) {
	p := loadPKI(b)
	for _, tc := range []serverHandshakeCase{serverHandshakeCases[0], serverHandshakeCases[1], serverHandshakeCases[2], serverHandshakeCases[4]} {
		b.Run(tc.name, func(b *testing.B) {
			sign, decrypt, keyAgree, verify, keySchedule := baselineOps(b, p, tc.suite)
			hs := serverHandshakeOp(b, p, tc)
			msgs, clientPoint := handshakeMessages(b, p, tc)
			sums := 3 // CertificateVerify (or a Finished), client and server Finished
			if tc.resume {
				sums = 2
			}
			transcriptOp := func() {
				h := sm3.New()
				var sum [sm3.Size]byte
				for i, m := range msgs {
					h.Write(m)
					if i >= len(msgs)-sums { // CertificateVerify / Finished digests
						h.Sum(sum[:0])
					}
				}
			}
			suite := cipherSuiteByID(tc.suite)
			key := bytes.Repeat([]byte{7}, 32)
			fin := make([]byte, 4+finishedVerifyLen)
			recordsOp := func() {
				w, err := newRecordCipher(suite, nil, key[:16], key[16:20])
				if err != nil {
					b.Fatal(err)
				}
				r, err := newRecordCipher(suite, nil, key[:16], key[16:20])
				if err != nil {
					b.Fatal(err)
				}
				out := &halfConn{cipher: w}
				rec, _, err := out.appendRecords(nil, recordTypeHandshake, fin, maxPlaintext, &detRand{})
				if err != nil {
					b.Fatal(err)
				}
				in := &halfConn{cipher: r}
				if _, err := in.decrypt(rec); err != nil {
					b.Fatal(err)
				}
			}
			pointOp := func() {
				if _, _, err := parseECDHEParams(clientPoint); err != nil {
					b.Fatal(err)
				}
			}
			if tc.resume {
				full := serverHandshakeOp(b, p, serverHandshakeCases[0])
				ks0 := scheduleFromMaster(make([]byte, masterSecretLength))
				var st sm3state.HMACState
				ks0.masterState(&st)
				ks0.release()
				cr, sr, h := make([]byte, 32), make([]byte, 32), make([]byte, 32)
				master := make([]byte, masterSecretLength)
				prfOp := func() {
					ks := scheduleFromState(master, &st)
					ks.keys(suite, cr, sr)
					ks.finished(false, h)
					ks.finished(true, h)
					ks.release()
				}
				ops := []*timedOp{{name: "hs", fn: hs}, {name: "full", fn: full}, {name: "prf", fn: prfOp}, {name: "transcript", fn: transcriptOp}, {name: "records", fn: recordsOp}}
				runInterleaved(b, ops, 4)
				for _, op := range ops {
					b.ReportMetric(op.perOp(), op.name+"-ns")
				}
				floor := ops[2].perOp() + ops[3].perOp() + ops[4].perOp()
				b.ReportMetric(ops[0].perOp()-floor, "other-ns")
				b.ReportMetric(ops[0].perOp()/ops[1].perOp(), "ratio")
				b.ReportMetric(floor/ops[1].perOp(), "floor-ratio")
				return
			}
			ops := []*timedOp{{name: "hs", fn: hs}, {name: "sign", fn: sign}}
			if suite.ecdhe {
				ops = append(ops, &timedOp{name: "keyagree", fn: keyAgree}, &timedOp{name: "verify", fn: verify}, &timedOp{name: "point", fn: pointOp})
			} else {
				ops = append(ops, &timedOp{name: "decrypt", fn: decrypt})
			}
			ops = append(ops, &timedOp{name: "keysched", fn: keySchedule}, &timedOp{name: "transcript", fn: transcriptOp}, &timedOp{name: "records", fn: recordsOp})
			runInterleaved(b, ops, 4)
			other := ops[0].perOp()
			for _, op := range ops {
				b.ReportMetric(op.perOp(), op.name+"-ns")
				if op != ops[0] {
					other -= op.perOp()
				}
			}
			b.ReportMetric(other, "other-ns")
			b.ReportMetric(other/ops[0].perOp(), "other-share")
		})
	}
}

// handshakeMessages returns the handshake messages a server hashes in one
// handshake of tc (both sides' plaintext handshake records, the Finished
// messages standing in at their size) and, for ECDHE, the client's
// ephemeral ECDHE parameters.
func handshakeMessages(b *testing.B, p *testPKI, tc serverHandshakeCase) (msgs [][]byte, clientPoint []byte) {
	scfg, flights := caseFlights(b, p, tc)
	out := &capturingConn{replayConn: replayConn{in: flights}}
	if err := Server(out, scfg()).Handshake(); err != nil {
		b.Fatal(err)
	}
	split := func(recs []byte) (ms [][]byte) {
		var hsBytes []byte
		for len(recs) >= recordHeaderLen {
			n := int(binary.BigEndian.Uint16(recs[3:]))
			if recs[0] == byte(recordTypeHandshake) {
				hsBytes = append(hsBytes, recs[recordHeaderLen:recordHeaderLen+n]...)
			}
			if recs[0] == byte(recordTypeChangeCipherSpec) {
				break // the encrypted Finished follows
			}
			recs = recs[recordHeaderLen+n:]
		}
		for len(hsBytes) >= 4 {
			n := 4 + (int(hsBytes[1])<<16 | int(hsBytes[2])<<8 | int(hsBytes[3]))
			ms = append(ms, hsBytes[:n])
			hsBytes = hsBytes[n:]
		}
		return ms
	}
	server, client := split(out.buf.Bytes()), split(flights)
	fin := make([]byte, 4+finishedVerifyLen)
	if tc.resume {
		// ClientHello, ServerHello, the server Finished (the client's,
		// last, is not hashed).
		return append(append(msgs, client[0]), append(server, fin)...), nil
	}
	// Order: ClientHello, the server's flight, the client's flight,
	// then both Finished.
	msgs = append(msgs, client[0])
	msgs = append(msgs, server...)
	msgs = append(msgs, client[1:]...)
	msgs = append(msgs, fin, fin)
	for _, m := range client {
		if m[0] == typeClientKeyExchange && tc.suite != ECC_SM4_GCM_SM3 && tc.suite != ECC_SM4_CBC_SM3 {
			clientPoint = m[4:]
		}
	}
	return msgs, clientPoint
}

// capturingConn is a replayConn that keeps what the server wrote.
type capturingConn struct {
	replayConn
	buf bytes.Buffer
}

func (c *capturingConn) Write(b []byte) (int, error) { return c.buf.Write(b) }

var _ net.Conn = (*capturingConn)(nil)
