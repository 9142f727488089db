package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/keyserver"
)

// TestKeyServerReloadsClientCA: the operator replaces the contents of
// tls.client_ca (to stop trusting a compromised CA) and sends SIGHUP. The
// new CA is applied at once: a certificate of the old CA is refused on a
// new connection and on the connection it already had open (its next
// request is forbidden), and a certificate of the new CA with the same
// subject is served.
func TestKeyServerReloadsClientCA(t *testing.T) {
	dir, ksFile := keyServerFiles(t, "")
	ks := startKeyServerCmd(t, "-c", ksFile)
	// The key server's own certificate comes from the same CA.
	pool, oldCert := keyServerClientPKI(t, dir)
	client := func(cert tls.Certificate) *keyserver.Client { return keyServerTLSClient(t, ks.addr, pool, cert) }
	open := client(oldCert)
	if err := open.Ping(context.Background()); err != nil {
		t.Fatalf("client of the configured CA: %v", err)
	}

	// Another CA replaces the old one in the same file, and issues a
	// client certificate with the subject the grant names.
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "new key server client CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "gmproxy", Organization: []string{"gmproxy test PKI"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	newCert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	if err := client(newCert).Ping(context.Background()); err == nil {
		t.Fatal("a certificate of a CA not yet configured was served")
	}
	if err := os.WriteFile(filepath.Join(dir, "keyserver_ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	ks.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(ks.stderr.String(), "keys reloaded") })

	if err := client(oldCert).Ping(context.Background()); err == nil {
		t.Error("after the reload, a new connection with a certificate of the replaced CA is served")
	}
	if err := open.Ping(context.Background()); !errors.Is(err, keyserver.ErrForbidden) {
		t.Errorf("after the reload, the connection the replaced CA's certificate had open: %v, want forbidden", err)
	}
	if err := client(newCert).Ping(context.Background()); err != nil {
		t.Errorf("after the reload, a certificate of the new CA: %v", err)
	}
}

// TestKeyServerHandshakeLimits: max_handshakes and
// max_handshakes_per_address reach the key server: with one silent
// connection per address allowed and two in all, a second from the same
// address and a third from another are closed at once, long before the
// minute of handshake_timeout.
func TestKeyServerHandshakeLimits(t *testing.T) {
	_, ksFile := keyServerFiles(t, `handshake_timeout: 1m
max_handshakes: 2
max_handshakes_per_address: 1
`)
	ks := startKeyServerCmd(t, "-c", ksFile)
	silentFrom := func(ip string) net.Conn { return testpeer.DialFrom(t, ip, ks.addr) }
	closedAtOnce := func(c net.Conn) bool { return testpeer.ClosedWithin(c, 10*time.Second) }
	// The server accepts in order: each is tracked before the next.
	silentFrom("127.0.0.1")
	if !closedAtOnce(silentFrom("127.0.0.1")) {
		t.Error("a second handshake from one address was not closed at once (max_handshakes_per_address: 1)")
	}
	silentFrom("127.0.0.2")
	if !closedAtOnce(silentFrom("127.0.0.3")) {
		t.Error("a third handshake in all was not closed at once (max_handshakes: 2)")
	}
	if !strings.Contains(ks.stderr.String(), "handshake_limit") {
		t.Errorf("refusals not logged:\n%s", ks.stderr.String())
	}
}

// keyServerFiles writes the test PKI of gmproxy certs -keyserver and a
// key server configuration serving its signing key to the gmproxy client
// certificate, with extra YAML lines appended; it returns the folder and
// the configuration file.
func keyServerFiles(t *testing.T, extra string) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	if code, _, errs := ccRun("certs", "-out", dir, "-hosts", "localhost,127.0.0.1", "-keyserver", "127.0.0.1"); code != 0 {
		t.Fatalf("certs: exit %d: %s", code, errs)
	}
	file = filepath.Join(dir, "keyserver.yaml")
	if err := os.WriteFile(file, []byte(`listen: 127.0.0.1:0
tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}
keys: [{key: server_sign.key, cert: server_sign.crt}]
clients: [{name: edge, subject: "CN=gmproxy,O=gmproxy test PKI", keys: [server_sign]}]
`+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// TestKeyServerReloadLogsWarnings: a reload logs the warnings of the file
// it applies, as the start does: an edit that serves one key file twice
// (a warning of the configuration) and gives a client a name of 129 bytes
// (one the metrics do not show as it is) is warned of at the SIGHUP, not
// only at the next restart.
func TestKeyServerReloadLogsWarnings(t *testing.T) {
	_, ksFile := keyServerFiles(t, "")
	ks := startKeyServerCmd(t, "-c", ksFile)
	if err := os.WriteFile(ksFile, []byte(`listen: 127.0.0.1:0
tls: {cert: keyserver.crt, key: keyserver.key, client_ca: keyserver_ca.crt}
keys:
  - {key: server_sign.key, cert: server_sign.crt}
  - {name: again, key: server_sign.key, roles: [sign]}
clients: [{name: `+strings.Repeat("c", 129)+`, subject: "CN=gmproxy,O=gmproxy test PKI", keys: [server_sign]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ks.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(ks.stderr.String(), "keys reloaded") })
	log := ks.stderr.String()
	for _, want := range []string{`is already served`, `clients[0].name: name \"` + strings.Repeat("c", 129) + `\" is 129 bytes long`} {
		if !strings.Contains(log, want) {
			t.Errorf("the reload's log lacks %q:\n%s", want, log)
		}
	}
}

// TestKeyServerReloadsLimits: SIGHUP applies a changed
// max_handshakes_per_address (and the other timeouts and connection
// limits) to the connections that come after it: a second silent
// connection from one address, closed at once under 1, is held under 2.
func TestKeyServerReloadsLimits(t *testing.T) {
	_, ksFile := keyServerFiles(t, `handshake_timeout: 1m
max_handshakes_per_address: 1
`)
	ks := startKeyServerCmd(t, "-c", ksFile)
	silentFrom := func(ip string) net.Conn { return testpeer.DialFrom(t, ip, ks.addr) }
	silentFrom("127.0.0.1")
	if !testpeer.ClosedWithin(silentFrom("127.0.0.1"), 10*time.Second) {
		t.Fatal("a second handshake from one address was not closed at once (max_handshakes_per_address: 1)")
	}
	b, err := os.ReadFile(ksFile)
	if err != nil {
		t.Fatal(err)
	}
	raised := strings.Replace(string(b), "max_handshakes_per_address: 1", "max_handshakes_per_address: 2", 1)
	if raised == string(b) {
		t.Fatal("the test's file has no max_handshakes_per_address: 1")
	}
	if err := os.WriteFile(ksFile, []byte(raised), 0o600); err != nil {
		t.Fatal(err)
	}
	ks.sigs <- syscall.SIGHUP
	waitFor(t, func() bool { return strings.Contains(ks.stderr.String(), "keys reloaded") })
	if strings.Contains(ks.stderr.String(), "restart it to apply") {
		t.Errorf("the reload asked for a restart for a limit it applies:\n%s", ks.stderr.String())
	}
	if testpeer.ClosedWithin(silentFrom("127.0.0.1"), time.Second) {
		t.Error("after the reload to max_handshakes_per_address: 2, a second silent connection from one address was closed")
	}
}

// TestKeyServerReloadOfListenKeepsServing: listen needs a restart, so a
// SIGHUP with listen moved from host:port to unix:/path is refused and the
// running TCP listener goes on serving its clients, open connections and
// new ones. Before, the reload installed the Unix-socket configuration's
// policy (no clients[], a local grant) on the running TCP listener, and
// every edge was refused as "not in the allow-list" until the restart.
func TestKeyServerReloadOfListenKeepsServing(t *testing.T) {
	dir, ksFile := keyServerFiles(t, "")
	ks := startKeyServerCmd(t, "-c", ksFile)
	pool, cert := keyServerClientPKI(t, dir)
	newClient := func() *keyserver.Client { return keyServerTLSClient(t, ks.addr, pool, cert) }
	open := newClient()
	if err := open.Ping(context.Background()); err != nil {
		t.Fatalf("before the reload: %v", err)
	}

	// The operator prepares the move to a Unix socket (to apply at the
	// next restart); a SIGHUP comes first (log rotation, config management).
	sock := filepath.Join(dir, "ks.sock")
	b, err := os.ReadFile(ksFile)
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(string(b), "listen: 127.0.0.1:0", "listen: unix:"+sock, 1)
	if err := os.WriteFile(ksFile, []byte(moved), 0o600); err != nil {
		t.Fatal(err)
	}
	ks.sigs <- syscall.SIGHUP
	waitFor(t, func() bool {
		s := ks.stderr.String()
		return strings.Contains(s, "keys reloaded") || strings.Contains(s, "reload refused")
	})
	if s := ks.stderr.String(); !strings.Contains(s, "reload refused: listen moved") {
		t.Errorf("the reload was not refused for its listen:\n%s", s)
	}
	if err := open.Ping(context.Background()); err != nil {
		t.Errorf("after a reload that changed only listen (needs a restart), the open connection: %v", err)
	}
	if err := newClient().Ping(context.Background()); err != nil {
		t.Errorf("after a reload that changed only listen (needs a restart), a new connection on the running listener: %v", err)
	}
}

// keyServerClientPKI returns the CA of the test key server's files in dir
// (it issued the key server's certificate too) and the client
// certificate it issued.
func keyServerClientPKI(t *testing.T, dir string) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dir, "keyserver_ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "keyserver_client.crt"), filepath.Join(dir, "keyserver_client.key"))
	if err != nil {
		t.Fatal(err)
	}
	return pool, cert
}

// keyServerTLSClient is a key server client of one connection to addr,
// presenting cert and trusting pool, closed when the test ends.
func keyServerTLSClient(t *testing.T, addr string, pool *x509.CertPool, cert tls.Certificate) *keyserver.Client {
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	kc := &keyserver.Client{Timeout: 5 * time.Second, Conns: 1, Endpoints: []keyserver.Endpoint{{Address: addr, Dial: func(ctx context.Context) (net.Conn, error) {
		return (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	}}}}
	t.Cleanup(kc.Close)
	return kc
}

// TestKeyServerRestartOnlyChanges: every key server setting a reload does
// not apply is named when it changes (listen_group, shutdown_grace and log
// went unmentioned, silently not applied), and nothing else is.
func TestKeyServerRestartOnlyChanges(t *testing.T) {
	running := &conf.KeyServerFile{Listen: "/run/ks.sock", ShutdownGrace: time.Second, Log: conf.Log{Level: "info"}}
	next := *running
	next.ListenGroup = "gmproxy"
	next.ShutdownGrace = time.Minute
	next.Log.Level = "debug"
	next.MaxConnections = 5 // applied by a reload
	if got, want := restartOnlyChanges(running, &next), []string{"listen_group", "shutdown_grace", "log"}; !slices.Equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	if got := restartOnlyChanges(running, running); len(got) != 0 {
		t.Errorf("no change named %v", got)
	}
}
