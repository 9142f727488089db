package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

type reviewConnKey struct{}

// identityBackends serve TLCP and TLS 1.3-SM backends that accept an
// optional client certificate of the test CA and answer with the client
// identity they see ("client=<CN>" or "client=-") and whether the session
// was resumed; every response closes the connection, so each request
// makes a new (resumable) handshake.
func identityBackends(t *testing.T) (tlcpAddr, sm13Addr string) {
	p := testPKI(t)
	pool := smx509.NewCertPool()
	pool.AddCert(p.CA.Cert)
	tk, err := ticket.NewKey([]byte("review upstream ticket key 32 by"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serve := func(ln net.Listener) {
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				cn, resumed := "-", false
				switch c := r.Context().Value(reviewConnKey{}).(type) {
				case *tlcp.Conn:
					st := c.ConnectionState()
					if len(st.PeerCertificates) > 0 {
						cn = st.PeerCertificates[0].Subject.CommonName
					}
					resumed = st.DidResume
				case *tls13sm.Conn:
					st := c.ConnectionState()
					if len(st.PeerCertificates) > 0 {
						cn = st.PeerCertificates[0].Subject.CommonName
					}
					resumed = st.DidResume
				}
				fmt.Fprintf(w, "client=%s resumed=%v", cn, resumed)
			}),
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				return context.WithValue(ctx, reviewConnKey{}, c)
			},
		}
		t.Cleanup(func() { srv.Close() })
		go srv.Serve(ln)
	}
	raw1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(tlcp.NewListener(raw1, &tlcp.Config{Certificates: []tlcp.Certificate{{
		SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: p.ServerSign.Key,
		EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
	}}, TicketKeys: ticket.Static{tk}, ClientAuth: tlcp.VerifyClientCertIfGiven, ClientCAs: pool,
		CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}))
	raw2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(tls13sm.NewListener(raw2, &tls13sm.Config{Certificates: []tls13sm.Certificate{{
		Certificate: [][]byte{p.ServerSign.Cert.Raw}, PrivateKey: p.ServerSign.Key,
	}}, TicketKeys: ticket.Static{tk}, ClientAuth: tls13sm.VerifyClientCertIfGiven, ClientCAs: pool}))
	return raw1.Addr().String(), raw2.Addr().String()
}

// TestUpstreamClientIdentityFollowsReload: an upstream is first configured
// with a client certificate (the proxy's identity towards the backend),
// then a reload removes it. The upstream's client sessions outlive reloads
// only under the same identity: the next connection does not resume a
// session made with the removed certificate, and the backend sees none.
func TestUpstreamClientIdentityFollowsReload(t *testing.T) {
	p := testPKI(t)
	tlcpAddr, sm13Addr := identityBackends(t)
	b := newBackend(t)
	mk := func(withCert bool) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		for _, u := range []struct{ name, proto, addr string }{{"tlcp", upstreamproto.TLCP, tlcpAddr}, {"tls13sm", upstreamproto.TLS13SM, sm13Addr}} {
			up := conf.Upstream{
				Name: u.name, Protocol: u.proto, Targets: []conf.Target{{Address: u.addr, Weight: 1}},
				TLS:      conf.UpstreamTLSConfig{ServerName: "localhost"},
				Material: conf.UpstreamMaterial{RootCAs: []*smx509.Certificate{p.CA.Cert}},
			}
			if withCert {
				up.Material.ClientCert = pair(p.ClientSign)
				up.Material.Sign, up.Material.Enc = pair(p.ClientSign), pair(p.ClientEnc)
			}
			cfg.Upstreams = append(cfg.Upstreams, up)
			cfg.Sites[0].Routes = append([]conf.Route{{Name: "to-" + u.name, PathPrefix: "/" + u.name + "/", Upstream: u.name}}, cfg.Sites[0].Routes...)
		}
		return cfg
	}
	clientCN := p.ClientSign.Cert.Subject.CommonName
	td := startDaemon(t, mk(true))
	c := tlsClient(t, td.addr, "localhost", false)
	for _, name := range []string{"tlcp", "tls13sm"} {
		body, resp := get(t, c, "https://localhost/"+name+"/a")
		if resp.StatusCode != 200 || !strings.Contains(body, "client="+clientCN) {
			t.Fatalf("%s with the client certificate: %d %q", name, resp.StatusCode, body)
		}
	}
	td.reloadWith(t, mk(false))
	// Control: a fresh daemon with the second configuration presents no
	// client certificate.
	fresh := startDaemon(t, mk(false))
	fc := tlsClient(t, fresh.addr, "localhost", false)
	for _, name := range []string{"tlcp", "tls13sm"} {
		if body, resp := get(t, fc, "https://localhost/"+name+"/c"); resp.StatusCode != 200 || !strings.Contains(body, "client=-") {
			t.Fatalf("control %s: %d %q", name, resp.StatusCode, body)
		}
	}
	c = tlsClient(t, td.addr, "localhost", false)
	for _, name := range []string{"tlcp", "tls13sm"} {
		body, resp := get(t, c, "https://localhost/"+name+"/b")
		if resp.StatusCode != 200 || strings.Contains(body, "client="+clientCN) {
			t.Errorf("%s: after a reload removed the upstream client certificate, the backend still authenticates the proxy as %q (%s): the cached session carrying the old client identity was resumed", name, clientCN, body)
		}
	}
}
