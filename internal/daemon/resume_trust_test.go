package daemon

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// Environment of the second instance (TestSecondInstanceProcess).
const (
	instanceChildEnv   = "GMPROXY_TEST_SECOND_INSTANCE"
	instancePKIEnv     = "GMPROXY_TEST_INSTANCE_PKI"
	instanceKeyEnv     = "GMPROXY_TEST_INSTANCE_TICKET_KEY"
	instanceBackendEnv = "GMPROXY_TEST_INSTANCE_BACKEND"
	// instanceVariantEnv chooses the second instance's configuration:
	// "" identityHeadersConfig, "denylist" serialDenyConfig.
	instanceVariantEnv = "GMPROXY_TEST_INSTANCE_VARIANT"
)

// instanceHosts are testPKI's hosts (LoadOrCreate must find them covered).
var instanceHosts = []string{"localhost", "127.0.0.1", "a.example.cn", "*.b.example.cn"}

// identityHeadersConfig: the main site requires a verified client
// certificate of the test CA and forwards the client-certificate headers;
// tickets on, with the ticket key file shared by the instances.
func identityHeadersConfig(t testing.TB, backend, keyFile string) *conf.Config {
	p := testPKI(t)
	cfg := testConfig(t, backend)
	cfg.Sessions.Tickets = true
	cfg.Sessions.TicketKeyFile = keyFile
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ticket.ParseKeyFile(raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg.TicketKeys = keys
	cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
	cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert}
	cfg.Sites[0].Routes[0].ClientCertHeaders = true
	return cfg
}

// TestSecondInstanceProcess is not a test: it is the second gmproxy
// instance (another process, as in a fleet or after a restart) of
// TestResumedIdentityHeadersAcrossInstances. It serves until its
// stdin closes or a minute has passed.
func TestSecondInstanceProcess(t *testing.T) {
	if os.Getenv(instanceChildEnv) != "1" {
		t.Skip("helper process only")
	}
	pkiOnce.Do(func() {
		pkiVal, pkiErr = devpki.LoadOrCreate(os.Getenv(instancePKIEnv), devpki.Options{Hosts: instanceHosts})
		if pkiErr == nil && pkiVal.Created {
			pkiErr = fmt.Errorf("helper: the PKI was regenerated, not loaded")
		}
	})
	build := identityHeadersConfig
	if os.Getenv(instanceVariantEnv) == "denylist" {
		build = serialDenyConfig
	}
	td := startDaemon(t, build(t, os.Getenv(instanceBackendEnv), os.Getenv(instanceKeyEnv)))
	fmt.Printf("ADDR=%s\n", td.addr)
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
	}
}

// identityFetch does one request over TLS 1.3-SM with the client
// certificate and returns whether it resumed and the backend's body.
func identityFetch(t *testing.T, addr string, cache tls13sm.ClientSessionCache) (bool, string) {
	t.Helper()
	r := smFetch(t, addr, "localhost", pair(testPKI(t).ClientSign), cache)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.resumed, strings.TrimSpace(r.body)
}

// TestResumedIdentityHeadersAcrossInstances: two gmproxy instances (two
// processes) share a ticket key file and serve a site with client_auth
// require and client_cert_headers. A client authenticates with its
// certificate on the first instance and offers its TLS 1.3-SM ticket to the
// second, which does not hold the client's chain (tls13sm keeps chains per
// process): the second declines the ticket and makes a full handshake
// (tls13sm.Config.ResumeNeedsClientChain), so the backend gets the
// client's subject and "X-Ssl-Client-Verify: SUCCESS", never "NONE" for a
// client the site required and authenticated.
func TestResumedIdentityHeadersAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second process")
	}
	pkiDir, keyFile := instanceFiles(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "verify=%s sdn=%q reused=%s", r.Header.Get("X-Ssl-Client-Verify"), r.Header.Get("X-Ssl-Client-S-Dn"), r.Header.Get("X-Ssl-Session-Reused"))
	}))
	t.Cleanup(backend.Close)
	backendAddr := backend.Listener.Addr().String()

	addr2 := startSecondInstance(t, pkiDir, keyFile, backendAddr, "")

	// Instance 1, in this process.
	addr1 := startDaemon(t, identityHeadersConfig(t, backendAddr, keyFile)).addr
	cache := tls13sm.NewLRUClientSessionCache(4)
	resumed, full := identityFetch(t, addr1, cache)
	if resumed || !strings.HasPrefix(full, "verify=SUCCESS ") || strings.Contains(full, `sdn=""`) {
		t.Fatalf("full handshake on instance 1: resumed %v, backend saw %s", resumed, full)
	}
	t.Logf("instance 1, full handshake: %s", full)
	resumed, got := identityFetch(t, addr2, cache)
	t.Logf("instance 2, resumed %v: %s", resumed, got)
	if !resumed {
		return // a full handshake presents the certificate again: fine
	}
	want := strings.Replace(full, "reused=.", "reused=r", 1)
	if got != want {
		t.Errorf("resumed TLS 1.3-SM connection on another instance of a client_auth=require site:\n backend saw  %s\n want (session's certificate) %s", got, want)
	}
}

