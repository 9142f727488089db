package tlcp

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/emmansun/gmsm/sm3"
)

// TestPRFVectors checks the key schedule against digest E.6 (cross-checked
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
