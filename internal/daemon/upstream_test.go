package daemon

import (
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// TestUpstreamReencryption: routes to TLCP and TLS 1.3-SM backends are
// dialed with our clients (the daemon's DialTLSContext wiring).
func TestUpstreamReencryption(t *testing.T) {
	p := testPKI(t)
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

	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	for _, u := range []struct{ name, proto, addr string }{{"tlcp-up", upstreamproto.TLCP, raw1.Addr().String()}, {"sm13-up", upstreamproto.TLS13SM, raw2.Addr().String()}} {
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
