package daemon

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/tlcp"
)

// familyObs is a frontdoor.SessionObserver that counts events per
// "family:event" key ("tlcp:issued", "tlcp:hit", ...).
type familyObs struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *familyObs) add(family, ev string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[family+":"+ev]++
}

func (o *familyObs) SessionLookup(f string, hit bool) {
	if hit {
		o.add(f, "hit")
	} else {
		o.add(f, "miss")
	}
}
func (o *familyObs) SessionCacheSize(f string, size int, _ uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[f+":size"] = size
}
func (o *familyObs) TicketIssued(f string)   { o.add(f, "issued") }
func (o *familyObs) TicketAccepted(f string) { o.add(f, "accepted") }
func (o *familyObs) TicketRejected(f string) { o.add(f, "rejected") }

// check compares the TLCP counters with want (missing keys are 0).
func (o *familyObs) check(t *testing.T, step string, want map[string]int) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ev := range []string{"issued", "accepted", "rejected", "hit", "miss", "size"} {
		k := frontdoor.FamilyTLCP + ":" + ev
		if o.n[k] != want[ev] {
			t.Errorf("%s: %s = %d, want %d (all: %v)", step, k, o.n[k], want[ev], o.n)
		}
	}
}

// TestTLCPTicketEvents: TLCP ticket resumption reaches the session
// observer (issued, accepted on the issuing daemon, rejected by a daemon
// with another ticket key file), and with tickets off a session-ID
// resumption is a cache hit with no ticket events.
func TestTLCPTicketEvents(t *testing.T) {
	b := newBackend(t)
	start := func(tickets bool, keyFile string) (string, *familyObs) {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.Tickets = tickets
		if keyFile != "" {
			key := make([]byte, 32)
			rand.Read(key)
			if err := os.WriteFile(keyFile, key, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg.Sessions.TicketKeyFile = keyFile
			// conf.Load reads the key file; this config is built in code.
			keys, err := ticket.ParseKeyFile(key, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			cfg.TicketKeys = keys
		}
		obs := &familyObs{}
		return startDaemon(t, cfg, func(e *Env) { e.Sessions = obs }).addr, obs
	}
	dir := t.TempDir()
	addrA, obsA := start(true, filepath.Join(dir, "a.key"))
	addrB, obsB := start(true, filepath.Join(dir, "b.key"))

	p := testPKI(t)
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	conn := func(ccfg *tlcp.Config) func(net.Conn) (net.Conn, func() bool) {
		return func(raw net.Conn) (net.Conn, func() bool) {
			c := tlcp.Client(raw, ccfg)
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			return c, func() bool { return c.ConnectionState().DidResume }
		}
	}
	ccfg := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}

	if fetchOver(t, addrA, conn(ccfg)) {
		t.Fatal("first connection resumed")
	}
	obsA.check(t, "full handshake on A", map[string]int{"issued": 1})
	if !fetchOver(t, addrA, conn(ccfg)) {
		t.Fatal("A did not resume its own ticket")
	}
	// A ticket sealed under the current key is kept: no new one.
	obsA.check(t, "resumption on A", map[string]int{"issued": 1, "accepted": 1})
	if fetchOver(t, addrB, conn(ccfg)) {
		t.Fatal("B resumed a ticket sealed with A's key")
	}
	obsB.check(t, "A's ticket on B", map[string]int{"issued": 1, "rejected": 1})
	obsA.check(t, "A after B", map[string]int{"issued": 1, "accepted": 1})

	// Tickets off: the session-ID cache resumes, even for a client that
	// offers the session_ticket extension.
	addrC, obsC := start(false, "")
	idCfg := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_CBC_SM3}, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}
	if fetchOver(t, addrC, conn(idCfg)) {
		t.Fatal("first session-ID connection resumed")
	}
	obsC.check(t, "full handshake, tickets off", map[string]int{"size": 1})
	for i := 1; i <= 2; i++ {
		if !fetchOver(t, addrC, conn(idCfg)) {
			t.Fatalf("session-ID resumption %d did not happen", i)
		}
		obsC.check(t, fmt.Sprintf("session-ID resumption %d", i), map[string]int{"hit": i, "size": 1})
	}
}
