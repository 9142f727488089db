package sm3state

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding"
	"encoding/hex"
	"io"
	"testing"

	"github.com/emmansun/gmsm/sm3"
)

// withBothPaths runs f with the portable path (new Compressors only), and
// then with the direct one.
func withBothPaths(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	direct := directState.Load()
	t.Run("portable", func(t *testing.T) {
		directState.Store(false)
		defer directState.Store(direct)
		f(t)
	})
	t.Run("direct", f)
}

// The direct path must be on with the gmsm version in go.mod: if an upgrade
// changes gmsm's digest layout, this fails (the code still works, on the
// slower portable path) and gmsmDigest needs a look.
func TestGmsmDigestLayout(t *testing.T) {
	if !Direct() {
		t.Fatal("gmsm's SM3 digest no longer has gmsmDigest's layout: SM3 runs on the portable path")
	}
	var c Compressor
	h := IV()
	c.Compress(&h, make([]byte, 64))
	if c.fast == nil {
		t.Fatal("compressor did not take the direct path")
	}
}

// GB/T 32905-2016 Appendix A: "abc" and "abcd" x 16.
func TestSM3KnownAnswers(t *testing.T) {
	withBothPaths(t, func(t *testing.T) {
		for _, tc := range []struct{ in, want string }{
			{"abc", "66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0"},
			{string(bytes.Repeat([]byte("abcd"), 16)), "debe9ff92275b8a138604889c18e5a4d6fdb70e5387e5765293dcba39c0c5732"},
		} {
			var c Compressor
			var s Hasher
			s.Reset()
			s.Write(&c, []byte(tc.in))
			if got := hex.EncodeToString(s.Sum(&c, nil)); got != tc.want {
				t.Errorf("SM3(%.8q...) = %s, want %s", tc.in, got, tc.want)
			}
		}
	})
}

func TestHasherMatchesSM3(t *testing.T) {
	withBothPaths(t, func(t *testing.T) {
		data := make([]byte, 1100)
		io.ReadFull(rand.Reader, data)
		var c Compressor
		for _, n := range []int{0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 200, 1100} {
			want := sm3.Sum(data[:n])
			for _, split := range []int{0, 1, 7, 64, n / 2, n} {
				split = min(split, n)
				var s Hasher
				s.Reset()
				s.Write(&c, data[:split])
				s.Write(&c, data[split:n])
				if s.Len() != uint64(n) {
					t.Fatalf("Len %d, want %d", s.Len(), n)
				}
				saved := s
				if got := s.SumWith(&c, nil, nil); !bytes.Equal(got, want[:]) {
					t.Fatalf("len %d split %d: SumWith %x, want %x", n, split, got, want)
				}
				if s != saved {
					t.Fatal("SumWith changed the hasher")
				}
				if got := s.Sum(&c, nil); !bytes.Equal(got, want[:]) {
					t.Fatalf("len %d split %d: %x, want %x", n, split, got, want)
				}
			}
		}
		// SumWith hashes the tail after the hasher's input.
		var s Hasher
		s.Reset()
		s.Write(&c, data[:70])
		if got, want := s.SumWith(&c, data[70:300], nil), sm3.Sum(data[:300]); !bytes.Equal(got, want[:]) {
			t.Fatalf("SumWith tail %x, want %x", got, want)
		}
		// The transcript's Sum leaves it running.
		var tr Transcript
		tr.Init(&c)
		tr.Write(data[:100])
		first := tr.Sum(nil)
		tr.Write(data[100:300])
		if want := sm3.Sum(data[:100]); !bytes.Equal(first, want[:]) {
			t.Fatalf("transcript Sum %x", first)
		}
		if got, want := tr.Sum(nil), sm3.Sum(data[:300]); !bytes.Equal(got, want[:]) {
			t.Fatalf("transcript after Sum %x, want %x", got, want)
		}
		tr.Reset()
		if got, want := tr.Sum(nil), sm3.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("reset transcript %x, want %x", got, want)
		}
	})
}