// startSecondInstance runs TestSecondInstanceProcess (this test binary
// again, as another process) with the PKI in pkiDir, the ticket key file
// keyFile, the backend at backendAddr and the configuration variant
// (instanceVariantEnv), and returns its address.
func startSecondInstance(t *testing.T, pkiDir, keyFile, backendAddr, variant string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSecondInstanceProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), instanceChildEnv+"=1", instancePKIEnv+"="+pkiDir, instanceKeyEnv+"="+keyFile,
		instanceBackendEnv+"="+backendAddr, instanceVariantEnv+"="+variant)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ADDR="); ok {
				addrc <- a
			}
		}
	}()
	select {
	case addr := <-addrc:
		return addr
	case <-time.After(testwait.Bound(60 * time.Second)):
		t.Fatal("the second instance did not start")
	}
	return ""
}

// instanceFiles writes testPKI's files and a fresh ticket key file for
// two instances to share, and returns their paths.
func instanceFiles(t *testing.T) (pkiDir, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	pkiDir = filepath.Join(dir, "pki")
	if _, err := testPKI(t).WriteFiles(pkiDir); err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(dir, "ticket.key")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return pkiDir, keyFile
}

// serialDenyConfig: the main site requires a verified client certificate
// of the test CA and answers 403 to the test client's certificate by its
// serial (a route matching X-Ssl-Client-Serial, as nginx's
// "if ($ssl_client_serial = ...) { return 403; }" revokes one
// certificate); no route forwards the client-certificate headers. Tickets
// on, with the ticket key file shared by the instances.
func serialDenyConfig(t testing.TB, backend, keyFile string) *conf.Config {
	cfg := identityHeadersConfig(t, backend, keyFile)
	serial := strings.ToUpper(hex.EncodeToString(testPKI(t).ClientSign.Cert.SerialNumber.Bytes()))
	s := &cfg.Sites[0]
	s.Routes = []conf.Route{
		{Name: "revoked", PathPrefix: "/", Header: map[string]string{"X-Ssl-Client-Serial": serial}, Respond: &conf.Respond{Status: 403, Body: "revoked\n"}},
		{Name: "all", PathPrefix: "/", Upstream: "app"},
	}
	return cfg
}

// TestResumedIdentityMatchedAcrossInstances: two instances share a ticket
// key file and serve a site with client_auth require whose first route
// answers 403 to one client certificate by its serial (a deny list), and
// which forwards no client-certificate header. The denied client gets 403
// on the first instance, and must get it on the second too when it offers
// its TLS 1.3-SM ticket there: the second does not hold the client's chain
// (tls13sm keeps chains per process), and a resumed connection without it
// matched no serial, so the route let the revoked certificate through to
// the backend. The second instance declines such a ticket, as it does
// when the routes forward the headers.
func TestResumedIdentityMatchedAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second process")
	}
	pkiDir, keyFile := instanceFiles(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "backend")
	}))
	t.Cleanup(backend.Close)
	backendAddr := backend.Listener.Addr().String()
	addr2 := startSecondInstance(t, pkiDir, keyFile, backendAddr, "denylist")
	addr1 := startDaemon(t, serialDenyConfig(t, backendAddr, keyFile)).addr

	cache := tls13sm.NewLRUClientSessionCache(4)
	client := pair(testPKI(t).ClientSign)
	r := smFetch(t, addr1, "localhost", client, cache)
	if r.err != nil || r.resumed || r.status != http.StatusForbidden {
		t.Fatalf("full handshake on instance 1: err %v resumed %v status %d %q, want 403", r.err, r.resumed, r.status, r.body)
	}
	r = smFetch(t, addr2, "localhost", client, cache)
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("instance 2: resumed %v, status %d %q", r.resumed, r.status, r.body)
	if r.status != http.StatusForbidden {
		t.Errorf("the denied client certificate, resumed (%v) on another instance, got %d %q: its serial was not matched", r.resumed, r.status, r.body)
	}
}

