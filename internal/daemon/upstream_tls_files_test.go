package daemon

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/emmansun/gmsm/pkcs8"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestUpstreamTLSFilesAsLoaded: an upstream of protocol tls whose ca, cert
// and key are named relative to the configuration file, the key encrypted
// under key_password_file, is served with what conf loaded: the daemon,
// whose working directory is elsewhere, verifies the target with that CA
// and presents that certificate. The proxy read the files again, relative
// to the working directory and without the password, so a configuration
// that gmproxy check passed could not start.
func TestUpstreamTLSFilesAsLoaded(t *testing.T) {
	p := testPKI(t)
	dir := t.TempDir()
	if _, err := p.WriteFiles(filepath.Join(dir, "pki")); err != nil {
		t.Fatal(err)
	}
	der, err := pkcs8.MarshalPrivateKey(p.ECDSAServer.Key, []byte("secret"), pkcs8.DefaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"client.key": pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}),
		"client.pw":  []byte("secret\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, "pki", name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key, err := p.ECDSAServer.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(p.ECDSAServer.CertPEM(), key)
	if err != nil {
		t.Fatal(err)
	}
	presented := make(chan []byte, 1)
	b := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if certs := r.TLS.PeerCertificates; len(certs) > 0 {
			select {
			case presented <- certs[0].Raw:
			default:
			}
		}
		fmt.Fprint(w, "tls backend\n")
	}))
	b.TLS = &tls.Config{Certificates: []tls.Certificate{kp}, ClientAuth: tls.RequireAnyClientCert}
	b.StartTLS()
	t.Cleanup(b.Close)
	yaml := fmt.Sprintf(`listeners:
  - address: 127.0.0.1:0
sites:
  - server_names: [localhost]
    tlcp:
      sign_cert: pki/server_sign.crt
      sign_key: pki/server_sign.key
      enc_cert: pki/server_enc.crt
      enc_key: pki/server_enc.key
    routes:
      - {path_prefix: /, upstream: app}
upstreams:
  - name: app
    protocol: tls
    targets: [%s]
    tls:
      ca: pki/ecdsa_ca.crt
      server_name: localhost
      cert: pki/server_ecdsa.crt
      key: pki/client.key
      key_password_file: pki/client.pw
`, b.Listener.Addr())
	file := filepath.Join(dir, "gmproxy.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if wd, _ := os.Getwd(); filepath.Clean(wd) == filepath.Clean(dir) {
		t.Fatal("the test needs a working directory other than the configuration's")
	}
	cfg, err := conf.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AccessLog.Path = "off"
	d := startDaemon(t, cfg)
	body, resp := get(t, smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false), "https://localhost/x")
	if body != "tls backend\n" {
		t.Fatalf("%d %q, want the TLS backend's answer", resp.StatusCode, body)
	}
	if got := <-presented; !bytes.Equal(got, p.ECDSAServer.Cert.Raw) {
		t.Error("the target was not presented the configured client certificate")
	}
}

// TestUpstreamHandshakeBoundedByConnect: a TLCP or TLS 1.3-SM target
// that accepts the connection and never answers the ClientHello holds a
// request no longer than timeouts.connect allows for the handshake: the
// client gets 502 well before it gives up. The handshake had a fixed 10 s
// after the connect, whatever timeouts.connect said, and no key to set it.
func TestUpstreamHandshakeBoundedByConnect(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	p := testPKI(t)
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	for _, proto := range []string{upstreamproto.TLCP, upstreamproto.TLS13SM} {
		cfg.Upstreams = append(cfg.Upstreams, conf.Upstream{
			Name: proto, Protocol: proto, Targets: []conf.Target{{Address: silent.Addr().String(), Weight: 1}},
			Timeouts: conf.Timeouts{Connect: 200 * time.Millisecond},
			TLS:      conf.UpstreamTLSConfig{ServerName: "localhost"},
			Material: conf.UpstreamMaterial{RootCAs: []*smx509.Certificate{p.CA.Cert}},
		})
		cfg.Sites[0].Routes = append([]conf.Route{{Name: proto, PathPrefix: "/" + proto + "/", Upstream: proto}}, cfg.Sites[0].Routes...)
	}
	d := startDaemon(t, cfg)
	c := smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false)
	// Well below the 10 s the handshake had, well above 200 ms.
	c.Timeout = 8 * time.Second
	for _, proto := range []string{upstreamproto.TLCP, upstreamproto.TLS13SM} {
		resp, err := c.Get("https://localhost/" + proto + "/x")
		if err != nil {
			t.Fatalf("%s: %v (the handshake with the silent target was not cut at timeouts.connect)", proto, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("%s: status %d, want 504 (upstream timed out)", proto, resp.StatusCode)
		}
	}
}
