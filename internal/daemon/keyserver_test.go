package daemon

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
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/keyserver"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// writeMTLS writes an ECDSA CA and key server / gmproxy client
// certificates for mutual TLS into dir (mtls_ca.crt, keyserver.crt/.key,
// client.crt/.key) and returns the key server's tls.Config.
func writeMTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "key server test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("mtls_ca.crt", "CERTIFICATE", caDER)
	leaf := func(name, cn string, eku x509.ExtKeyUsage) tls.Certificate {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(k)
		write(name+".crt", "CERTIFICATE", der)
		write(name+".key", "PRIVATE KEY", kder)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	srv := leaf("keyserver", "keyserver.test", x509.ExtKeyUsageServerAuth)
	leaf("client", "gmproxy.test", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{Certificates: []tls.Certificate{srv}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
}

// testKeyServer is a key server on loopback holding the test PKI's server
// sign and enc keys.
type testKeyServer struct {
	ks   *keyserver.Server
	addr string
}

// startKeyServer serves the keys to writeMTLS's client certificate.
func startKeyServer(t *testing.T, srvTLS *tls.Config, opts ...func(*keyserver.Server)) *testKeyServer {
	t.Helper()
	p := testPKI(t)
	ks := &keyserver.Server{}
	for _, o := range opts {
		o(ks)
	}
	err := ks.SetPolicy(&keyserver.Policy{
		Keys: []keyserver.Key{{Name: "sign", Private: p.ServerSign.Key.(*sm2.PrivateKey), Roles: keyserver.RoleSign},
			{Name: "enc", Private: p.ServerEnc.Key.(*sm2.PrivateKey), Roles: keyserver.RoleDecrypt | keyserver.RoleKeyAgreement}},
		Clients: []keyserver.Grant{{Name: "edge", Subject: "CN=gmproxy.test", Keys: []string{"sign", "enc"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	go ks.Serve(ln)
	t.Cleanup(func() { ks.Shutdown(context.Background()) })
	return &testKeyServer{ks: ks, addr: ln.Addr().String()}
}

// remoteKeyConfig writes the test PKI and a configuration whose TLCP sign
// and enc keys (and so the TLS 1.3-SM key) live on the key server at
// ksAddr, and loads it through conf like gmproxy run does.
func remoteKeyConfig(t *testing.T, dir, ksAddrs, backend, timeout string) *conf.Config {
	t.Helper()
	yaml := `listeners: [{address: "127.0.0.1:0", handshake_timeout: 10s}]
key_servers:
  - name: vault
    addresses: [` + ksAddrs + `]
    cert: client.crt
    key: client.key
    ca: mtls_ca.crt
    server_name: keyserver.test
    connect_timeout: 1s
    timeout: ` + timeout + `
sites:
  - name: main
    server_names: [localhost]
    tlcp: {sign_cert: server_sign.crt, sign_key_server: vault, enc_cert: server_enc.crt, enc_key_server: vault}
    tls13sm: {}
    routes: [{path_prefix: /, upstream: app, tls_info_headers: true}]
upstreams: [{name: app, targets: ["` + backend + `"]}]
admin: {address: "off"}
access_log: {path: "off"}
`
	name := filepath.Join(dir, "gmproxy.yaml")
	if err := os.WriteFile(name, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	if _, ok := cfg.Sites[0].Material.TLS13SM.Key.(*conf.RemoteKeyRef); !ok {
		t.Fatal("the TLS 1.3-SM key is not remote")
	}
	return cfg
}

// keyOpSeries returns the series of the counter name (label=value lists) with
// a positive count.
func keyOpSeries(t *testing.T, m *metrics.Metrics, name string) []string {
	t.Helper()
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.Metric {
			if mt.GetCounter().GetValue() <= 0 {
				continue
			}
			var ls []string
			for _, l := range mt.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, strings.Join(ls, ","))
		}
	}
	return out
}

func hasSeries(series []string, parts ...string) bool {
	for _, s := range series {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(s, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestRemoteKeys: the daemon serves TLCP (ECC and ECDHE) and TLS 1.3-SM
// handshakes whose sign and enc keys live on a key server over mutual TLS,
// through the offload engine (key_operations_total{location="remote"});
// a reload to another key server works; when the key server is gone or
// never answers, handshakes fail cleanly within the configured timeouts
// and the error is counted.
func TestRemoteKeys(t *testing.T) {
	dir := t.TempDir()
	if _, err := testPKI(t).WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	srvTLS := writeMTLS(t, dir)
	ks1 := startKeyServer(t, srvTLS)
	b := newBackend(t)
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := remoteKeyConfig(t, dir, ks1.addr, b.Listener.Addr().String(), "2s")
	logBuf := &testpeer.SyncBuffer{}
	td := startDaemon(t, cfg, func(e *Env) {
		e.KeyOps = m
		e.Observer = m
		e.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logBuf, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	// The local keys are not used: the daemon holds none.
	for _, kp := range []*conf.KeyPair{cfg.Sites[0].Material.TLCPSign, cfg.Sites[0].Material.TLCPEnc} {
		if kp.KeyServer != "vault" {
			t.Fatalf("key of %s is not on the key server", kp.CertFile)
		}
	}

	fetchAll := func(step string) {
		t.Helper()
		for _, c := range []struct {
			proto string
			suite uint16
		}{{"tlcp", tlcp.ECC_SM4_GCM_SM3}, {"tlcp", tlcp.ECDHE_SM4_GCM_SM3}, {"tlcp", tlcp.ECC_SM4_CBC_SM3}, {"tls13sm", tls13sm.TLS_SM4_GCM_SM3}} {
			body, _ := get(t, smClient(t, td.addr, c.proto, c.suite, false), "https://localhost/k")
			if !strings.Contains(body, "path=/k") {
				t.Errorf("%s: %s %#04x: body %q", step, c.proto, c.suite, body)
			}
		}
	}
	fetchAll("key server 1")
	// The start-up probes of the remote keys pass, the decryption one
	// included (it must send what the key server decrypts: a TLCP
	// pre-master secret).
	probed := func(role string) bool {
		for _, l := range strings.Split(logBuf.String(), "\n") {
			if strings.Contains(l, "remote key answers") && strings.Contains(l, "role="+role+" ") {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); !probed("sign") || !probed("enc"); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(logBuf.String(), "remote key not usable") || time.Now().After(deadline) {
			t.Fatalf("the probes of the remote keys did not both pass:\n%s", logBuf.String())
		}
	}
	ops := keyOpSeries(t, m, "gmproxy_key_operations_total")
	for _, want := range [][]string{
		{"location=remote", "op=sign", "protocol=tlcp", "result=ok"},
		{"location=remote", "op=decrypt", "protocol=tlcp", "result=ok"},
		{"location=remote", "op=key_agreement", "protocol=tlcp", "result=ok"},
		{"location=remote", "op=sign", "protocol=tls13sm", "result=ok"},
	} {
		if !hasSeries(ops, want...) {
			t.Errorf("key_operations_total lacks %v:\n%s", want, strings.Join(ops, "\n"))
		}
	}
	if hasSeries(ops, "location=local") {
		t.Errorf("local key operations with remote keys:\n%s", strings.Join(ops, "\n"))
	}

	// Reload onto a second key server; the first one goes away.
	ks2 := startKeyServer(t, srvTLS)
	td.setConfig(remoteKeyConfig(t, dir, ks2.addr, b.Listener.Addr().String(), "2s"))
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	ks1.ks.Shutdown(context.Background())
	fetchAll("after reload to key server 2")

	// Two addresses: with one of them killed, every handshake still
	// succeeds on the other.
	ks3 := startKeyServer(t, srvTLS)
	td.setConfig(remoteKeyConfig(t, dir, ks3.addr+", "+ks2.addr, b.Listener.Addr().String(), "2s"))
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	fetchAll("two key servers")
	ks3.ks.Close()
	fetchAll("one of two key servers killed")

	// Key server down: connection refused.
	ks2.ks.Shutdown(context.Background())
	failures := func(step string) {
		t.Helper()
		for _, c := range []struct {
			proto string
			suite uint16
		}{{"tlcp", tlcp.ECC_SM4_GCM_SM3}, {"tlcp", tlcp.ECDHE_SM4_GCM_SM3}, {"tls13sm", tls13sm.TLS_SM4_GCM_SM3}} {
			err := handshakeOnly(t, td.addr, c.proto, c.suite)
			if err == nil {
				t.Errorf("%s: %s %#04x: handshake succeeded without the key server", step, c.proto, c.suite)
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s: %s %#04x: hung until the test's deadline: %v", step, c.proto, c.suite, err)
			}
		}
	}
	failures("key server down")
	errs := keyOpSeries(t, m, "gmproxy_key_operations_total")
	if !hasSeries(errs, "location=remote", "op=sign", "result=error") {
		t.Errorf("no remote key error counted:\n%s", strings.Join(errs, "\n"))
	}
	// The server reports a handshake just after the client saw its alert.
	reasons := func(n int) []string {
		for i := 0; ; i++ {
			td.obs.mu.Lock()
			r := append([]string(nil), td.obs.reasons...)
			td.obs.mu.Unlock()
			if len(r) >= n || i == 200 {
				return r
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if r := reasons(3); len(r) != 3 || r[0] != "internal_error" {
		t.Errorf("failed handshakes reported: %v, want 3 internal_error", r)
	}

	// A key server that completes mutual TLS and never answers: the
	// operation timeout (300ms) ends each attempt.
	hole, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			held = append(held, c)
		}
	}()
	td.setConfig(remoteKeyConfig(t, dir, hole.Addr().String(), b.Listener.Addr().String(), "300ms"))
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	failures("key server silent")
	// The generation's probe of its remote keys reports the silent key
	// server in the log.
	for i := 0; !strings.Contains(logBuf.String(), "remote key not usable") || !strings.Contains(logBuf.String(), "operation timed out after 300ms"); i++ {
		if i == 200 {
			t.Fatal("no log line about the silent key server")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := reasons(6); len(r) != 6 {
		t.Errorf("failed handshakes reported: %v, want 6", r)
	}
}

// handshakeOnly runs one client handshake of proto with suite against the
// daemon at addr (20 s deadline) and returns its error.
func handshakeOnly(t *testing.T, addr, proto string, suite uint16) error {
	t.Helper()
	p := testPKI(t)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	if proto == "tlcp" {
		return tlcp.Client(raw, &tlcp.Config{RootCAs: testRoots(t), ServerName: "localhost", CipherSuites: []uint16{suite},
			Certificates: []tlcp.Certificate{{SignCertificate: [][]byte{p.ClientSign.Cert.Raw}, SignKey: p.ClientSign.Key,
				EncCertificate: p.ClientEnc.Cert.Raw, EncKey: p.ClientEnc.Key}}}).Handshake()
	}
	return tls13sm.Client(raw, &tls13sm.Config{RootCAs: testRoots(t), ServerName: "localhost", CipherSuites: []uint16{suite}}).Handshake()
}

// TestKeyClientsAcrossReloads: a reload that keeps a key server's settings
// keeps its client (and pooled connections); changed settings get a new
// client, and the old one is closed once no generation uses it.
func TestKeyClientsAcrossReloads(t *testing.T) {
	dir := t.TempDir()
	if _, err := testPKI(t).WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	writeMTLS(t, dir)
	cfg1 := remoteKeyConfig(t, dir, "127.0.0.1:1", "127.0.0.1:2", "2s")
	cfg2 := remoteKeyConfig(t, dir, "127.0.0.1:1", "127.0.0.1:2", "2s")
	cfg3 := remoteKeyConfig(t, dir, "127.0.0.1:1", "127.0.0.1:2", "1s")
	env := &Env{}
	defer env.Close()
	closed := func(kc *keyClient) bool {
		return errors.Is(kc.c.Ping(context.Background()), keyserver.ErrClosed)
	}
	a := env.acquireKeyClients(cfg1)
	env.useKeyClients(a)
	b := env.acquireKeyClients(cfg2)
	if a[0] != b[0] || a[0].refs != 2 {
		t.Fatalf("same settings: new client (refs %d)", a[0].refs)
	}
	env.useKeyClients(b)
	// A refused reload's client with other settings is not current, and
	// closes when its generation is released.
	refused := env.acquireKeyClients(cfg3)
	if refused[0] == a[0] || env.keyClients["vault"] != a[0] {
		t.Fatal("changed timeout: same client, or the new one current before its generation serves")
	}
	env.releaseKeyClients(refused)
	if !closed(refused[0]) {
		t.Error("the client of a refused reload still runs")
	}
	c := env.acquireKeyClients(cfg3)
	env.useKeyClients(c)
	env.releaseKeyClients(a)
	env.releaseKeyClients(b)
	if a[0].refs != 0 || env.keyClients["vault"] != c[0] || !closed(a[0]) || closed(c[0]) {
		t.Errorf("old client refs %d, closed %v; current replaced: %v", a[0].refs, closed(a[0]), env.keyClients["vault"] != c[0])
	}
	if c[0].c.Timeout != time.Second || c[0].c.MaxInFlight != conf.DefaultKeyServerMaxInFlight || c[0].c.Conns != conf.DefaultKeyServerPoolSize {
		t.Errorf("client settings: timeout %v, max in flight %d, conns %d", c[0].c.Timeout, c[0].c.MaxInFlight, c[0].c.Conns)
	}
	// A reload without the key server: its client closes with the last
	// generation that used it.
	env.useKeyClients(nil)
	if closed(c[0]) {
		t.Error("a client still used closed")
	}
	env.releaseKeyClients(c)
	if !closed(c[0]) {
		t.Error("the client of a key server no longer configured still runs")
	}
}

// TestRemoteKeyServerVerified: gmproxy does not use a key server whose
// certificate does not chain to the configured ca, even one that accepts
// gmproxy's client certificate and holds the right keys: TLCP and
// TLS 1.3-SM handshakes that need its keys fail, and it performs no
// operation for gmproxy.
func TestRemoteKeyServerVerified(t *testing.T) {
	dir := t.TempDir()
	if _, err := testPKI(t).WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	legit := writeMTLS(t, dir) // the CA and client certificate gmproxy is configured with
	impostor := writeMTLS(t, t.TempDir())
	impostor.ClientCAs = legit.ClientCAs // verifies and takes gmproxy's certificate
	obs := &countingKeyObserver{}
	ks := startKeyServer(t, impostor, func(s *keyserver.Server) { s.Observer = obs })
	b := newBackend(t)
	td := startDaemon(t, remoteKeyConfig(t, dir, ks.addr, b.Listener.Addr().String(), "2s"))
	if err := handshakeOnly(t, td.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3); err == nil {
		t.Error("a TLCP handshake succeeded with keys from an untrusted key server")
	}
	if err := handshakeOnly(t, td.addr, "tls13sm", tls13sm.TLS_SM4_GCM_SM3); err == nil {
		t.Error("a TLS 1.3-SM handshake succeeded with keys from an untrusted key server")
	}
	if n := obs.ops.Load(); n != 0 {
		t.Errorf("the untrusted key server performed %d operations", n)
	}
}

// countingKeyObserver counts a key server's operations.
type countingKeyObserver struct{ ops atomic.Int64 }

func (o *countingKeyObserver) Operation(client, key, op, result string, d time.Duration) {
	o.ops.Add(1)
}
func (o *countingKeyObserver) InFlight(string, int) {}
func (o *countingKeyObserver) Conns(int)            {}
func (o *countingKeyObserver) Refused(string)       {}

// TestRemoteEncKeyForKeyAgreementOnly: an encryption key the key server
// serves for key agreement only (an ECDHE-only site) is reported as such
// at start, not as a key that is not usable: ECDHE handshakes work, and
// ECC ones, which need decryption, fail as the log says.
func TestRemoteEncKeyForKeyAgreementOnly(t *testing.T) {
	dir := t.TempDir()
	p := testPKI(t)
	if _, err := p.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	srvTLS := writeMTLS(t, dir)
	ks := startKeyServer(t, srvTLS)
	if err := ks.ks.SetPolicy(&keyserver.Policy{
		Keys: []keyserver.Key{{Name: "sign", Private: p.ServerSign.Key.(*sm2.PrivateKey), Roles: keyserver.RoleSign},
			{Name: "enc", Private: p.ServerEnc.Key.(*sm2.PrivateKey), Roles: keyserver.RoleKeyAgreement}},
		Clients: []keyserver.Grant{{Name: "edge", Subject: "CN=gmproxy.test", Keys: []string{"sign", "enc"}}},
	}); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t)
	cfg := remoteKeyConfig(t, dir, ks.addr, b.Listener.Addr().String(), "2s")
	logBuf := &testpeer.SyncBuffer{}
	td := startDaemon(t, cfg, func(e *Env) {
		e.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logBuf, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); !strings.Contains(logBuf.String(), "serves key agreement only"); {
		if time.Now().After(deadline) {
			t.Fatal("no log line about the key served for key agreement only")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(logBuf.String(), "role=enc") && strings.Contains(logBuf.String(), "remote key not usable") {
		t.Error("the key served for key agreement was reported not usable")
	}
	if err := handshakeOnly(t, td.addr, "tlcp", tlcp.ECDHE_SM4_GCM_SM3); err != nil {
		t.Errorf("ECDHE handshake: %v", err)
	}
	if err := handshakeOnly(t, td.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3); err == nil {
		t.Error("ECC handshake succeeded with a key the key server does not decrypt with")
	}
}

// TestRemoteSigningKeyProbeSigns: the start-up probe of a remote signing
// key asks for a signature the key server gives (it signs handshake
// messages only, so a probe of another message would be refused and the
// key reported not usable), and the key server counts it as a signature.
func TestRemoteSigningKeyProbeSigns(t *testing.T) {
	dir := t.TempDir()
	if _, err := testPKI(t).WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	obs := &resultKeyObserver{}
	ks := startKeyServer(t, writeMTLS(t, dir), func(s *keyserver.Server) { s.Observer = obs })
	b := newBackend(t)
	logBuf := &testpeer.SyncBuffer{}
	startDaemon(t, remoteKeyConfig(t, dir, ks.addr, b.Listener.Addr().String(), "2s"), func(e *Env) {
		e.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logBuf, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	for deadline := time.Now().Add(testwait.Bound(10 * time.Second)); !strings.Contains(logBuf.String(), "remote key answers") || !strings.Contains(logBuf.String(), "role=sign"); {
		if time.Now().After(deadline) {
			t.Fatal("the signing key's probe did not succeed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(logBuf.String(), "remote key not usable") {
		t.Error("a remote key was reported not usable")
	}
	if obs.signOK.Load() == 0 || obs.refused.Load() != 0 {
		t.Errorf("the key server signed %d times and refused %d operations", obs.signOK.Load(), obs.refused.Load())
	}
}

// resultKeyObserver counts a key server's signatures and refusals.
type resultKeyObserver struct{ signOK, refused atomic.Int64 }

func (o *resultKeyObserver) Operation(client, key, op, result string, d time.Duration) {
	switch {
	case op == "sign" && result == "ok":
		o.signOK.Add(1)
	case result != "ok":
		o.refused.Add(1)
	}
}
func (o *resultKeyObserver) InFlight(string, int) {}
func (o *resultKeyObserver) Conns(int)            {}
func (o *resultKeyObserver) Refused(string)       {}
