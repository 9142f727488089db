package daemon

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// smBackends starts a TLCP and a TLS 1.3-SM HTTP backend with p's server
// certificates and returns their addresses.
func smBackends(t *testing.T, p *devpki.PKI) (tlcpAddr, sm13Addr string) {
	serve := func(ln net.Listener, name string) {
		t.Cleanup(func() { ln.Close() })
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s backend %s\n", name, r.URL.Path)
		}))
	}
	raw1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(tlcp.NewListener(raw1, &tlcp.Config{Certificates: []tlcp.Certificate{{
		SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: p.ServerSign.Key,
		EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
	}}}), "tlcp")
	raw2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(tls13sm.NewListener(raw2, &tls13sm.Config{Certificates: []tls13sm.Certificate{{
		Certificate: [][]byte{p.ServerSign.Cert.Raw}, PrivateKey: p.ServerSign.Key,
	}}}), "tls13sm")
	return raw1.Addr().String(), raw2.Addr().String()
}

// TestUpstreamReencryption: routes to TLCP and TLS 1.3-SM backends are
// dialed with our clients (the daemon's DialTLSContext wiring).
func TestUpstreamReencryption(t *testing.T) {
	p := testPKI(t)
	tlcpAddr, sm13Addr := smBackends(t, p)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	for _, u := range []struct{ name, proto, addr string }{{"tlcp-up", upstreamproto.TLCP, tlcpAddr}, {"sm13-up", upstreamproto.TLS13SM, sm13Addr}} {
		cfg.Upstreams = append(cfg.Upstreams, conf.Upstream{
			Name: u.name, Protocol: u.proto, Targets: []conf.Target{{Address: u.addr, Weight: 1}},
			TLS:      conf.UpstreamTLSConfig{ServerName: "localhost"},
			Material: conf.UpstreamMaterial{RootCAs: []*smx509.Certificate{p.CA.Cert}},
		})
	}
	cfg.Sites[0].Routes = append([]conf.Route{
		{Name: "to-tlcp", PathPrefix: "/tlcp/", Upstream: "tlcp-up"},
		{Name: "to-sm13", PathPrefix: "/sm13/", Upstream: "sm13-up"},
	}, cfg.Sites[0].Routes...)
	d := startDaemon(t, cfg)
	c := tlsClient(t, d.addr, "localhost", false)
	for path, want := range map[string]string{"/tlcp/x": "tlcp backend /tlcp/x\n", "/sm13/y": "tls13sm backend /sm13/y\n"} {
		for i := 0; i < 2; i++ { // the second request reuses the pooled connection
			if body, resp := get(t, c, "https://localhost"+path); body != want {
				t.Errorf("%s: %d %q, want %q", path, resp.StatusCode, body, want)
			}
		}
	}
}

// TestUpstreamCertificateVerified: a TLCP or TLS 1.3-SM backend whose
// certificate does not name the configured server_name, or does not chain
// to the upstream's CA, gets no request (502); the same backend with the
// right name and CA is served.
func TestUpstreamCertificateVerified(t *testing.T) {
	p := testPKI(t)
	other, err := devpki.Generate(devpki.Options{Hosts: []string{"localhost"}, SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	tlcpAddr, sm13Addr := smBackends(t, p)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cases := []struct {
		path, proto, addr, name string
		root                    *smx509.Certificate
		want                    int
	}{
		{"/tlcp-good/", upstreamproto.TLCP, tlcpAddr, "localhost", p.CA.Cert, 200},
		{"/tlcp-name/", upstreamproto.TLCP, tlcpAddr, "not-the-backend.example", p.CA.Cert, 502},
		{"/tlcp-ca/", upstreamproto.TLCP, tlcpAddr, "localhost", other.CA.Cert, 502},
		{"/sm13-good/", upstreamproto.TLS13SM, sm13Addr, "localhost", p.CA.Cert, 200},
		{"/sm13-name/", upstreamproto.TLS13SM, sm13Addr, "not-the-backend.example", p.CA.Cert, 502},
		{"/sm13-ca/", upstreamproto.TLS13SM, sm13Addr, "localhost", other.CA.Cert, 502},
	}
	var routes []conf.Route
	for i, tc := range cases {
		name := fmt.Sprintf("up%d", i)
		cfg.Upstreams = append(cfg.Upstreams, conf.Upstream{
			Name: name, Protocol: tc.proto, Targets: []conf.Target{{Address: tc.addr, Weight: 1}},
			TLS:      conf.UpstreamTLSConfig{ServerName: tc.name},
			Material: conf.UpstreamMaterial{RootCAs: []*smx509.Certificate{tc.root}},
		})
		routes = append(routes, conf.Route{Name: name, PathPrefix: tc.path, Upstream: name})
	}
	cfg.Sites[0].Routes = append(routes, cfg.Sites[0].Routes...)
	d := startDaemon(t, cfg)
	c := tlsClient(t, d.addr, "localhost", false)
	for _, tc := range cases {
		body, resp := get(t, c, "https://localhost"+tc.path)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.path, resp.StatusCode, body, tc.want)
		}
		if tc.want != 200 && strings.Contains(body, "backend") {
			t.Errorf("%s: the backend answered: %q", tc.path, body)
		}
	}
}