// TestTicketKeysDroppedWithTheirTickets: with the default sessions
// settings (random in-memory ticket keys, ticket_rotation 1h, lifetime 5m)
// a ticket key is dropped once no ticket it sealed can be valid (rotation +
// lifetime = 1h05m after its creation), not 12 rotations later: a TLCP
// NewSessionTicket travels in the clear and holds the session's master
// secret, so whoever later obtained a key still held would decrypt the
// recorded connections of its tickets (RFC 5077 §5.5, §5.6).
func TestTicketKeysDroppedWithTheirTickets(t *testing.T) {
	cfg := conf.Default()
	if cfg.Sessions.Lifetime != 5*time.Minute || cfg.Sessions.TicketRotation != time.Hour || cfg.Sessions.TicketKeyFile != "" {
		t.Fatalf("defaults changed: lifetime %v rotation %v", cfg.Sessions.Lifetime, cfg.Sessions.TicketRotation)
	}
	env := &Env{}
	src, err := env.TicketKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	now := start
	env.rotator.SetClock(func() time.Time { return now })

	// A TLCP ticket as a passive observer records it (the state is the
	// session, master secret included).
	secret := []byte("session state with the master secret")
	tk, err := ticket.Seal(nil, src, ticket.TLCP, secret)
	if err != nil {
		t.Fatal(err)
	}
	// The key stops encrypting at +1h; its last ticket is resumable until
	// +1h05m. Look at the keys every hour up to +13h.
	last, held := 0, 0
	for h := 1; h <= 13; h++ {
		now = start.Add(time.Duration(h) * time.Hour)
		keys := src.TicketKeys()
		if _, ok, _ := ticket.Open(src, ticket.TLCP, tk); ok {
			last, held = h, len(keys)
		}
	}
	if last >= 2 {
		t.Errorf("a ticket sealed at +0h, unusable for resumption since +1h05m (rotation %v + lifetime %v), still decrypts with the daemon's ticket keys at +%dh (%d keys held then)",
			cfg.Sessions.TicketRotation, cfg.Sessions.Lifetime, last, held)
	}
}

