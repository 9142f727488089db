package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// forgeableHeaders are the request headers gmproxy sets (the exported
// single source of truth) and Forwarded: a client's copy must never reach
// a backend as sent.
func forgeableHeaders() []string {
	return append(slices.Clone(SetRequestHeaders), HeaderForwarded)
}

// forgedValue is what the client claims in every forged header; it is an
// address so that X-Forwarded-For parsing takes it.
const forgedValue = "6.6.6.6"

// TestForgedHeadersNeverReachBackend forges every header gmproxy sets, on
// every kind of connection, with the site's TLS and client-certificate
// headers on and off: the backend must never see a forged value.
func TestForgedHeadersNeverReachBackend(t *testing.T) {
	e := echoBackend(t)
	cert := testClientCert(t)
	tlcpCert := &frontdoor.ConnState{Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3",
		SNI: "example.test", ClientAuth: true, PeerCertificates: []*smx509.Certificate{cert}}
	tlsNoCert := &frontdoor.ConnState{Site: "s", Family: frontdoor.FamilyTLS, Protocol: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256", SNI: "example.test"}
	trustedProxy := func(ln net.Listener) net.Listener {
		pl, err := NewProxyProtocolListener(ln, []string{"127.0.0.1"}, time.Second, false)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	conns := []struct {
		name string
		opts frontOpts
	}{
		{"plain", frontOpts{}},
		{"tls-without-client-cert", frontOpts{state: tlsNoCert}},
		{"tlcp-with-client-cert", frontOpts{state: tlcpCert}},
		{"trusted-proxy-protocol-peer", frontOpts{wrap: trustedProxy}},
	}
	for _, on := range []bool{false, true} {
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
			Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, TLSInfoHeaders: on, ClientCertHeaders: on, ClientCertPEM: on,
				Routes: []RouteConfig{{Upstream: "e"}}}},
		}
		for _, cc := range conns {
			name := cc.name + "/site-headers-off"
			if on {
				name = cc.name + "/site-headers-on"
			}
			t.Run(name, func(t *testing.T) {
				f := newFront(t, cfg, cc.opts)
				h := forgedRequest(t, f.addr, cc.opts.wrap != nil)
				for _, k := range forgeableHeaders() {
					for _, v := range h[http.CanonicalHeaderKey(k)] {
						if strings.Contains(v, forgedValue) {
							t.Errorf("forged %s reached the backend: %q", k, v)
						}
					}
				}
			})
		}
	}
}

// forgedRequest sends a request forging every header (after a PROXY v1
// line from a trusted balancer when proxied) and returns the headers the
// backend saw.
func forgedRequest(t *testing.T, addr string, proxied bool) http.Header {
	t.Helper()
	c := dialRaw(t, addr)
	var b strings.Builder
	if proxied {
		src, _ := net.ResolveTCPAddr("tcp", "203.0.113.7:54321")
		dst, _ := net.ResolveTCPAddr("tcp", addr)
		b.Write(AppendProxyHeaderV1(nil, src, dst))
	}
	b.WriteString("GET / HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n")
	for _, k := range forgeableHeaders() {
		b.WriteString(k + ": " + forgedValue + "\r\n")
		// A second copy in another case must not survive either.
		b.WriteString(strings.ToLower(k) + ": " + forgedValue + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	return decodeSeen(t, string(body)).Header
}

// TestTrustedOnlyHeadersFromClients: a client's copy of a header that
// backends read as what a proxy in front of them saw (its address, port,
// scheme, the URL before a rewrite) never reaches a backend, in any case
// or spelled with '_'; the same headers from a trusted proxy pass as
// they came.
func TestTrustedOnlyHeadersFromClients(t *testing.T) {
	e := echoBackend(t)
	for _, trusted := range []bool{false, true} {
		t.Run(map[bool]string{false: "client", true: "trusted-proxy"}[trusted], func(t *testing.T) {
			cfg := Config{Upstreams: []UpstreamConfig{upstream("e", addrOf(e))}, Sites: oneSite(RouteConfig{Upstream: "e"})}
			if trusted {
				cfg.TrustedProxies = []string{"127.0.0.0/8"}
			}
			f := newFront(t, cfg, frontOpts{})
			c := dialRaw(t, f.addr)
			var b strings.Builder
			b.WriteString("GET / HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n")
			for _, k := range TrustedOnlyRequestHeaders {
				b.WriteString(k + ": " + forgedValue + "\r\n")
				b.WriteString(strings.ToLower(k) + ": " + forgedValue + "\r\n")
				b.WriteString(strings.ReplaceAll(k, "-", "_") + ": " + forgedValue + "\r\n")
			}
			b.WriteString("\r\n")
			io.WriteString(c, b.String())
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			seen := decodeSeen(t, string(body)).Header
			for _, k := range TrustedOnlyRequestHeaders {
				got := seen[k]
				if trusted && len(got) != 2 {
					t.Errorf("%s from a trusted proxy: the backend saw %q; want both copies", k, got)
				}
				if !trusted && len(got) > 0 {
					t.Errorf("a client's %s reached the backend: %q", k, got)
				}
				if u := seen[http.CanonicalHeaderKey(strings.ReplaceAll(k, "-", "_"))]; len(u) > 0 {
					t.Errorf("%s spelled with '_' reached the backend: %q", k, u)
				}
			}
		})
	}
}
