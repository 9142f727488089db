package daemon

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/emmansun/gmsm/pkcs8"

	"github.com/gmproxy/gmproxy/conf"
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
	d := startDaemon(t, cfg)
	body, resp := get(t, smClient(t, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false), "https://localhost/x")
	if body != "tls backend\n" {
		t.Fatalf("%d %q, want the TLS backend's answer", resp.StatusCode, body)
	}
	if got := <-presented; !bytes.Equal(got, p.ECDSAServer.Cert.Raw) {
		t.Error("the target was not presented the configured client certificate")
	}
}