// refHMAC is crypto/hmac over gmsm's SM3.
func refHMAC(key, data []byte) []byte {
	h := hmac.New(sm3.New, key)
	h.Write(data)
	return h.Sum(nil)
}

func TestHMACMatchesCryptoHMAC(t *testing.T) {
	withBothPaths(t, func(t *testing.T) {
		data := make([]byte, 300)
		io.ReadFull(rand.Reader, data)
		var m HMAC
		for _, kl := range []int{0, 1, 16, 32, 48, 63, 64, 65, 100, 200} {
			key := data[100 : 100+kl]
			m.SetKey(key)
			var st HMACState
			m.SaveState(&st)
			for _, n := range []int{0, 1, 13, 54, 55, 56, 63, 64, 65, 77, 109, 119, 120, 200, 300} {
				want := refHMAC(key, data[:n])
				got := make([]byte, Size)
				m.MAC(got, data[:n])
				if !bytes.Equal(got, want) {
					t.Fatalf("key %d len %d: MAC %x, want %x", kl, n, got, want)
				}
				short := make([]byte, 12)
				m.MAC(short, data[:n])
				if !bytes.Equal(short, want[:12]) {
					t.Fatalf("key %d len %d: truncated MAC %x", kl, n, short)
				}
				m.Begin()
				m.Write(data[:n/3])
				m.Write(data[n/3 : n])
				if got := m.Finish(nil); !bytes.Equal(got, want) {
					t.Fatalf("key %d len %d: streaming %x, want %x", kl, n, got, want)
				}
				if n <= MaxShortMAC {
					copy(m.ShortBuf(), data[:n])
					m.MACShort(got, n)
					if !bytes.Equal(got, want) {
						t.Fatalf("key %d len %d: MACShort %x", kl, n, got)
					}
				}
				// A restored state MACs like the key.
				var m2 HMAC
				m2.LoadState(&st)
				m2.MAC(got, data[:n])
				if !bytes.Equal(got, want) {
					t.Fatalf("key %d len %d: loaded state %x", kl, n, got)
				}
			}
		}
	})
}

// HMAC-SM3 known answers (Wycheproof; protocol-notes §12.1), and
// fixed RFC 4231-shaped inputs checked against crypto/hmac.
func TestHMACVectors(t *testing.T) {
	for _, tc := range []struct{ key, msg, mac string }{
		{"1e225cafb90339bba1b24076d4206c3e79c355805d851682bc818baa4f5a7779", "", "f9938b1b2515117f25dcd636c9a6a0e7f00bccaf5347e0e0df435cfca736cfc1"},
		{"8159fd15133cd964c9a6964c94f0ea269a806fd9f43f0da58b6cd1b33d189b2a", "77", "51aaf64843b6d2fc7a244ab9cda9b7b57164ce6a865f9808c01931b46195411d"},
	} {
		key, _ := hex.DecodeString(tc.key)
		msg, _ := hex.DecodeString(tc.msg)
		var m HMAC
		m.SetKey(key)
		got := make([]byte, Size)
		m.MAC(got, msg)
		if hex.EncodeToString(got) != tc.mac {
			t.Fatalf("HMAC-SM3 = %x, want %s", got, tc.mac)
		}
	}
	for _, tc := range []struct{ key, data, want string }{
		{
			key:  "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20",
			data: "6162636462636465636465666465666765666768666768696768696a68696a6b696a6b6c6a6b6c6d6b6c6d6e6c6d6e6f6d6e6f706e6f7071",
		},
		{key: "4a656665", data: "7768617420646f2079612077616e7420666f72206e6f7468696e673f"},
	} {
		key, _ := hex.DecodeString(tc.key)
		data, _ := hex.DecodeString(tc.data)
		want := refHMAC(key, data)
		var m HMAC
		m.SetKey(key)
		got := make([]byte, Size)
		m.MAC(got, data)
		if !bytes.Equal(got, want) {
			t.Fatalf("HMAC %x, want %x", got, want)
		}
	}
}

