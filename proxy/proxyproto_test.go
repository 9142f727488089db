package proxy

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

func v2(cmd, fam byte, body []byte) []byte {
	b := append([]byte{}, proxyV2Sig...)
	b = append(b, 0x20|cmd, fam, byte(len(body)>>8), byte(len(body)))
	return append(b, body...)
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseProxyHeader(t *testing.T) {
	v4body := mustHex("cb007107 c0000201 d431 01bb") // 203.0.113.7:54321 -> 192.0.2.1:443
	v6body := append(append(mustHex("20010db8000000000000000000000001"), mustHex("20010db8000000000000000000000002")...), mustHex("0050 01bb")...)
	tlv := mustHex("04 0003 616263") // an unrelated TLV, skipped
	tests := []struct {
		name    string
		in      []byte
		src     string
		local   bool
		n       int
		wantErr string // "" ok, "none" ErrNoProxyHeader, "short", else substring
	}{
		{"v1 tcp4", []byte("PROXY TCP4 203.0.113.7 192.0.2.1 54321 443\r\nGET"), "203.0.113.7:54321", false, 44, ""},
		{"v1 tcp6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 80 443\r\n"), "[2001:db8::1]:80", false, 43, ""},
		{"v1 unknown", []byte("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"), "", true, 35, ""},
		{"v1 unknown bare", []byte("PROXY UNKNOWN\r\n"), "", true, 15, ""},
		{"v1 partial", []byte("PROXY TCP4 203.0.113.7"), "", false, 0, "short"},
		{"v1 prefix partial", []byte("PRO"), "", false, 0, "short"},
		{"v1 family mismatch", []byte("PROXY TCP4 2001:db8::1 192.0.2.1 1 2\r\n"), "", false, 0, "bad address"},
		{"v1 bad port", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n"), "", false, 0, "bad port"},
		{"v1 leading zero port", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n"), "", false, 0, "bad port"},
		{"v1 no CR", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"), "", false, 0, "CRLF"},
		{"v1 too long", append([]byte("PROXY TCP4 "), bytes.Repeat([]byte("1"), 120)...), "", false, 0, "longer than 107"},
		{"v1 double space", []byte("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n"), "", false, 0, "fields"},
		{"v1 udp", []byte("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n"), "", false, 0, "protocol"},
		{"not proxy http", []byte("GET / HTTP/1.1\r\n"), "", false, 0, "none"},
		{"not proxy tls", []byte{0x16, 0x03, 0x01, 0x00}, "", false, 0, "none"},
		{"not proxy tlcp", []byte{0x16, 0x01, 0x01, 0x00}, "", false, 0, "none"},
		{"P but not PROXY", []byte("POST / HTTP/1.1\r\n"), "", false, 0, "none"},
		{"v2 tcp4", v2(1, 0x11, v4body), "203.0.113.7:54321", false, 28, ""},
		{"v2 tcp4 with tlv", v2(1, 0x11, append(append([]byte{}, v4body...), tlv...)), "203.0.113.7:54321", false, 34, ""},
		{"v2 tcp6", v2(1, 0x21, v6body), "[2001:db8::1]:80", false, 52, ""},
		{"v2 local", v2(0, 0x00, nil), "", true, 16, ""},
		{"v2 unix", v2(1, 0x31, make([]byte, 216)), "", true, 232, ""},
		{"v2 truncated addresses", v2(1, 0x11, v4body[:8]), "", false, 0, "truncated"},
		{"v2 bad version", append(append([]byte{}, proxyV2Sig...), 0x11, 0x11, 0, 0), "", false, 0, "version"},
		{"v2 bad command", append(append([]byte{}, proxyV2Sig...), 0x2f, 0x11, 0, 0), "", false, 0, "command"},
		{"v2 huge", append(append([]byte{}, proxyV2Sig...), 0x21, 0x11, 0xff, 0xff), "", false, 0, "over"},
		{"v2 partial sig", proxyV2Sig[:5], "", false, 0, "short"},
		{"v2 partial body", v2(1, 0x11, v4body)[:20], "", false, 0, "short"},
		{"CR not sig", []byte("\r\nGET"), "", false, 0, "none"},
	}
	for _, tt := range tests {
		h, n, err := ParseProxyHeader(tt.in)
		switch tt.wantErr {
		case "":
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
				continue
			}
			if n != tt.n || h.Local != tt.local {
				t.Errorf("%s: n=%d local=%v, want %d %v", tt.name, n, h.Local, tt.n, tt.local)
			}
			if tt.src != "" && (h.Source == nil || h.Source.String() != tt.src) {
				t.Errorf("%s: source %v, want %s", tt.name, h.Source, tt.src)
			}
		case "none":
			if err != ErrNoProxyHeader {
				t.Errorf("%s: err %v, want ErrNoProxyHeader", tt.name, err)
			}
		case "short":
			if err != errProxyShort {
				t.Errorf("%s: err %v, want short", tt.name, err)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
			}
		}
	}
}

func TestProxyHeaderRoundTrip(t *testing.T) {
	pairs := [][2]string{{"203.0.113.7:54321", "192.0.2.1:443"}, {"[2001:db8::1]:80", "[2001:db8::2]:8443"}}
	for _, p := range pairs {
		src, _ := net.ResolveTCPAddr("tcp", p[0])
		dst, _ := net.ResolveTCPAddr("tcp", p[1])
		for v, enc := range map[int]func([]byte, net.Addr, net.Addr) []byte{1: AppendProxyHeaderV1, 2: AppendProxyHeaderV2} {
			b := enc(nil, src, dst)
			h, n, err := ParseProxyHeader(append(b, "rest"...))
			if err != nil || n != len(b) || h.Version != v || h.Source.String() != p[0] || h.Destination.String() != p[1] {
				t.Errorf("v%d %v: %+v n=%d err=%v", v, p, h, n, err)
			}
		}
	}
}

func TestReadProxyHeaderKeepsData(t *testing.T) {
	in := "PROXY TCP4 203.0.113.7 192.0.2.1 54321 443\r\n\x16\x01\x01 rest of the stream"
	br := bufio.NewReader(&oneByteReader{r: strings.NewReader(in)})
	h, err := ReadProxyHeader(br)
	if err != nil || h.Source.String() != "203.0.113.7:54321" {
		t.Fatalf("%+v %v", h, err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "\x16\x01\x01 rest of the stream" {
		t.Fatalf("rest %q", rest)
	}
	// No header: nothing consumed.
	br = bufio.NewReader(strings.NewReader("\x16\x03\x01hello"))
	if _, err := ReadProxyHeader(br); err != ErrNoProxyHeader {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "\x16\x03\x01hello" {
		t.Fatalf("consumed bytes without a header: %q", rest)
	}
	// EOF inside a header.
	br = bufio.NewReader(strings.NewReader("PROXY TCP4 1.2"))
	if _, err := ReadProxyHeader(br); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

// FuzzParseProxyHeader: no panics, consistent lengths, and headers that
// parse re-encode to the same addresses.
func FuzzParseProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 203.0.113.7 192.0.2.1 54321 443\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 80 443\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(v2(1, 0x11, mustHex("cb007107c0000201d43101bb")))
	f.Add(v2(0, 0x00, nil))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := ParseProxyHeader(b)
		if err != nil {
			if h != nil || n != 0 {
				t.Fatalf("error with result: %+v %d", h, n)
			}
			return
		}
		if n < 1 || n > len(b) {
			t.Fatalf("length %d of %d", n, len(b))
		}
		if h.Local || h.Source == nil {
			return
		}
		var re []byte
		if h.Version == 1 {
			re = AppendProxyHeaderV1(nil, h.Source, h.Destination)
		} else {
			re = AppendProxyHeaderV2(nil, h.Source, h.Destination)
		}
		h2, _, err := ParseProxyHeader(re)
		if err != nil || h2.Source.String() != h.Source.String() || h2.Destination.String() != h.Destination.String() {
			t.Fatalf("re-encoded %q: %+v %v (from %+v)", re, h2, err, h)
		}
		// Reading the same bytes through a bufio.Reader agrees.
		br := bufio.NewReaderSize(bytes.NewReader(b), 4096)
		h3, err := ReadProxyHeader(br)
		if err != nil || h3.Source.String() != h.Source.String() {
			t.Fatalf("ReadProxyHeader disagrees: %+v %v", h3, err)
		}
	})
}

// TestProxyProtocolListenerToXFFAndLog: a trusted balancer sends PROXY
// v1/v2; the client address must reach X-Forwarded-For at the backend and
// the access log, while untrusted peers' headers are not interpreted.
func TestProxyProtocolListenerToXFFAndLog(t *testing.T) {
	e := echoBackend(t)
	for _, v := range []int{1, 2} {
		logPath := t.TempDir() + "/access.log"
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
			Sites:     oneSite(RouteConfig{Upstream: "e"}),
			AccessLog: AccessLogConfig{Path: logPath, Format: "json"},
		}
		f := newFront(t, cfg, frontOpts{wrap: func(ln net.Listener) net.Listener {
			pl, err := NewProxyProtocolListener(ln, []string{"127.0.0.1"}, time.Second, false)
			if err != nil {
				t.Fatal(err)
			}
			return pl
		}})
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		src, _ := net.ResolveTCPAddr("tcp", "203.0.113.7:54321")
		dst, _ := net.ResolveTCPAddr("tcp", f.addr)
		hdr := AppendProxyHeaderV1(nil, src, dst)
		if v == 2 {
			hdr = AppendProxyHeaderV2(nil, src, dst)
		}
		c.Write(hdr)
		c.Write([]byte("GET / HTTP/1.1\r\nHost: example.test\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: close\r\n\r\n"))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		c.Close()
		var s seenRequest
		if err := jsonUnmarshal(body, &s); err != nil {
			t.Fatalf("v%d: %s", v, body)
		}
		if got := s.Header.Get("X-Forwarded-For"); got != "203.0.113.7" {
			t.Errorf("v%d: X-Forwarded-For %q, want 203.0.113.7", v, got)
		}
		f.p.AccessLog().Flush()
		line, _ := os.ReadFile(logPath)
		if !strings.Contains(string(line), `"client":"203.0.113.7"`) {
			t.Errorf("v%d: access log %s", v, line)
		}
	}
	// Untrusted peer: the PROXY line is just a bad request.
	cfg := Config{Upstreams: []UpstreamConfig{upstream("e", addrOf(e))}, Sites: oneSite(RouteConfig{Upstream: "e"})}
	f := newFront(t, cfg, frontOpts{wrap: func(ln net.Listener) net.Listener {
		pl, _ := NewProxyProtocolListener(ln, []string{"192.0.2.0/24"}, time.Second, false)
		return pl
	}})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("PROXY TCP4 203.0.113.7 192.0.2.1 54321 443\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 400 {
		t.Fatalf("untrusted PROXY line: status %d, want 400", res.StatusCode)
	}
}

func TestProxyConnRequired(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go b.Write([]byte("GET / HTTP/1.1\r\n"))
	pc := &ProxyConn{Conn: a, timeout: time.Second, required: true}
	if _, err := pc.Read(make([]byte, 10)); err == nil || !errors.Is(err, ErrNoProxyHeader) {
		t.Fatalf("required header missing: %v", err)
	}
}

// TestProxyConnKeepsCallerDeadline: reading the header must not clear a
// read deadline the caller set before (the daemon's handshake deadline).
func TestProxyConnKeepsCallerDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("PROXY TCP4 203.0.113.7 192.0.2.1 54321 443\r\n"))
		<-done // then silence
	}()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	pc := &ProxyConn{Conn: raw, timeout: time.Minute}
	pc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = pc.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read after header: %v, want the caller's deadline to fire", err)
	}
	if pc.RemoteAddr().String() != "203.0.113.7:54321" {
		t.Fatalf("remote %s", pc.RemoteAddr())
	}
}
