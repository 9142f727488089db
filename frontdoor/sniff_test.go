package frontdoor

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/transcript"
)

// recordedHello returns the first flight of a clienthello-*.jsonl file.
func recordedHello(t testing.TB, name string) []byte {
	t.Helper()
	dir, err := transcript.Dir()
	if err != nil {
		t.Fatalf("transcripts: %v", err)
	}
	f, err := transcript.Load(filepath.Join(dir, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return f.Conns[1].C2S
}

// helloSpec builds synthetic first flights.
type helloSpec struct {
	recVers, vers uint16
	suites        []uint16
	sni           string
	alpn          []string
	supVers       []uint16
	sigAlgs       []uint16 // signature_algorithms (none when empty)
	noExtensions  bool
	fragment      int // split the handshake message into records of this size (0: one record)
}

func (h helloSpec) body() []byte {
	var b cryptobyte.Builder
	b.AddUint16(h.vers)
	b.AddBytes(make([]byte, 32))
	b.AddUint8(0)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, s := range h.suites {
			b.AddUint16(s)
		}
	})
	b.AddUint8(1)
	b.AddUint8(0)
	if !h.noExtensions {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			if h.sni != "" {
				b.AddUint16(extServerName)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						b.AddUint8(0)
						b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(h.sni)) })
					})
				})
			}
			if len(h.alpn) > 0 {
				b.AddUint16(extALPN)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, p := range h.alpn {
							b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
						}
					})
				})
			}
			if len(h.sigAlgs) > 0 {
				b.AddUint16(extSignatureAlgs)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, v := range h.sigAlgs {
							b.AddUint16(v)
						}
					})
				})
			}
			if len(h.supVers) > 0 {
				b.AddUint16(extSupportedVersions)
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
					b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {
						for _, v := range h.supVers {
							b.AddUint16(v)
						}
					})
				})
			}
		})
	}
	return b.BytesOrPanic()
}

