package daemon

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redisstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// The fleet test: a real Redis and a real HAProxy (TCP mode, round robin,
// send-proxy-v2) in front of three gmproxy daemons that trust it for the
// PROXY protocol and share sessions and ticket keys through Redis. It skips
// when redis-server or haproxy is not installed; .ci/run installs both.
// Everything listens on 127.0.0.1; the client connects from 127.0.0.7 so
// that the address the backend sees can only come from the PROXY header.

const (
	fleetSize     = 3
	fleetClientIP = "127.0.0.7"
	fleetReconns  = 300
)

func TestFleet(t *testing.T) {
	haproxyBin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("fleet test skipped: haproxy is not installed (apt-get install redis-server haproxy)")
	}
	if testing.Short() {
		t.Skip("fleet test skipped in -short mode")
	}
	f := startFleet(t, redistest.Start(t), haproxyBin)

	t.Run("resumption", f.testResumption)
	t.Run("ended-session", f.testEndedSession)
	t.Run("redis-down", f.testRedisDown)
	t.Run("keyserver-failover", f.testKeyServerFailover)
	t.Run("kill-instance", f.testKillInstance)
}

type fleet struct {
	t          *testing.T
	dir        string
	redis      *redistest.Server
	backend    *testBackend
	daemons    []*testDaemon
	lbAddr     string
	store      storeCounter
	clientDial net.Dialer
	// keyServers hold the sites' SM2 keys; every instance names both.
	keyServers []*testKeyServer
}

// startProcess starts a helper program and stops it when the test ends.
func startProcess(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(cmd) })
	return cmd
}