// Every operation costs exactly the compressions SM3's padding requires.
func TestCompressionCounts(t *testing.T) {
	var m HMAC
	n := 0
	m.Compressor().CountBlocks(&n)
	check := func(what string, want int) {
		t.Helper()
		if n != want {
			t.Errorf("%s: %d compressions, want %d", what, n, want)
		}
		n = 0
	}
	m.SetKey(make([]byte, 32))
	check("SetKey(32 bytes)", 2)
	m.SetKey(make([]byte, 65))
	check("SetKey(65 bytes)", 4)
	out := make([]byte, 32)
	m.MAC(out, make([]byte, MaxShortMAC))
	check("MAC(55 bytes)", 2)
	m.MAC(out, make([]byte, MaxShortMAC+1))
	check("MAC(56 bytes)", 3)
	m.MAC(out, make([]byte, 64+55))
	check("MAC(119 bytes)", 3)
	m.MAC(out, make([]byte, 64+56))
	check("MAC(120 bytes)", 4)
	m.Compressor().Burn(5)
	check("Burn(5)", 5)
	var st HMACState
	m.SaveState(&st)
	m.LoadState(&st)
	check("Save/LoadState", 0)
	var tr Transcript
	tr.Init(m.Compressor())
	tr.Write(make([]byte, 100))
	check("transcript Write(100)", 1)
	tr.Sum(nil)
	check("transcript Sum", 1)
}