func (h helloSpec) flight() []byte {
	body := h.body()
	msg := append([]byte{typeClientHello, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	frag := h.fragment
	if frag == 0 {
		frag = len(msg)
	}
	var out []byte
	for len(msg) > 0 {
		n := min(frag, len(msg))
		out = append(out, recordTypeHandshake, byte(h.recVers>>8), byte(h.recVers), byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func TestSniffRecordedHellos(t *testing.T) {
	tests := []struct {
		file     string
		kind     Kind
		sni      string
		tls13sm  bool
		tlcp     bool
		versions []uint16
		strict   bool
	}{
		{"clienthello-tongsuo-ntls", KindTLCP, "", false, true, nil, false},
		{"clienthello-gmssl-tlcp", KindTLCP, "localhost", false, true, nil, false},
		{"clienthello-tongsuo-tls13-sm", KindTLS, "", true, false, []uint16{0x0304}, true},
		// GmSSL lists 01 01 in supported_versions: still TLS 1.3-SM (protocol-notes §9.3).
		{"clienthello-gmssl-tls13-sm", KindTLS, "localhost", true, false, []uint16{0x0304, 0x0303, 0x0101}, true},
		{"clienthello-openssl30-tls13", KindTLS, "localhost", false, false, []uint16{0x0304, 0x0303, 0x0302, 0x0301}, false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			in := recordedHello(t, tt.file)
			// One byte per read: the sniffer must reassemble across reads.
			s, err := sniff(iotest.OneByteReader(bytes.NewReader(in)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.kind != tt.kind {
				t.Errorf("kind = %v, want %v", s.kind, tt.kind)
			}
			if !bytes.Equal(s.buf, in) {
				t.Errorf("replay buffer differs from input (%d vs %d bytes)", len(s.buf), len(in))
			}
			h := s.hello
			if h.ServerName != tt.sni {
				t.Errorf("SNI = %q, want %q", h.ServerName, tt.sni)
			}
			if h.OffersTLS13SM() != tt.tls13sm {
				t.Errorf("OffersTLS13SM = %v", h.OffersTLS13SM())
			}
			if h.OffersTLCPSuites() != tt.tlcp {
				t.Errorf("OffersTLCPSuites = %v", h.OffersTLCPSuites())
			}
			if h.OffersTLS13SMStrict() != tt.strict {
				t.Errorf("OffersTLS13SMStrict = %v (groups %04x, sigalgs %04x)", h.OffersTLS13SMStrict(), h.SupportedGroups, h.SignatureSchemes)
			}
			if !slices.Equal(h.SupportedVersions, tt.versions) {
				t.Errorf("supported_versions = %04x, want %04x", h.SupportedVersions, tt.versions)
			}
		})
	}
}

func TestSniffSynthetic(t *testing.T) {
	tls13sm := helloSpec{recVers: 0x0301, vers: 0x0303, suites: []uint16{0x00c6}, sni: "a.example.cn", alpn: []string{"h2", "http/1.1"}, supVers: []uint16{0x0304}}
	split := tls13sm
	split.fragment = 7
	s360 := helloSpec{recVers: 0x0301, vers: 0x0303, suites: []uint16{0xe013, 0xe053}, sni: "x"}
	gm := helloSpec{recVers: 0x0101, vers: 0x0101, suites: []uint16{0xe013}, noExtensions: true}
	tests := []struct {
		name    string
		in      []byte
		kind    Kind
		err     bool
		tls13sm bool
		onlyGM  bool
	}{
		{"tls13sm", tls13sm.flight(), KindTLS, false, true, true},
		{"split across records", split.flight(), KindTLS, false, true, true},
		{"360 pattern", s360.flight(), KindTLS, false, false, true},
		{"gmssl no extensions", gm.flight(), KindTLCP, false, false, true},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), KindHTTP, false, false, false},
		{"sslv2", []byte{0x80, 0x2e, 0x01, 0x00, 0x02}, KindSSLv2, false, false, false},
		{"garbage", []byte{0x00, 0x01}, KindUnknown, false, false, false},
		{"unknown record version", []byte{0x16, 0x02, 0x00, 0x00, 0x01, 0x01}, KindUnknown, false, false, false},
		{"truncated", tls13sm.flight()[:20], KindTLS, true, false, false},
		{"empty record", []byte{0x16, 0x03, 0x01, 0x00, 0x00}, KindTLS, true, false, false},
		{"not a hello", []byte{0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00}, KindTLS, true, false, false},
		{"alert record", []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28}, KindUnknown, false, false, false},
		{"eof", nil, KindUnknown, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sniff(iotest.HalfReader(bytes.NewReader(tt.in)), nil)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if s.kind != tt.kind {
				t.Errorf("kind = %v, want %v", s.kind, tt.kind)
			}
			if !bytes.Equal(s.buf, tt.in[:len(s.buf)]) {
				t.Error("replay buffer is not a prefix of the input")
			}
			if err == nil && s.hello != nil {
				if s.hello.OffersTLS13SM() != tt.tls13sm || s.hello.OffersOnlyGMSuites() != tt.onlyGM {
					t.Errorf("OffersTLS13SM=%v OffersOnlyGMSuites=%v", s.hello.OffersTLS13SM(), s.hello.OffersOnlyGMSuites())
				}
			}
		})
	}
}

func TestSniffHelloTooLarge(t *testing.T) {
	var in []byte
	in = append(in, 0x16, 0x03, 0x01, 0x40, 0x00, typeClientHello, 0x01, 0x00, 0x00) // claims 64 KiB
	in = append(in, make([]byte, 0x4000-4)...)
	for len(in) < maxHelloBytes+2*recordHeaderLen+0x4000 {
		in = append(in, 0x16, 0x03, 0x01, 0x40, 0x00)
		in = append(in, make([]byte, 0x4000)...)
	}
	_, err := sniff(bytes.NewReader(in), nil)
	if !errors.Is(err, errHelloTooLarge) {
		t.Fatalf("err = %v, want errHelloTooLarge", err)
	}
}

func TestReplayConnLosesNothing(t *testing.T) {
	in := append(helloSpec{recVers: 0x0101, vers: 0x0101, suites: []uint16{0xe053}}.flight(), []byte("rest of the stream")...)
	s, err := sniff(iotest.HalfReader(bytes.NewReader(in)), nil)
	if err != nil {
		t.Fatal(err)
	}
	rest := in[len(s.buf):]
	rc := &replayConn{Conn: &readerConn{r: bytes.NewReader(rest)}, buf: s.buf}
	got, err := io.ReadAll(iotest.OneByteReader(rc))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, in) {
		t.Fatal("bytes lost or reordered by the replaying conn")
	}
}

func FuzzParseClientHello(f *testing.F) {
	for _, name := range []string{"clienthello-tongsuo-ntls", "clienthello-gmssl-tlcp", "clienthello-tongsuo-tls13-sm", "clienthello-gmssl-tls13-sm", "clienthello-openssl30-tls13"} {
		f.Add(recordedHello(f, name))
	}
	f.Add(helloSpec{recVers: 0x0301, vers: 0x0303, suites: []uint16{0x00c6}, sni: "a", alpn: []string{"h2"}, supVers: []uint16{0x0304}, fragment: 9}.flight())
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := sniff(bytes.NewReader(in), nil)
		if !bytes.Equal(s.buf, in[:len(s.buf)]) {
			t.Fatal("replay buffer is not a prefix of the input")
		}
		if err == nil && (s.kind == KindTLS || s.kind == KindTLCP) && s.hello == nil {
			t.Fatal("TLS/TLCP without a hello and without an error")
		}
		if len(in) > 9 {
			parseClientHello(in[9:])
		}
	})
}

