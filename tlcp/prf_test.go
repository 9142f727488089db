package tlcp

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// TestPRFVectors checks the key schedule against protocol-notes §12.4 (cross-checked
// with two implementations and live Tongsuo traffic).
func TestPRFVectors(t *testing.T) {
	pm := append([]byte{1, 1}, bytes.Repeat([]byte{0xab}, 46)...)
	cr, sr := make([]byte, 32), make([]byte, 32)
	for i := range cr {
		cr[i], sr[i] = byte(i), byte(0x20+i)
	}
	ks := masterFromPreMaster(pm, cr, sr)
	if got, want := hex.EncodeToString(ks.master[:]), "616cde4ae90ecdd9cdb4ce001f15a343e00355ac85bfa68cd0b816f86841471f1e1f822d6e4f46c597fc0b2399ef2bf6"; got != want {
		t.Fatalf("master = %s, want %s", got, want)
	}
	kb := make([]byte, 128)
	ks.p.expand(kb, labelKeyExpansion, sr, cr)
	if got, want := hex.EncodeToString(kb), "4acc21735b68d0278a288c0133ccdd1d64051087879b5e8c13ce845f073de542482cc1f4b120efda816b1345076233671de586e7505d3af7a70914487b265ee0d5d7053c22d68af3e104abe68b861dae0d438e265c6697de691a204259f1c375c58a5fa8769ed595de3495cb203be092e25a495e0373b59e6ec00b52c70fda2f"; got != want {
		t.Fatalf("key block = %s\nwant %s", got, want)
	}
	cMAC, sMAC, cKey, sKey, _, _ := ks.keys(cipherSuiteByID(ECC_SM4_CBC_SM3), cr, sr)
	if !bytes.Equal(cMAC, kb[:32]) || !bytes.Equal(sMAC, kb[32:64]) || !bytes.Equal(cKey, kb[64:80]) || !bytes.Equal(sKey, kb[80:96]) {
		t.Fatal("CBC key split wrong")
	}
	_, _, gcKey, gsKey, gcIV, gsIV := ks.keys(cipherSuiteByID(ECC_SM4_GCM_SM3), cr, sr)
	if !bytes.Equal(gcKey, kb[:16]) || !bytes.Equal(gsKey, kb[16:32]) || !bytes.Equal(gcIV, kb[32:36]) || !bytes.Equal(gsIV, kb[36:40]) {
		t.Fatal("GCM key split wrong")
	}
	h := sm3.Sum([]byte("handshake messages"))
	if got := hex.EncodeToString(h[:]); got != "83f62b4838653ba166512ba7cddb191bff74b1feeb81db89c64f8acf878e7ed1" {
		t.Fatalf("SM3 = %s", got)
	}
	if got := hex.EncodeToString(ks.finished(true, h[:])); got != "c2c7dc14ece65d527705b28e" {
		t.Fatalf("client verify_data = %s", got)
	}
	if got := hex.EncodeToString(ks.finished(false, h[:])); got != "ebf3fc1647cc359f2dbf2f52" {
		t.Fatalf("server verify_data = %s", got)
	}
}

// TestPRFCompressions: the PRF costs exactly the SM3 compressions P_SM3
// needs with the HMAC keyed once per secret: 2 per MAC of up to 55 bytes
// (A(i+1) of a 32-byte A(i), A(1) of a Finished seed), 3 per MAC of up to
// 119 bytes (A(i) || label || randoms), 2 per keying. A resumption from
// saved master-secret states thus costs 21 (GCM key block and both
// Finished values).
func TestPRFCompressions(t *testing.T) {
	pm := make([]byte, masterSecretLength)
	cr, sr, h := make([]byte, 32), make([]byte, 32), make([]byte, 32)
	n := 0
	count := func(ks *keySchedule) { ks.p.h.Compressor().CountBlocks(&n) }

	ks := masterFromPreMaster(pm, cr, sr)
	var st sm3state.HMACState
	ks.masterState(&st)
	ks.release()
	for _, tc := range []struct {
		name string
		run  func() *keySchedule
		want int
	}{
		// SetKey(pre-master) 2 + 48 bytes (A(1) 3, 3, A(2) 2, 3) + SetKey(master) 2.
		{"master secret", func() *keySchedule {
			ks := keySchedulePool.Get().(*keySchedule)
			count(ks)
			ks.p.h.SetKey(pm)
			ks.p.expand(ks.master[:], labelMasterSecret, cr, sr)
			ks.p.h.SetKey(ks.master[:])
			return ks
		}, 15},
		// 128 bytes: A(1) 3 + 4 outputs of 3 + 3 A(i) of 2.
		{"CBC key block", func() *keySchedule {
			ks := scheduleFromState(pm, &st)
			count(ks)
			ks.keys(cipherSuiteByID(ECC_SM4_CBC_SM3), cr, sr)
			return ks
		}, 21},
		// GCM key block (40 bytes: 11) and two Finished (5 each).
		{"resumed GCM", func() *keySchedule {
			ks := scheduleFromState(pm, &st)
			count(ks)
			ks.keys(cipherSuiteByID(ECC_SM4_GCM_SM3), cr, sr)
			ks.finished(false, h)
			ks.finished(true, h)
			return ks
		}, 21},
	} {
		n = 0
		ks := tc.run()
		ks.p.h.Compressor().CountBlocks(nil)
		ks.release()
		if n != tc.want {
			t.Errorf("%s: %d SM3 compressions, want %d", tc.name, n, tc.want)
		}
	}
}
