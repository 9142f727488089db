package wire

import (
	"bytes"
	"encoding/hex"
	"slices"
	"testing"

	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

var mustHex = testpeer.Unhex

func TestHandshakeFraming(t *testing.T) {
	msg, err := MarshalHandshake(20, func(b *cryptobyte.Builder) { b.AddBytes([]byte{1, 2, 3}) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{20, 0, 0, 3, 1, 2, 3}; !bytes.Equal(msg, want) {
		t.Fatalf("marshal = %x, want %x", msg, want)
	}
	body, ok := ReadHandshake(msg, 20)
	if !ok || !bytes.Equal(body, []byte{1, 2, 3}) {
		t.Fatalf("read = %x %v", body, ok)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"wrong type", []byte{2, 0, 0, 3, 1, 2, 3}},
		{"short body", []byte{20, 0, 0, 4, 1, 2, 3}},
		{"trailing byte", []byte{20, 0, 0, 3, 1, 2, 3, 4}},
		{"short header", []byte{20, 0, 0}},
	} {
		if _, ok := ReadHandshake(tc.data, 20); ok {
			t.Errorf("%s: accepted %x", tc.name, tc.data)
		}
	}
}

// The extension encodings against hand-written RFC 6066 / RFC 7301 bytes.
func TestExtensionEncodings(t *testing.T) {
	var b cryptobyte.Builder
	AddServerNameExtension(&b, "localhost")
	AddALPNExtension(&b, "h2", "http/1.1")
	got, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want := mustHex(t, "0000"+"000e"+"000c"+"00"+"0009"+hex.EncodeToString([]byte("localhost"))+
		"0010"+"000e"+"000c"+"02"+hex.EncodeToString([]byte("h2"))+"08"+hex.EncodeToString([]byte("http/1.1")))
	if !bytes.Equal(got, want) {
		t.Fatalf("extensions = %x\nwant         %x", got, want)
	}

	// Strip type and length, then parse the bodies back.
	s := cryptobyte.String(got)
	var typ uint16
	var sni, alpn cryptobyte.String
	if !s.ReadUint16(&typ) || !s.ReadUint16LengthPrefixed(&sni) || !s.ReadUint16(&typ) || !s.ReadUint16LengthPrefixed(&alpn) {
		t.Fatal("framing")
	}
	host, n, ok := ReadServerName(&sni)
	if !ok || host != "localhost" || n != 1 || !sni.Empty() {
		t.Fatalf("server name %q %d %v", host, n, ok)
	}
	protos, ok := ReadALPNList(&alpn)
	if !ok || !slices.Equal(protos, []string{"h2", "http/1.1"}) || !alpn.Empty() {
		t.Fatalf("ALPN %q %v", protos, ok)
	}

	b = cryptobyte.Builder{}
	AddALPNExtension(&b, "h2")
	sel, _ := b.Bytes()
	body := cryptobyte.String(sel[4:])
	if p, ok := ReadALPNSelected(&body); !ok || p != "h2" {
		t.Fatalf("selected %q %v", p, ok)
	}
}

func TestReadServerName(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		host       string
		hostNames  int
		ok         bool
	}{
		{"one host", "0004" + "00" + "0001" + "61", "a", 1, true},
		{"two hosts: first counts", "0008" + "00" + "0001" + "61" + "00" + "0001" + "62", "a", 2, true},
		{"other type only", "0004" + "01" + "0001" + "61", "", 0, true},
		{"other type then host", "0008" + "01" + "0001" + "61" + "00" + "0001" + "62", "b", 1, true},
		{"empty list", "0000", "", 0, false},
		{"empty name", "0003" + "00" + "0000", "", 0, false},
		{"truncated name", "0004" + "00" + "0002" + "61", "", 0, false},
		{"truncated list", "0005" + "00" + "0001" + "61", "", 0, false},
		{"no list", "", "", 0, false},
	} {
		ext := cryptobyte.String(mustHex(t, tc.body))
		host, n, ok := ReadServerName(&ext)
		if ok != tc.ok || host != tc.host || n != tc.hostNames {
			t.Errorf("%s: got %q %d %v, want %q %d %v", tc.name, host, n, ok, tc.host, tc.hostNames, tc.ok)
		}
	}
}

func TestReadALPN(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		list       []string
		ok         bool
	}{
		{"two", "0006" + "02" + "6832" + "02" + "6833", []string{"h2", "h3"}, true},
		{"empty list", "0000", nil, false},
		{"empty name", "0003" + "00" + "02" + "6832", nil, false},
		{"truncated", "0004" + "02" + "6832", nil, false},
	} {
		ext := cryptobyte.String(mustHex(t, tc.body))
		list, ok := ReadALPNList(&ext)
		if ok != tc.ok || !slices.Equal(list, tc.list) {
			t.Errorf("list %s: got %q %v", tc.name, list, ok)
		}
	}
	for _, tc := range []struct {
		name, body, proto string
		ok                bool
	}{
		{"one", "0003" + "02" + "6832", "h2", true},
		{"two", "0006" + "02" + "6832" + "02" + "6833", "", false},
		{"empty name", "0001" + "00", "", false},
		{"empty list", "0000", "", false},
	} {
		ext := cryptobyte.String(mustHex(t, tc.body))
		p, ok := ReadALPNSelected(&ext)
		if ok != tc.ok || p != tc.proto {
			t.Errorf("selected %s: got %q %v", tc.name, p, ok)
		}
	}
}