// closingSMBackends starts a TLCP and a TLS 1.3-SM HTTP backend with p's
// server certificates; every response closes its connection, so each
// request makes the daemon dial (and resume, when it can) anew. hits
// counts the requests each backend answered.
func closingSMBackends(t *testing.T, p *devpki.PKI) (tlcpAddr, sm13Addr string, hits map[string]*atomic.Int32) {
	hits = map[string]*atomic.Int32{"tlcp": new(atomic.Int32), "tls13sm": new(atomic.Int32)}
	serve := func(ln net.Listener, name string) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[name].Add(1)
			w.Header().Set("Connection", "close")
			fmt.Fprintf(w, "%s backend %s\n", name, r.URL.Path)
		})}
		t.Cleanup(func() { srv.Close() })
		go srv.Serve(ln)
	}
	raw1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := ticket.NewKey([]byte("test upstream ticket key 32 byte"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serve(tlcp.NewListener(raw1, &tlcp.Config{Certificates: []tlcp.Certificate{{
		SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: p.ServerSign.Key,
		EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
	}}, TicketKeys: ticket.Static{tk}}), "tlcp")
	raw2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(tls13sm.NewListener(raw2, &tls13sm.Config{Certificates: []tls13sm.Certificate{{
		Certificate: [][]byte{p.ServerSign.Cert.Raw}, PrivateKey: p.ServerSign.Key,
	}}, TicketKeys: ticket.Static{tk}}), "tls13sm")
	return raw1.Addr().String(), raw2.Addr().String(), hits
}

// TestUpstreamSessionAfterVerificationReload: an upstream (TLCP or
// TLS 1.3-SM) first configured with tls.insecure_skip_verify is fixed by a
// reload: verification on, root_ca a CA that does not issue the backend's
// certificate. The daemon keeps the upstream's client session cache across
// the reload, but its clients do not resume a session the new settings
// would not accept: the next request makes a full handshake, which fails
// verification (502), and the backend gets no request.
func TestUpstreamSessionAfterVerificationReload(t *testing.T) {
	p := testPKI(t)
	other, err := devpki.Generate(devpki.Options{Hosts: []string{"localhost"}, SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	tlcpAddr, sm13Addr, hits := closingSMBackends(t, p)
	b := newBackend(t)
	mk := func(insecure bool) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		for _, u := range []struct{ name, proto, addr string }{{"tlcp", upstreamproto.TLCP, tlcpAddr}, {"tls13sm", upstreamproto.TLS13SM, sm13Addr}} {
			up := conf.Upstream{
				Name: u.name, Protocol: u.proto, Targets: []conf.Target{{Address: u.addr, Weight: 1}},
				TLS: conf.UpstreamTLSConfig{ServerName: "localhost", InsecureSkipVerify: insecure},
			}
			if !insecure {
				up.Material = conf.UpstreamMaterial{RootCAs: []*smx509.Certificate{other.CA.Cert}}
			}
			cfg.Upstreams = append(cfg.Upstreams, up)
			cfg.Sites[0].Routes = append([]conf.Route{{Name: "to-" + u.name, PathPrefix: "/" + u.name + "/", Upstream: u.name}}, cfg.Sites[0].Routes...)
		}
		return cfg
	}
	td := startDaemon(t, mk(true))
	c := tlsClient(t, td.addr, "localhost", false)
	for _, name := range []string{"tlcp", "tls13sm"} {
		if body, resp := get(t, c, "https://localhost/"+name+"/x"); resp.StatusCode != 200 {
			t.Fatalf("%s, insecure_skip_verify: %d %q", name, resp.StatusCode, body)
		}
	}
	td.reloadWith(t, mk(false))
	c = tlsClient(t, td.addr, "localhost", false)
	for _, name := range []string{"tlcp", "tls13sm"} {
		before := hits[name].Load()
		body, resp := get(t, c, "https://localhost/"+name+"/y")
		if resp.StatusCode != 502 || hits[name].Load() != before {
			t.Errorf("%s upstream after a reload turned verification on with a CA that does not issue the backend's certificate: %d %q (backend requests %d → %d); want 502 and no request",
				name, resp.StatusCode, strings.TrimSpace(body), before, hits[name].Load())
		}
	}
	// Control: a fresh daemon with the verifying configuration refuses.
	fresh := startDaemon(t, mk(false))
	c = tlsClient(t, fresh.addr, "localhost", false)
	for _, name := range []string{"tlcp", "tls13sm"} {
		if body, resp := get(t, c, "https://localhost/"+name+"/z"); resp.StatusCode != 502 {
			t.Errorf("control, fresh daemon, %s: %d %q, want 502", name, resp.StatusCode, body)
		}
	}
}

// TestRefusedReloadKeepsTicketKeyRetention: a reload that is refused
// ("reload failed, keeping the running configuration": here its new
// listener cannot bind) leaves the running ticket keys' retention as it
// was. Before, the build of the refused configuration had set its
// sessions.lifetime (24h) on the running rotator: a ticket the running
// configuration (rotation 1h + lifetime 5m) no longer accepts past +1h05m
// still decrypted at +2h (the retention TestTicketKeysDroppedWithTheirTickets
// calls a defect), until the next successful reload. Its private-key
// engine (other offload settings) does not become the current one either.
func TestRefusedReloadKeepsTicketKeyRetention(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	td := startDaemon(t, cfg)
	if cfg.Sessions.Lifetime != 5*time.Minute || cfg.Sessions.TicketRotation != time.Hour || cfg.Sessions.TicketKeyFile != "" {
		t.Fatalf("defaults changed: lifetime %v rotation %v", cfg.Sessions.Lifetime, cfg.Sessions.TicketRotation)
	}
	td.env.mu.Lock()
	rot, src := td.env.rotator, td.env.keys
	td.env.mu.Unlock()
	if rot == nil {
		t.Fatal("no in-memory rotator")
	}
	start := time.Now()
	now := start
	rot.SetClock(func() time.Time { return now })
	tk, err := ticket.Seal(nil, src, ticket.TLCP, []byte("session state with the master secret"))
	if err != nil {
		t.Fatal(err)
	}

	// The refused reload: sessions.lifetime 24h, and a new listener on an
	// address already in use.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	engine := td.env.CurrentOffload()
	next := testConfig(t, b.Listener.Addr().String())
	next.Sessions.Lifetime = 24 * time.Hour
	next.Offload.Workers = cfg.Offload.Workers + 2
	extra := next.Listeners[0]
	extra.Address = busy.Addr().String()
	next.Listeners = append(next.Listeners, extra)
	td.setConfig(next)
	if err := td.Reload(); err == nil {
		t.Fatal("reload with a listener on a busy address was not refused")
	}
	td.setConfig(cfg)
	if td.env.CurrentOffload() != engine {
		t.Error("a refused reload's private-key engine became the current one")
	}

	// Running configuration: the key is dropped 1h05m after its creation.
	now = start.Add(2 * time.Hour)
	src.TicketKeys()
	if _, ok, _ := ticket.Open(src, ticket.TLCP, tk); ok {
		t.Errorf("after a refused reload (sessions.lifetime 24h), a ticket sealed at +0h still decrypts at +2h with the running ticket keys; the running configuration (rotation %v + lifetime %v) drops its key at +1h05m",
			cfg.Sessions.TicketRotation, cfg.Sessions.Lifetime)
	}

	// The same lifetime in a reload that succeeds is applied.
	tk2, err := ticket.Seal(nil, src, ticket.TLCP, []byte("a later session"))
	if err != nil {
		t.Fatal(err)
	}
	longer := testConfig(t, b.Listener.Addr().String())
	longer.Sessions.Lifetime = 24 * time.Hour
	td.setConfig(longer)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	now = start.Add(4 * time.Hour)
	src.TicketKeys()
	if _, ok, _ := ticket.Open(src, ticket.TLCP, tk2); !ok {
		t.Error("after a reload to sessions.lifetime 24h, a ticket sealed 2h before no longer decrypts: the new retention was not applied")
	}
}

// TestTicketRotationReloadKeepsOldKeysForTheNewLifetime: a reload that
// changes ticket_rotation and raises lifetime keeps the replaced
// rotator's keys as long as their tickets are valid under the new
// lifetime (old rotation + new lifetime), not the old one: tickets are
// judged by the lifetime now in force, so dropping the key earlier makes
// valid tickets fail (a full handshake where a resumption was due).
func TestTicketRotationReloadKeepsOldKeysForTheNewLifetime(t *testing.T) {
	mk := func(rot, life time.Duration) *conf.Config {
		cfg := conf.Default()
		cfg.Sessions.TicketRotation, cfg.Sessions.Lifetime = rot, life
		return cfg
	}
	env := &Env{}
	old, err := env.TicketKeys(mk(time.Hour, 5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The running rotator's key was made 2 hours ago, and it sealed a
	// ticket then: past the old retention (1h05m), within the new
	// lifetime (3h).
	env.rotator.SetClock(func() time.Time { return time.Now().Add(-2 * time.Hour) })
	tk, err := ticket.Seal(nil, old, ticket.TLCP, []byte("session state"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := env.TicketKeys(mk(2*time.Hour, 3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ticket.Open(src, ticket.TLCP, tk); !ok {
		t.Error("a ticket sealed 2h ago, valid under the new 3h lifetime, no longer opens after the reload")
	}
	// Control: a reload that shortens nothing keeps the old retention,
	// after which the key is dropped.
	env2 := &Env{}
	old2, err := env2.TicketKeys(mk(time.Hour, 5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	env2.rotator.SetClock(func() time.Time { return time.Now().Add(-2 * time.Hour) })
	tk2, err := ticket.Seal(nil, old2, ticket.TLCP, []byte("session state"))
	if err != nil {
		t.Fatal(err)
	}
	src2, err := env2.TicketKeys(mk(2*time.Hour, 5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ticket.Open(src2, ticket.TLCP, tk2); ok {
		t.Error("control: a ticket sealed 2h ago, past rotation 1h + lifetime 5m, still opens after the reload")
	}
}
