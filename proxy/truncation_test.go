package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// truncatingSMBackend serves one close-delimited HTTP/1.1 response per
// connection (no Content-Length, no chunked coding, "Connection: close")
// over TLCP or TLS 1.3-SM. With notify the TLS layer is closed properly
// (close_notify); without, the TCP connection is closed under it, as an
// on-path attacker injecting a FIN would do: the response is truncated.
func truncatingSMBackend(t *testing.T, proto string, notify bool) (string, *UpstreamTLSConfig) {
	p, caPool, inner := smBackendFixture(t)
	var wrap func(net.Conn) interface {
		net.Conn
		Handshake() error
	}
	var ctls *UpstreamTLSConfig
	switch proto {
	case "tlcp":
		cert, err := tlcp.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), p("server_enc.crt"), p("server_enc.key"), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tlcp.Config{Certificates: []tlcp.Certificate{cert}, ClientCAs: caPool, ClientAuth: tlcp.RequireAndVerifyClientCert}
		wrap = func(c net.Conn) interface {
			net.Conn
			Handshake() error
		} {
			return tlcp.Server(c, cfg)
		}
		ctls = tlcpClientTLS(p)
	default:
		cert, err := tls13sm.LoadX509KeyPair(p("server_sign.crt"), p("server_sign.key"), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{cert}, ClientCAs: caPool, ClientAuth: tls13sm.RequireAndVerifyClientCert}
		wrap = func(c net.Conn) interface {
			net.Conn
			Handshake() error
		} {
			return tls13sm.Server(c, cfg)
		}
		ctls = tls13smClientTLS(p, "TLS_SM4_GCM_SM3")
	}
	addr := serveConns(t, inner, func(raw net.Conn) {
		raw.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		c := wrap(raw)
		if err := c.Handshake(); err != nil {
			return
		}
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\n")
		io.WriteString(c, "balance: 100") // the real body would go on: "0000 CNY"
		time.Sleep(50 * time.Millisecond)
		if notify {
			c.Close()
		} else {
			raw.Close() // TCP FIN, no close_notify
		}
	})
	return addr, ctls
}

// TestTruncatedUpstreamResponseNotCompleted: a response with neither
// chunked coding nor Content-Length is complete only if close_notify came
// (RFC 9112 §9.8). A TLCP or TLS 1.3-SM target whose TCP connection ends
// without it (an injected FIN) gives a truncated body: the proxy's client
// sees its response cut, not a complete 200 ("balance: 100" of "balance:
// 1000000 CNY"); with close_notify the same response is complete.
func TestTruncatedUpstreamResponseNotCompleted(t *testing.T) {
	for _, proto := range []string{"tlcp", "tls13sm"} {
		t.Run(proto, func(t *testing.T) {
			// Control: with close_notify the same response is complete.
			{
				addr, ctls := truncatingSMBackend(t, proto, true)
				f := newFront(t, smProxyTo("gm", proto, addr, ctls), frontOpts{})
				if code, body, _ := get(t, testClient(t), f.url+"/"); code != 200 || body != "balance: 100" {
					t.Fatalf("control (close_notify sent): %d %q", code, body)
				}
			}
			addr, ctls := truncatingSMBackend(t, proto, false)
			f := newFront(t, smProxyTo("gm", proto, addr, ctls), frontOpts{})
			c := testClient(t)
			res, err := c.Get(f.url + "/")
			if err != nil {
				return // refused before the head: not completed either
			}
			defer res.Body.Close()
			body, rerr := io.ReadAll(res.Body)
			if rerr == nil {
				t.Errorf("%s target closed the TCP connection without close_notify in a close-delimited body; the proxy passed the truncated body %q on as a complete %d response", proto, body, res.StatusCode)
			}
		})
	}
}

// TestBrokenResponseBeforeAnyByteSent: a target that closes its connection
// in the middle of a body the proxy was still buffering (nothing of the
// response had reached the client) gets its client a whole 502, logged as
// 502; the connection was closed on nothing before, which a client cannot
// tell from a server that never answered. Once the head is out (a body
// larger than the write buffer), the response can only end broken.
func TestBrokenResponseBeforeAnyByteSent(t *testing.T) {
	for _, tt := range []struct {
		name     string
		declared int // Content-Length
		sent     int // body bytes sent before the close
		want502  bool
	}{
		{"buffered", 100, 5, true},
		{"head out", 1 << 20, 256 << 10, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := connBackend(t, func(c net.Conn) {
				c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", tt.declared)
				c.Write(bytes.Repeat([]byte("x"), tt.sent))
			})
			path := filepath.Join(t.TempDir(), "access.log")
			cfg := proxyTo(addr)
			cfg.AccessLog = AccessLogConfig{Path: path, Format: "template", Template: "{status}"}
			f := newFront(t, cfg, frontOpts{})
			res, err := testClient(t).Get(f.url + "/")
			if err != nil {
				if tt.want502 {
					t.Fatalf("want a 502, got %v", err)
				}
				return
			}
			body, rerr := io.ReadAll(res.Body)
			res.Body.Close()
			if !tt.want502 {
				if rerr == nil {
					t.Fatalf("a %d response cut by its target reached the client whole (%d bytes)", res.StatusCode, len(body))
				}
				return
			}
			if res.StatusCode != http.StatusBadGateway || rerr != nil {
				t.Fatalf("got %d (body %d bytes, %v), want a whole 502", res.StatusCode, len(body), rerr)
			}
			f.p.AccessLog().Flush()
			if data, _ := os.ReadFile(path); strings.TrimSpace(string(data)) != "502" {
				t.Errorf("access log %q, want 502", data)
			}
		})
	}
}
