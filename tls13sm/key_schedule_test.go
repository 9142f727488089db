package tls13sm

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// protocol-notes §12.1: HMAC-SM3 (Wycheproof).
func TestHMACSM3Vectors(t *testing.T) {
	for _, tc := range []struct{ key, msg, mac string }{
		{"1e225cafb90339bba1b24076d4206c3e79c355805d851682bc818baa4f5a7779", "", "f9938b1b2515117f25dcd636c9a6a0e7f00bccaf5347e0e0df435cfca736cfc1"},
		{"8159fd15133cd964c9a6964c94f0ea269a806fd9f43f0da58b6cd1b33d189b2a", "77", "51aaf64843b6d2fc7a244ab9cda9b7b57164ce6a865f9808c01931b46195411d"},
	} {
		var m sm3state.HMAC
		m.SetKey(unhex(t, tc.key))
		// twice, to check the saved states are restored correctly
		for i := 0; i < 2; i++ {
			m.Begin()
			m.Write(unhex(t, tc.msg))
			if got := m.Finish(nil); hex.EncodeToString(got) != tc.mac {
				t.Fatalf("HMAC-SM3 = %x, want %s", got, tc.mac)
			}
		}
	}
	// A key longer than the block is hashed first.
	var m sm3state.HMAC
	long := bytes.Repeat([]byte{0xaa}, 100)
	m.SetKey(long)
	m.Begin()
	m.Write([]byte("x"))
	got := m.Finish(nil)
	h := sm3.Sum(long)
	var m2 sm3state.HMAC
	m2.SetKey(h[:])
	m2.Begin()
	m2.Write([]byte("x"))
	if want := m2.Finish(nil); !bytes.Equal(got, want) {
		t.Fatal("long HMAC key not hashed")
	}
}

// protocol-notes §12.2: HKDF-SM3 with RFC 5869 test case 1 inputs.
func TestHKDFSM3Vector(t *testing.T) {
	ikm := bytes.Repeat([]byte{0x0b}, 22)
	salt := unhex(t, "000102030405060708090a0b0c")
	info := unhex(t, "f0f1f2f3f4f5f6f7f8f9")
	var ks keySchedule
	var prk [32]byte
	ks.extract(prk[:], salt, ikm)
	okm := make([]byte, 42)
	ks.expand(okm, prk[:], info)
	if got, want := hex.EncodeToString(okm), "c69fe91b7aaee2dd5718d72dcaee0cce93f1b8e41f792da51261b6a517e68b36ed2c595572b01dfa359b"; got != want {
		t.Fatalf("HKDF-SM3 = %s, want %s", got, want)
	}
}

// protocol-notes §12.5: the RFC 8446 §7.1 schedule with SM3.
func TestKeyScheduleVector(t *testing.T) {
	if got := hex.EncodeToString(earlySecretNoPSK[:]); got != "a4f50a29c327e9acc4ddd4dbe32b75a6a1d77e4bbe823e3d71fdcc1a5fa52757" {
		t.Fatalf("early secret %s", got)
	}
	if got := hex.EncodeToString(derivedNoPSKSecret[:]); got != "8bf1d43b3cb61da421895be55c07b3c1f49d7af9f9c728240cee1fc8039252f4" {
		t.Fatalf("derived %s", got)
	}
	var ks keySchedule
	var hs handshakeSecret
	var chs trafficSecret
	ks.extractHandshake(&hs, &derivedNoPSKSecret, bytes.Repeat([]byte{0x11}, 32))
	if got := hex.EncodeToString(hs[:]); got != "87c38768946f51b1ee6da26d2e7c2233a59a3d5602757229525cd47a041ef825" {
		t.Fatalf("handshake secret %s", got)
	}
	var hs2 handshakeSecret
	ks.extractHandshakeNoPSK(&hs2, bytes.Repeat([]byte{0x11}, 32))
	if hs2 != hs {
		t.Fatalf("precomputed no-PSK salt state gives %x", hs2)
	}
	th := sm3.Sum([]byte("CH||SH"))
	ks.expandLabel(chs[:], hs[:], "c hs traffic", th[:]) // Derive-Secret
	if got := hex.EncodeToString(chs[:]); got != "caa6d44be385f9d41138814aaff3ba7542f0628abf98625918f276a0c6894f6f" {
		t.Fatalf("c_hs_traffic %s", got)
	}
	var key [16]byte
	var iv [12]byte
	ks.trafficKeys(key[:], iv[:], &chs)
	if hex.EncodeToString(key[:]) != "472d205296ba8b29dcf870c66179a71d" || hex.EncodeToString(iv[:]) != "1036aecffe408e35c72ac185" {
		t.Fatalf("key %x iv %x", key, iv)
	}
	fk, _ := hkdfExpandLabel(chs[:], "finished", nil, 32)
	if hex.EncodeToString(fk) != "cbc9385108ecd29a888a2d91472cc11bae4674c75e3265288b2c682872a0b07b" {
		t.Fatalf("finished key %x", fk)
	}
}