// Nothing allocates once a Compressor has been used.
func TestNoAllocations(t *testing.T) {
	var m HMAC
	key := make([]byte, 32)
	data := make([]byte, 300)
	out := make([]byte, 32)
	var tr Transcript
	tr.Init(m.Compressor())
	m.SetKey(key)
	allocs := testing.AllocsPerRun(100, func() {
		m.SetKey(key)
		m.MAC(out, data[:40])
		m.Begin()
		m.Write(data[:13])
		m.Write(data)
		m.Finish(out[:0])
		m.Compressor().Burn(3)
		tr.Write(data)
		tr.Sum(out[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

func TestWipe(t *testing.T) {
	var m HMAC
	m.SetKey([]byte("key"))
	m.MAC(make([]byte, 32), []byte("message"))
	m.Wipe()
	if m.istate != ([8]uint32{}) || m.ostate != ([8]uint32{}) || m.blk != ([BlockSize]byte{}) || m.sum != ([Size]byte{}) || m.s != (Hasher{}) {
		t.Fatal("Wipe left key-derived state")
	}
	if m.c.d == nil {
		t.Fatal("Wipe dropped the compressor")
	}
	m.SetKey([]byte("key"))
	got := make([]byte, 32)
	m.MAC(got, []byte("message"))
	if want := refHMAC([]byte("key"), []byte("message")); !bytes.Equal(got, want) {
		t.Fatal("MAC after Wipe")
	}
}

// FuzzSM3State compares Hasher (split writes), Transcript, HMAC (MAC,
// streaming, saved state) with sm3.Sum and crypto/hmac over SM3.
func FuzzSM3State(f *testing.F) {
	f.Add([]byte("abc"), []byte("key"), uint16(1))
	f.Add(bytes.Repeat([]byte{0x61}, 55), bytes.Repeat([]byte{1}, 64), uint16(55))
	f.Add(bytes.Repeat([]byte{0x62}, 119), bytes.Repeat([]byte{2}, 65), uint16(64))
	f.Add([]byte{}, []byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, data, key []byte, split uint16) {
		if len(data) > 4096 || len(key) > 512 {
			return
		}
		s := min(int(split), len(data))
		want := sm3.Sum(data)
		var c Compressor
		var h Hasher
		h.Reset()
		h.Write(&c, data[:s])
		h.Write(&c, data[s:])
		if got := h.SumWith(&c, nil, nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("SumWith %x, want %x", got, want)
		}
		if got := h.Sum(&c, nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("Sum %x, want %x", got, want)
		}
		var tr Transcript
		tr.Init(&c)
		tr.Write(data[:s])
		mid := sm3.Sum(data[:s])
		if got := tr.Sum(nil); !bytes.Equal(got, mid[:]) {
			t.Fatalf("transcript prefix %x, want %x", got, mid)
		}
		tr.Write(data[s:])
		if got := tr.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("transcript %x, want %x", got, want)
		}

		wantMAC := refHMAC(key, data)
		var m HMAC
		m.SetKey(key)
		got := make([]byte, Size)
		m.MAC(got, data)
		if !bytes.Equal(got, wantMAC) {
			t.Fatalf("MAC %x, want %x", got, wantMAC)
		}
		var st HMACState
		m.SaveState(&st)
		var m2 HMAC
		m2.LoadState(&st)
		m2.Begin()
		m2.Write(data[:s])
		m2.Write(data[s:])
		if got := m2.Finish(nil); !bytes.Equal(got, wantMAC) {
			t.Fatalf("streaming MAC %x, want %x", got, wantMAC)
		}
	})
}

func BenchmarkSM3x(b *testing.B) {
	key := make([]byte, 32)
	msg := make([]byte, 16384)
	out := make([]byte, 32)
	b.Run("Compress/direct", func(b *testing.B) {
		var c Compressor
		h := IV()
		b.SetBytes(BlockSize)
		for b.Loop() {
			c.Compress(&h, msg[:BlockSize])
		}
	})
	b.Run("Compress/portable", func(b *testing.B) {
		var c Compressor
		c.init(false)
		h := IV()
		b.SetBytes(BlockSize)
		for b.Loop() {
			c.Compress(&h, msg[:BlockSize])
		}
	})
	b.Run("HMACShort/sm3state", func(b *testing.B) {
		var m HMAC
		m.SetKey(key)
		for b.Loop() {
			m.MAC(out, msg[:47])
		}
	})
	b.Run("HMACShort/crypto-hmac", func(b *testing.B) {
		h := hmac.New(sm3.New, key)
		for b.Loop() {
			h.Reset()
			h.Write(msg[:47])
			h.Sum(out[:0])
		}
	})
	b.Run("HMAC16K/sm3state", func(b *testing.B) {
		var m HMAC
		m.SetKey(key)
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			m.MAC(out, msg)
		}
	})
	b.Run("HMAC16K/crypto-hmac", func(b *testing.B) {
		h := hmac.New(sm3.New, key)
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			h.Reset()
			h.Write(msg)
			h.Sum(out[:0])
		}
	})
	b.Run("SetKey", func(b *testing.B) {
		var m HMAC
		for b.Loop() {
			m.SetKey(key)
		}
	})
}

// TestWipeClearsDigest checks that Wipe also clears the chaining value
// left in gmsm's digest by the last compression: after a MAC that is the
// MAC itself (sm2sign's nonce), after SetKey the keyed outer state.
func TestWipeClearsDigest(t *testing.T) {
	for _, direct := range []bool{true, false} {
		if direct && !Direct() {
			continue
		}
		var m HMAC
		m.c.init(direct)
		m.SetKey([]byte("key"))
		mac := make([]byte, 32)
		m.MAC(mac, []byte("message"))
		m.Wipe()
		got, err := m.c.d.(encoding.BinaryAppender).AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := sm3.New().(encoding.BinaryAppender).AppendBinary(nil)
		if !bytes.Equal(got, want) {
			t.Errorf("direct=%v: Wipe left gmsm's digest state %x (MAC %x)", direct, got, mac)
		}
	}
}
