package tls13sm

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"
)

// Hostile ClientHellos whose checks must stay linear in their size: a
// hello of up to 64 KiB may carry some 16 000 extensions, or thousands of
// groups and key shares.

// helloWith builds a TLS 1.3 ClientHello (TLS_SM4_GCM_SM3) whose
// extensions block is exts.
func helloWith(exts []byte) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // legacy_session_id
	body = append(body, 0, 2, 0x00, 0xc6)    // cipher_suites
	body = append(body, 1, 0)                // compression
	body = binary.BigEndian.AppendUint16(body, uint16(len(exts)))
	body = append(body, exts...)
	msg := []byte{typeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(msg, body...)
}

func appendExtension(b []byte, typ uint16, body []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// keySharesHello: supported_versions [1.3], supported_groups listing
// groups, and a 1-byte key share for each of shares.
func keySharesHello(groups, shares []uint16) []byte {
	var exts []byte
	exts = appendExtension(exts, extSupportedVersions, []byte{2, 3, 4})
	gl := binary.BigEndian.AppendUint16(nil, uint16(2*len(groups)))
	for _, g := range groups {
		gl = binary.BigEndian.AppendUint16(gl, g)
	}
	exts = appendExtension(exts, extSupportedGroups, gl)
	exts = appendExtension(exts, extSignatureAlgorithms, []byte{0, 2, 7, 8})
	var sl []byte
	for _, g := range shares {
		sl = binary.BigEndian.AppendUint16(sl, g)
		sl = append(sl, 0, 1, 4)
	}
	exts = appendExtension(exts, extKeyShare, append(binary.BigEndian.AppendUint16(nil, uint16(len(sl))), sl...))
	return helloWith(exts)
}

// answerHello sends hello (in records of at most 2^14 bytes) to a server
// with the test configuration and returns the alert it sent (0: none) and
// its handshake error.
func answerHello(t testing.TB, hello []byte) (Alert, error) {
	t.Helper()
	scfg, _ := testConfigs(t)
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	var recs []byte
	for m := hello; len(m) > 0; {
		n := min(len(m), maxPlaintext)
		recs = append(recs, recordTypeHandshake, 3, 1, byte(n>>8), byte(n))
		recs = append(recs, m[:n]...)
		m = m[n:]
	}
	got := make(chan []byte, 1)
	go func() {
		b.Write(recs)
		b.SetReadDeadline(time.Now().Add(10 * time.Second))
		out, _ := io.ReadAll(b)
		got <- out
	}()
	srv := Server(a, scfg)
	err := srv.Handshake()
	a.Close()
	out := <-got
	if len(out) >= 7 && out[0] == recordTypeAlert {
		return Alert(out[6]), err
	}
	return 0, err
}

func groupRange(from, n int) []uint16 {
	g := make([]uint16, n)
	for i := range g {
		g[i] = uint16(from + i)
	}
	return g
}

// TestManyKeyShares: past the few shares checked by scans, the §4.2.8
// checks still hold (a share for a group not offered, two shares for one
// group: illegal_parameter), and an error names 16 of thousands of
// offered groups, not all of them.
func TestManyKeyShares(t *testing.T) {
	groups := groupRange(0x1000, 7000)
	for _, tc := range []struct {
		name   string
		shares []uint16
		alert  Alert
		want   string
	}{
		{"distinct", groups[:5000], AlertHandshakeFailure, "no shared key exchange group"},
		{"one-not-offered", append(groups[:4000:4000], 0x0fff), AlertIllegalParameter, "not in supported_groups"},
		{"one-twice", append(groups[:4000:4000], groups[17]), AlertIllegalParameter, "two key shares"},
		{"few-one-twice", []uint16{groups[0], groups[1], groups[0]}, AlertIllegalParameter, "two key shares"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hello := keySharesHello(groups, tc.shares)
			if len(hello) > maxHandshakeMsg {
				t.Fatalf("hello of %d bytes", len(hello))
			}
			alert, err := answerHello(t, hello)
			if err == nil || !strings.Contains(err.Error(), tc.want) || alert != tc.alert {
				t.Fatalf("err %.200v, alert %v; want %q and alert %v", err, alert, tc.want, tc.alert)
			}
			if n := len(err.Error()); n > 1024 {
				t.Errorf("error of %d bytes: it lists every offered group", n)
			}
		})
	}
}

// TestExtensionSet: duplicates are found among thousands of extension
// types, while the types scanned one by one stay few (the others go in a
// map): a set checks each of n extensions in constant time, not n/2.
func TestExtensionSet(t *testing.T) {
	var e extensionSet
	for typ := range 1 << 16 {
		if !e.add(uint16(typ)) {
			t.Fatalf("type %d taken for a duplicate", typ)
		}
		if len(e.others) > maxScannedExtensions {
			t.Fatalf("%d types scanned one by one", len(e.others))
		}
	}
	for _, typ := range []uint16{0, 63, 64, 64 + maxScannedExtensions, 0xffff} {
		if e.add(typ) {
			t.Errorf("duplicate type %d not found", typ)
		}
	}
	// Through the parser: a hello with a duplicate late among many.
	var exts []byte
	for i := range 3000 {
		exts = appendExtension(exts, uint16(0x100+i), nil)
	}
	exts = appendExtension(exts, 0x100+2500, nil)
	if alert, err := answerHello(t, helloWith(exts)); err == nil || alert != AlertDecodeError && alert != AlertIllegalParameter {
		t.Errorf("a hello with a duplicate extension among 3000: err %v, alert %v", err, alert)
	}
}

// BenchmarkHostileClientHello: the server's work on a hello of 16 000
// empty extensions, and on one of 7000 groups and key shares, against
// the same number of bytes in one extension.
func BenchmarkHostileClientHello(b *testing.B) {
	n := (0xffff - 200) / 4
	var many []byte
	for i := range n {
		many = appendExtension(many, uint16(0x100+i), nil)
	}
	groups := groupRange(0x1000, 7000)
	for _, bc := range []struct {
		name  string
		hello []byte
	}{
		{"one-extension", helloWith(appendExtension(nil, 0x100, make([]byte, 4*n-4)))},
		{"16k-extensions", helloWith(many)},
		{"7k-key-shares", keySharesHello(groups, groups)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m := new(clientHelloMsg)
				if !m.unmarshal(bytes.Clone(bc.hello)) {
					b.Fatal("hello not parsed")
				}
				hs := &serverHandshakeState{c: &Conn{}, hello: m}
				if err := hs.checkKeyShares(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
