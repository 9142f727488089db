package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
)

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// FuzzProxyHeaderStream: reading a header from a stream that arrives in
// chunks of any size agrees with parsing the whole input at once, never
// consumes a byte after the header (or any byte when there is no header),
// and fails with an error, not a panic, on everything else.
func FuzzProxyHeaderStream(f *testing.F) {
	f.Add([]byte("PROXY TCP4 203.0.113.7 192.0.2.1 54321 443\r\n\x16\x03\x01rest"), uint8(1))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 80 443\r\nGET /"), uint8(7))
	f.Add([]byte("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n\x16\x01\x01"), uint8(3))
	f.Add([]byte("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n"), uint8(5))
	f.Add(append(v2(1, 0x11, mustHex("cb007107c0000201d43101bb")), "\x16\x03\x01"...), uint8(2))
	f.Add(append(v2(1, 0x21, append(make([]byte, 36), 0x03, 0x00, 0x04, 'a', 'b', 'c', 'd')), "tail"...), uint8(16))
	f.Add(v2(0, 0x00, nil), uint8(1))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\xff\xff"), uint8(4))
	f.Add([]byte("\x16\x03\x01\x00\x05hello"), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		whole, n, perr := ParseProxyHeader(b)
		br := bufio.NewReaderSize(&chunkReader{bytes.NewReader(b), int(chunk%16) + 1}, 4096)
		h, err := ReadProxyHeader(br)
		rest, _ := io.ReadAll(br)
		switch {
		case perr == nil:
			if err != nil {
				t.Fatalf("whole input parses (%+v) but the stream fails: %v", whole, err)
			}
			if h.Version != whole.Version || h.Local != whole.Local || h.Source.String() != whole.Source.String() || h.Destination.String() != whole.Destination.String() {
				t.Fatalf("stream %+v, whole %+v", h, whole)
			}
			if !bytes.Equal(rest, b[n:]) {
				t.Fatalf("bytes after the header: %q, want %q", rest, b[n:])
			}
		case errors.Is(perr, ErrNoProxyHeader):
			if !errors.Is(err, ErrNoProxyHeader) || !bytes.Equal(rest, b) {
				t.Fatalf("no header: err %v, left %q of %q", err, rest, b)
			}
		case perr == errProxyShort:
			if err == nil {
				t.Fatalf("truncated input %q read as %+v", b, h)
			}
		default:
			if err == nil {
				t.Fatalf("malformed input %q (%v) read as %+v", b, perr, h)
			}
		}
	})
}

// FuzzProxyHeaderRoundTrip: every TCP address pair encodes in v1 and v2 to
// a header that parses back to the same addresses and exactly its length,
// whatever follows it.
func FuzzProxyHeaderRoundTrip(f *testing.F) {
	f.Add([]byte{203, 0, 113, 7}, []byte{192, 0, 2, 1}, uint16(54321), uint16(443), []byte("\x16\x03\x01"))
	f.Add([]byte(net.ParseIP("2001:db8::1")), []byte(net.ParseIP("2001:db8::2")), uint16(0), uint16(65535), []byte(nil))
	f.Add([]byte(net.ParseIP("::ffff:10.0.0.1")), []byte{10, 0, 0, 2}, uint16(1), uint16(2), []byte("PROXY TCP4"))
	f.Fuzz(func(t *testing.T, src, dst []byte, sport, dport uint16, tail []byte) {
		s, ok1 := netip.AddrFromSlice(src)
		d, ok2 := netip.AddrFromSlice(dst)
		if !ok1 || !ok2 {
			return
		}
		s, d = s.Unmap(), d.Unmap()
		sa := net.TCPAddrFromAddrPort(netip.AddrPortFrom(s, sport))
		da := net.TCPAddrFromAddrPort(netip.AddrPortFrom(d, dport))
		for v, enc := range []func([]byte, net.Addr, net.Addr) []byte{AppendProxyHeaderV1, AppendProxyHeaderV2} {
			hdr := enc(nil, sa, da)
			h, n, err := ParseProxyHeader(append(bytes.Clone(hdr), tail...))
			if err != nil || n != len(hdr) || h.Version != v+1 {
				t.Fatalf("v%d %v -> %v: %+v n=%d/%d err=%v", v+1, sa, da, h, n, len(hdr), err)
			}
			if s.Is4() != d.Is4() {
				// One IPv4 and one IPv6 address go as IPv6, the IPv4 one
				// mapped (as HAProxy sends them), not as UNKNOWN/LOCAL,
				// which would lose the client's address.
				if v == 0 && !bytes.HasPrefix(hdr, []byte("PROXY TCP6 ")) || v == 1 && hdr[13] != 0x21 {
					t.Fatalf("v%d mixed families not sent as IPv6: %q", v+1, hdr)
				}
			}
			unmap := func(a *net.TCPAddr) netip.AddrPort {
				if a == nil {
					return netip.AddrPort{}
				}
				ap := a.AddrPort()
				return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
			}
			if h.Local || unmap(h.Source) != sa.AddrPort() || unmap(h.Destination) != da.AddrPort() {
				t.Fatalf("v%d %v -> %v came back as %v -> %v", v+1, sa, da, h.Source, h.Destination)
			}
		}
	})
}