// FuzzReadExtensions: no input panics, and what parses re-encodes to the
// bytes it was read from.
func FuzzReadExtensions(f *testing.F) {
	f.Add(mustHex(f, "0004000001"+"61"))
	f.Add(mustHex(f, "000600026832026833"))
	f.Add(mustHex(f, "0008010001610000016200"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ext := cryptobyte.String(data)
		if host, n, ok := ReadServerName(&ext); ok {
			if n == 0 && host != "" || n > 0 && host == "" {
				t.Fatalf("host %q with %d host names", host, n)
			}
			if n == 1 && len(data)-len(ext) == 2+1+2+len(host) {
				var b cryptobyte.Builder
				AddServerNameExtension(&b, host)
				enc, _ := b.Bytes()
				if !bytes.Equal(enc[4:], data[:len(data)-len(ext)]) {
					t.Fatalf("server_name re-encodes to %x, read from %x", enc[4:], data)
				}
			}
		}
		ext = cryptobyte.String(data)
		if list, ok := ReadALPNList(&ext); ok {
			var b cryptobyte.Builder
			AddALPNExtension(&b, list...)
			enc, _ := b.Bytes()
			if !bytes.Equal(enc[4:], data[:len(data)-len(ext)]) {
				t.Fatalf("ALPN re-encodes to %x, read from %x", enc[4:], data)
			}
		}
		ext = cryptobyte.String(data)
		if p, ok := ReadALPNSelected(&ext); ok && p == "" {
			t.Fatal("empty selected protocol accepted")
		}
		if body, ok := ReadHandshake(data, 1); ok && len(body) != len(data)-4 {
			t.Fatalf("body %d bytes of %d", len(body), len(data))
		}
	})
}

// TestALPNNameAllocs: the common protocol names cost no allocation (every
// ClientHello carries them), other names are copied.
func TestALPNNameAllocs(t *testing.T) {
	for _, name := range []string{"h2", "http/1.1", "spdy/3", "acme-tls/1"} {
		b := []byte(name)
		if got := ALPNName(b); got != name {
			t.Errorf("ALPNName(%q) = %q", name, got)
		}
		want := 1.0
		if name == "h2" || name == "http/1.1" {
			want = 0
		}
		if n := testing.AllocsPerRun(100, func() { sink = ALPNName(b) }); n != want {
			t.Errorf("ALPNName(%q): %v allocations, want %v", name, n, want)
		}
		b[0] ^= 0xff // the result does not alias the input
		if sink != name {
			t.Errorf("ALPNName(%q) aliases its input: %q", name, sink)
		}
	}
}

var sink string