func stopProcess(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

func startFleet(t *testing.T, redis *redistest.Server, haproxyBin string) *fleet {
	f := &fleet{t: t, dir: t.TempDir(), redis: redis}
	f.clientDial.LocalAddr = &net.TCPAddr{IP: net.ParseIP(fleetClientIP)}
	f.clientDial.Timeout = 5 * time.Second
	f.backend = newBackend(t)

	wrap := make([]byte, 32)
	rand.Read(wrap)
	wrapKeys, err := ticket.ParseKeyFile(wrap, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The sites' SM2 keys live on two key servers, which every instance
	// names (key_servers[].addresses): full handshakes sign and decrypt
	// remotely, and survive one key server's death.
	if _, err := testPKI(t).WriteFiles(f.dir); err != nil {
		t.Fatal(err)
	}
	srvTLS := writeMTLS(t, f.dir)
	f.keyServers = []*testKeyServer{startKeyServer(t, srvTLS), startKeyServer(t, srvTLS)}
	remote := remoteKeyConfig(t, f.dir, f.keyServers[0].addr+", "+f.keyServers[1].addr, f.backend.Listener.Addr().String(), "2s")
	var servers strings.Builder
	for i := range fleetSize {
		cfg := testConfig(t, f.backend.Listener.Addr().String())
		cfg.KeyServers = remote.KeyServers
		rm, m := remote.Sites[0].Material, &cfg.Sites[0].Material
		m.TLCPSign, m.TLCPEnc, m.TLS13SM = rm.TLCPSign, rm.TLCPEnc, rm.TLS13SM
		cfg.Listeners[0].ProxyProtocol = conf.ProxyProtocol{Enabled: true, Trusted: []string{"127.0.0.1/32"}}
		cfg.Sessions.Store = &conf.SessionStore{
			Type: sessionstore.TypeRedis, Addresses: []string{redis.Addr}, KeyPrefix: "fleet:",
			// Generous for a loaded 2-core CI machine; production keeps
			// the 5 ms default.
			Timeout: 250 * time.Millisecond,
		}
		cfg.Sessions.TicketKeys = &conf.FleetTicketKeys{Store: sessionstore.TypeRedis, WrapKeyFile: "wrap.key", WrapKeys: wrapKeys}
		td := startDaemon(t, cfg, func(e *Env) { e.Sessions = &f.store })
		f.daemons = append(f.daemons, td)
		fmt.Fprintf(&servers, "    server g%d %s send-proxy-v2\n", i, td.addr)
	}

	lbPort := redistest.FreePort(t)
	f.lbAddr = fmt.Sprintf("127.0.0.1:%d", lbPort)
	hcfg := fmt.Sprintf(`global
    maxconn 2000
    nbthread 1
defaults
    mode tcp
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch 1
frontend fe
    bind %s
    default_backend gm
backend gm
    balance roundrobin
%s`, f.lbAddr, servers.String())
	path := filepath.Join(f.dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(hcfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, haproxyBin, "-db", "-f", path)
	// Ready when a request goes through (a bare TCP probe would reach an
	// instance and close without a handshake).
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for i := 0; ; i++ {
		_, _, _, err := f.fetch(f.clients()["tls13sm-psk"], "/r")
		if err == nil {
			break
		}
		if i > 200 || time.Now().After(deadline) {
			t.Fatalf("haproxy at %s did not come up: %v", f.lbAddr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f
}

// storeCounter counts the instances' store calls by op and result.
type storeCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *storeCounter) StoreOp(op, result string, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op+"/"+result]++
}

func (*storeCounter) SessionLookup(string, bool)           {}
func (*storeCounter) SessionCacheSize(string, int, uint64) {}
func (*storeCounter) TicketIssued(string)                  {}
func (*storeCounter) TicketAccepted(string)                {}
func (*storeCounter) TicketRejected(string)                {}

// snapshot returns a copy of the counts.
func (c *storeCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// handshakes returns the handshakes each daemon finished so far.
func (f *fleet) handshakes() []int {
	out := make([]int, len(f.daemons))
	for i, td := range f.daemons {
		td.obs.mu.Lock()
		for _, n := range td.obs.ok {
			out[i] += n
		}
		for _, n := range td.obs.fail {
			out[i] += n
		}
		td.obs.mu.Unlock()
	}
	return out
}

// failedHandshakes returns the failed handshakes of all daemons.
func (f *fleet) failedHandshakes() int {
	n := 0
	for _, td := range f.daemons {
		td.obs.mu.Lock()
		for _, c := range td.obs.fail {
			n += c
		}
		td.obs.mu.Unlock()
	}
	return n
}

// clientConn is a client handshake over raw reporting whether it resumed.
type clientConn func(raw net.Conn) (net.Conn, bool, error)

func tlcpClientConn(cfg *tlcp.Config) clientConn {
	return func(raw net.Conn) (net.Conn, bool, error) {
		c := tlcp.Client(raw, cfg)
		if err := c.Handshake(); err != nil {
			return nil, false, err
		}
		return c, c.ConnectionState().DidResume, nil
	}
}

func tls13smClientConn(cfg *tls13sm.Config) clientConn {
	return func(raw net.Conn) (net.Conn, bool, error) {
		c := tls13sm.Client(raw, cfg)
		if err := c.Handshake(); err != nil {
			return nil, false, err
		}
		return c, c.ConnectionState().DidResume, nil
	}
}

// clients returns fresh clients of the three kinds, each with its own
// session cache.
func (f *fleet) clients() map[string]clientConn {
	roots := testRoots(f.t)
	return map[string]clientConn{
		"tlcp-session-id": tlcpClientConn(&tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_CBC_SM3},
			SessionTicketsDisabled: true, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}),
		"tlcp-ticket": tlcpClientConn(&tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3},
			ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}),
		"tls13sm-psk": tls13smClientConn(&tls13sm.Config{RootCAs: roots, ServerName: "localhost", ClientSessionCache: tls13sm.NewLRUClientSessionCache(4)}),
	}
}

// fetch makes one connection through HAProxy, does GET path and returns
// the body; handshakeErr tells a failed handshake from a later failure.
func (f *fleet) fetch(mk clientConn, path string) (body string, resumed bool, handshakeErr, err error) {
	raw, err := f.clientDial.Dial("tcp", f.lbAddr)
	if err != nil {
		return "", false, nil, err
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	c, resumed, err := mk(raw)
	if err != nil {
		return "", false, err, err
	}
	req, _ := http.NewRequest("GET", "https://localhost"+path, nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		return "", resumed, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return "", resumed, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), resumed, nil, err
}

// testResumption: 300 reconnections of each kind through HAProxy resume
// although consecutive connections land on different instances, and the
// backend sees the client's address from the PROXY v2 header.
func (f *fleet) testResumption(t *testing.T) {
	for name, mk := range f.clients() {
		prev := f.handshakes()
		if _, resumed, _, err := f.fetch(mk, "/xff"); err != nil || resumed {
			t.Fatalf("%s: first connection: resumed=%v err=%v", name, resumed, err)
		}
		now := f.handshakes()
		last := servedBy(now, prev)
		prev = now
		resumedN, moved := 0, 0
		for i := range fleetReconns {
			body, resumed, _, err := f.fetch(mk, "/xff")
			if err != nil {
				t.Fatalf("%s: connection %d: %v", name, i, err)
			}
			if body != "xff="+fleetClientIP+"\n" {
				t.Fatalf("%s: the backend saw %q; want the client address %s from the PROXY header", name, body, fleetClientIP)
			}
			if resumed {
				resumedN++
			}
			// Sequential connections: the instance whose count moved served it.
			now := f.handshakes()
			if cur := servedBy(now, prev); cur != last {
				moved++
				last = cur
			}
			prev = now
		}
		t.Logf("%s: %d/%d reconnections resumed; %d/%d landed on another instance than the connection before", name, resumedN, fleetReconns, moved, fleetReconns)
		if resumedN*100 < fleetReconns*99 {
			t.Errorf("%s: %d of %d reconnections resumed; want >= 99%%", name, resumedN, fleetReconns)
		}
		if moved*100 < fleetReconns*99 {
			t.Errorf("%s: only %d of %d connections moved to another instance; the balancer is not spreading them", name, moved, fleetReconns)
		}
	}
	if n := f.failedHandshakes(); n != 0 {
		t.Errorf("%d handshakes failed", n)
	}
}

// testEndedSession: a TLCP session that every instance has resumed (and
// so holds in its own cache) ends with a fatal alert on one of them (a
// record that fails its MAC; RFC 5246 §7.2: the session must not be
// resumed). The next connection, which the balancer sends to another
// instance, does not resume it: the instance that ended it told the
// others through the store's channel.
func (f *fleet) testEndedSession(t *testing.T) {
	mk := f.clients()["tlcp-session-id"]
	for i := range fleetSize + 1 {
		if _, resumed, _, err := f.fetch(mk, "/r"); err != nil || resumed != (i > 0) {
			t.Fatalf("connection %d: resumed=%v err=%v", i, resumed, err)
		}
	}
	// The test hears the channel as the instances do.
	heard := make(chan struct{}, 16)
	probe := redisstore.New(redisstore.Options{Addresses: []string{f.redis.Addr}, Timeout: time.Second})
	defer probe.Close()
	stop := probe.Subscribe("fleet:tlcp:ended", func([]byte) { heard <- struct{}{} }, func() {})
	defer stop()
	time.Sleep(testwait.Bound(200 * time.Millisecond)) // the probe's subscription confirmed

	raw, err := f.clientDial.Dial("tcp", f.lbAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	w := &testpeer.CorruptWrites{Conn: raw}
	c, resumed, err := mk(w)
	if err != nil || !resumed {
		t.Fatalf("the connection to end the session: resumed=%v err=%v", resumed, err)
	}
	w.On.Store(true)
	io.WriteString(c, "GET /r HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if _, err := io.ReadAll(c); err == nil || !strings.Contains(err.Error(), "bad record MAC") {
		t.Fatalf("a record failing its MAC: err=%v, want the server's bad_record_mac alert", err)
	}
	select {
	case <-heard:
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("no instance announced the ended session on fleet:tlcp:ended")
	}
	// The other instances read the same message from their own
	// subscriptions; a moment for them to act on it.
	time.Sleep(100 * time.Millisecond)
	if _, resumed, _, err := f.fetch(mk, "/r"); err != nil || resumed {
		t.Fatalf("after the session ended on one instance, another resumed it: resumed=%v err=%v", resumed, err)
	}
}

// servedBy returns the instance whose handshake count moved from before
// to now (-1 for none).
func servedBy(now, before []int) int {
	for i := range now {
		if now[i] != before[i] {
			return i
		}
	}
	return -1
}

// loadRun runs workers that each make sequential connections of kind
// ("tlcp-session-id" etc.) until stop is closed or each made max
// connections. With cycle > 0 a worker takes a fresh client (new session
// cache) every cycle connections: the first connection of a cycle makes a
// new session and the others must resume it, most of them on another
// instance than the one that made it.
type loadRun struct {
	conns, resumed, handshakeFails, otherFails atomic.Int64
	// recent holds, per worker, whether its last connections resumed.
	mu      sync.Mutex
	streak  []int // consecutive resumed connections per worker
	errs    []string
	wg      sync.WaitGroup
	stop    chan struct{}
	stopped sync.Once
}

func (f *fleet) startLoad(kind string, workers, max, cycle int) *loadRun {
	l := &loadRun{stop: make(chan struct{}), streak: make([]int, workers)}
	for w := range workers {
		mk := f.clients()[kind]
		l.wg.Go(func() {
			for i := range max {
				first := cycle > 0 && i%cycle == 0
				if first {
					mk = f.clients()[kind]
				}
				select {
				case <-l.stop:
					return
				default:
				}
				_, resumed, hsErr, err := f.fetch(mk, "/r")
				l.conns.Add(1)
				l.mu.Lock()
				switch {
				case hsErr != nil:
					l.handshakeFails.Add(1)
					l.errs = append(l.errs, hsErr.Error())
					l.streak[w] = 0
				case err != nil:
					l.otherFails.Add(1)
					l.errs = append(l.errs, err.Error())
					l.streak[w] = 0
				case resumed:
					l.resumed.Add(1)
					l.streak[w]++
				case first:
				default:
					l.streak[w] = 0
				}
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *loadRun) end() {
	l.stopped.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// waitConns waits (bounded) until the run made n more connections than at
// the call.
func (l *loadRun) waitConns(t *testing.T, n int64) {
	t.Helper()
	target := l.conns.Load() + n
	deadline := time.Now().Add(testwait.Bound(30 * time.Second))
	for l.conns.Load() < target {
		if time.Now().After(deadline) {
			t.Fatalf("the load run stalled at %d connections", l.conns.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allStreaks reports whether every worker's last n connections that
// could resume did.
func (l *loadRun) allStreaks(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.streak {
		if s < n {
			return false
		}
	}
	return true
}

// testRedisDown: Redis stops during a load run in which every other
// connection makes a new session and the next one must resume it (mostly
// on another instance, so through Redis): no handshake fails (lookups that
// cannot reach Redis become full handshakes), tickets keep resuming across
// instances meanwhile, and resumption through Redis comes back soon after
// Redis does.
func (f *fleet) testRedisDown(t *testing.T) {
	failedBefore := f.failedHandshakes()
	l := f.startLoad("tlcp-session-id", 2, 5000, 2)
	defer l.end()
	l.waitConns(t, 40)
	resumedUp := l.resumed.Load()
	f.redis.Stop()
	downAt, resumedAtDown, storeAtDown := l.conns.Load(), l.resumed.Load(), f.store.snapshot()
	l.waitConns(t, 80)
	// Tickets need no store round trip: the fleet keys are in memory, so
	// TLCP tickets and TLS 1.3-SM PSKs still resume on every instance.
	for _, kind := range []string{"tlcp-ticket", "tls13sm-psk"} {
		mk, resumedN := f.clients()[kind], 0
		for i := range 2 * fleetSize {
			_, resumed, _, err := f.fetch(mk, "/r")
			if err != nil {
				t.Fatalf("%s with Redis down: %v", kind, err)
			}
			if resumed {
				resumedN++
			} else if i > 0 {
				t.Errorf("%s with Redis down: connection %d did not resume", kind, i)
			}
		}
		t.Logf("%s with Redis down: %d of %d reconnections resumed", kind, resumedN, 2*fleetSize-1)
	}
	back, backConns, resumedAtBack, storeAtBack := time.Now(), l.conns.Load(), l.resumed.Load(), f.store.snapshot()
	f.redis.Restart()
	// Every worker resuming its last 3 new sessions means sessions resume
	// through Redis again.
	deadline := back.Add(30 * time.Second)
	for !l.allStreaks(3) {
		if time.Now().After(deadline) {
			t.Fatalf("resumption did not come back within 30 s of Redis returning")
		}
		time.Sleep(10 * time.Millisecond)
	}
	recovery, recoveryConns := time.Since(back), l.conns.Load()-backConns
	l.end()
	failedLookups := storeAtBack["get/error"] + storeAtBack["get/timeout"] + storeAtBack["get/skipped"] -
		(storeAtDown["get/error"] + storeAtDown["get/timeout"] + storeAtDown["get/skipped"])
	t.Logf("redis up: %d connections, %d resumed; redis down: %d connections, %d resumed (same instance), %d store lookups failed or skipped (breaker); resumption back %v (%d connections) after redis-server was started again",
		downAt, resumedUp, backConns-downAt, resumedAtBack-resumedAtDown, failedLookups, recovery.Round(time.Millisecond), recoveryConns)
	if failedLookups == 0 {
		t.Error("no store lookup failed while Redis was down: the run did not exercise the store")
	}
	if n := l.handshakeFails.Load() + l.otherFails.Load(); n != 0 {
		t.Errorf("%d connections failed while Redis was down: %q", n, l.errs)
	}
	if n := f.failedHandshakes() - failedBefore; n != 0 {
		t.Errorf("%d handshakes failed on the instances while Redis was down", n)
	}
}

// testKeyServerFailover: one of the two key servers dies during a run of
// full handshakes (every connection a new client, so every handshake signs
// and decrypts on a key server) spread over all instances: no handshake
// fails, the operations move to the other key server. (With only the
// killed key server named, every handshake after the kill fails: checked.)
func (f *fleet) testKeyServerFailover(t *testing.T) {
	failedBefore := f.failedHandshakes()
	l := f.startLoad("tlcp-ticket", 2, 5000, 1)
	defer l.end()
	l.waitConns(t, 3*fleetSize)
	f.keyServers[0].ks.Close()
	killedAt := l.conns.Load()
	l.waitConns(t, 10*fleetSize)
	l.end()
	t.Logf("key server 1 of 2 killed after %d full handshakes; %d after it; %d handshake failures, %d other failures",
		killedAt, l.conns.Load()-killedAt, l.handshakeFails.Load(), l.otherFails.Load())
	if n := l.handshakeFails.Load() + l.otherFails.Load(); n != 0 {
		t.Errorf("%d connections failed when a key server died: %q", n, l.errs)
	}
	if n := f.failedHandshakes() - failedBefore; n != 0 {
		t.Errorf("%d handshakes failed on the instances when a key server died", n)
	}
	if l.resumed.Load() != 0 {
		t.Errorf("%d connections resumed: the run was to make full handshakes only", l.resumed.Load())
	}
}

// testKillInstance: an instance dies while connections are in flight on
// every instance and new ones keep coming: only its in-flight connections
// fail; HAProxy sends new connections to the others.
func (f *fleet) testKillInstance(t *testing.T) {
	const slow = 2 * fleetSize
	mk := f.clients()["tlcp-ticket"]
	type result struct {
		err error
	}
	before := f.handshakes()
	results := make(chan result, slow)
	for range slow {
		go func() {
			_, _, _, err := f.fetch(mk, "/slow")
			results <- result{err}
		}()
	}
	for i := range slow {
		select {
		case <-f.backend.slowStarted:
		case <-time.After(testwait.Bound(20 * time.Second)):
			t.Fatalf("only %d of %d slow requests reached the backend", i, slow)
		}
	}
	after := f.handshakes()
	victim := 1
	inFlight := after[victim] - before[victim]
	if inFlight == 0 {
		t.Fatal("no slow connection landed on the victim instance")
	}
	l := f.startLoad("tlcp-ticket", 2, 5000, 0)
	l.waitConns(t, 20)
	f.daemons[victim].Close()
	l.waitConns(t, 60)
	l.end()
	close(f.backend.release)
	failed := 0
	for range slow {
		select {
		case r := <-results:
			if r.err != nil {
				failed++
			}
		case <-time.After(testwait.Bound(20 * time.Second)):
			t.Fatal("a slow request never finished")
		}
	}
	t.Logf("killed instance %d with %d in-flight slow connections: %d of %d slow connections failed; load run: %d connections, %d handshake failures, %d other failures",
		victim, inFlight, failed, slow, l.conns.Load(), l.handshakeFails.Load(), l.otherFails.Load())
	if failed != inFlight {
		t.Errorf("%d slow connections failed; want exactly the %d in flight on the killed instance", failed, inFlight)
	}
	// A load connection in flight on the victim at the very moment it died
	// may fail too; at most a few.
	if n := l.handshakeFails.Load() + l.otherFails.Load(); n > 2 {
		t.Errorf("%d load connections failed after the kill: %q", n, l.errs)
	}
}

// TestFleetExampleHAProxyConfig: deploy/examples/fleet/haproxy.cfg is a
// valid HAProxy configuration (haproxy -c), when haproxy is installed.
func TestFleetExampleHAProxyConfig(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed")
	}
	out, err := exec.Command(bin, "-c", "-f", "../../deploy/examples/fleet/haproxy.cfg").CombinedOutput()
	if err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

// TestStoreIDNamesEverySetting: a reload that changes any setting of
// sessions.store opens a new store (a different ID), and one that changes
// nothing keeps the connections (the same ID).
func TestStoreIDNamesEverySetting(t *testing.T) {
	base := func() *conf.Config {
		return &conf.Config{Sessions: conf.Sessions{Store: &conf.SessionStore{
			Type: sessionstore.TypeRedis, Addresses: []string{"10.0.0.1:6379"}, KeyPrefix: "gmproxy:",
			Timeout: 5 * time.Millisecond,
		}}}
	}
	if a, b := base(), base(); storeID(a) != storeID(b) {
		t.Fatal("the same settings give different IDs")
	}
	for name, change := range map[string]func(*conf.SessionStore){
		"addresses":   func(s *conf.SessionStore) { s.Addresses = append(s.Addresses, "10.0.0.2:6379") },
		"master_name": func(s *conf.SessionStore) { s.MasterName = "m" },
		"cluster":     func(s *conf.SessionStore) { s.Cluster = true },
		"username":    func(s *conf.SessionStore) { s.Username = "u" },
		"password":    func(s *conf.SessionStore) { s.Password = "p" },
		"tls":         func(s *conf.SessionStore) { s.TLS = &conf.StoreTLS{ServerName: "redis"} },
		"timeout":     func(s *conf.SessionStore) { s.Timeout = time.Second },
		"pool_size":   func(s *conf.SessionStore) { s.PoolSize = 3 },
	} {
		c := base()
		change(c.Sessions.Store)
		if storeID(c) == storeID(base()) {
			t.Errorf("a change of %s keeps the store", name)
		}
	}
}