// countingReader counts Read calls.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestSniffOneReadPerHello: a recorded TLCP or TLS 1.3-SM ClientHello that
// arrives in one segment is taken with one read (one system call per
// connection less than reading the record header and then its body).
func TestSniffOneReadPerHello(t *testing.T) {
	for _, name := range []string{"clienthello-tongsuo-ntls", "clienthello-gmssl-tlcp", "clienthello-tongsuo-tls13-sm", "clienthello-gmssl-tls13-sm"} {
		in := recordedHello(t, name)
		if len(in) > firstRead {
			t.Fatalf("%s: %d bytes, more than firstRead", name, len(in))
		}
		r := &countingReader{r: bytes.NewReader(in)}
		s, err := sniff(r, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.reads != 1 || !bytes.Equal(s.buf, in) {
			t.Errorf("%s: %d reads, %d of %d bytes held; want 1 read of all", name, r.reads, len(s.buf), len(in))
		}
	}
}

// TestSniffDeclaredLengthTooLarge: a ClientHello that declares more than
// maxHelloBytes is refused from its first record, without waiting for the
// rest of it.
func TestSniffDeclaredLengthTooLarge(t *testing.T) {
	in := []byte{0x16, 0x03, 0x01, 0x00, 0x08, typeClientHello, 0x01, 0x11, 0x70, 0x03, 0x03, 0, 0} // declares 70 000 bytes
	_, err := sniff(bytes.NewReader(in), nil)
	if !errors.Is(err, errHelloTooLarge) {
		t.Fatalf("err = %v, want errHelloTooLarge before the rest of the hello", err)
	}
}

// TestSniffEmptyOrOversizeRecord: a first flight whose records are empty
// (RFC 8446 §5.1: no zero-length handshake fragments) or longer than a
// record may be (2^14 + 2048, maxRecordPayload) is malformed, found on the
// record header.
func TestSniffEmptyOrOversizeRecord(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty":    {0x16, 0x03, 0x01, 0x00, 0x00, 0x16, 0x03, 0x01, 0x00, 0x04, typeClientHello, 0, 0, 0},
		"oversize": {0x16, 0x03, 0x01, 0x48, 0x01, typeClientHello, 0, 0x48, 0},
	} {
		if _, err := sniff(bytes.NewReader(in), nil); !errors.Is(err, errBadRecord) {
			t.Errorf("%s record: err = %v, want errBadRecord", name, err)
		}
	}
}

// TestMalformedHelloGetsAlert: a first flight the sniffer cannot parse
// gets the fatal alert the stacks behind it would send (RFC 8446 §6.2),
// in a record of its protocol's version, before the close: decode_error
// for a ClientHello whose session_id is 33 bytes (over the 32 of RFC 8446
// §4.1.2; TLS and TLCP), unexpected_message for a handshake message that
// is not a ClientHello and for an alert record in its place.
func TestMalformedHelloGetsAlert(t *testing.T) {
	sites, _ := tlsSites(t)
	for _, tc := range []struct {
		name   string
		flight []byte
		want   []byte // the alert record
	}{
		{"session_id_33", func() []byte {
			body := []byte{3, 3}
			body = append(body, make([]byte, 32)...) // random
			body = append(body, 33)                  // session_id length 33
			body = append(body, make([]byte, 33)...)
			body = append(body, 0, 2, 0x13, 0x01, 1, 0)
			msg := append([]byte{typeClientHello, 0, byte(len(body) >> 8), byte(len(body))}, body...)
			return append([]byte{recordTypeHandshake, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
		}(), alertRecord(0x0303, alertDecodeError)},
		{"not_a_client_hello", []byte{recordTypeHandshake, 3, 1, 0, 4, 2, 0, 0, 0}, alertRecord(0x0303, alertUnexpectedMessage)},
		{"tlcp_alert_record", []byte{recordTypeHandshake, 1, 1, 0, 2, 1, 0, recordTypeAlert, 1, 1, 0, 2, 2, 40}, alertRecord(versionTLCP, alertUnexpectedMessage)},
		{"tlcp_session_id_33", func() []byte {
			body := []byte{1, 1}
			body = append(body, make([]byte, 32)...)
			body = append(body, 33)
			body = append(body, make([]byte, 33)...)
			body = append(body, 0, 2, 0xe0, 0x13, 1, 0)
			msg := append([]byte{typeClientHello, 0, byte(len(body) >> 8), byte(len(body))}, body...)
			return append([]byte{recordTypeHandshake, 1, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
		}(), alertRecord(versionTLCP, alertDecodeError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, TLCP: true, Sites: sites}, nil)
			c := dialFrom(t, "127.0.0.1", addr)
			if _, err := c.Write(tc.flight); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			got, _ := io.ReadAll(io.LimitReader(c, 64))
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("server answered %x before closing, want the alert %x", got, tc.want)
			}
		})
	}
}
