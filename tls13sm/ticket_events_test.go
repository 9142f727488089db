package tls13sm

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// ticketLog collects the OnTicket events of a server.
type ticketLog struct {
	mu     sync.Mutex
	events []string
}

func (l *ticketLog) add(e TicketEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := e.Kind.String()
	if e.Reason != "" {
		s += ":" + e.Reason
	}
	if e.Stale {
		s += ":stale"
	}
	l.events = append(l.events, s)
}

func (l *ticketLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

// TestOnTicketEvents runs a sequence of connections sharing one client
// session cache; each step changes the server (or the cached session) and
// checks the events the server reports.
func TestOnTicketEvents(t *testing.T) {
	srvBase, cliCfg := testConfigs(t)
	k := mustKeys(t, 3)
	log := new(ticketLog)
	srvBase.OnTicket = log.add
	later := func() time.Time { return time.Now().Add(3 * time.Hour) }
	cached := func() *ClientSessionState { return cachedSession(t, cliCfg) }
	steps := []struct {
		name    string
		server  func(*Config)
		client  func() // runs before dialing
		resumed bool
		failure bool
		want    []string
	}{
		{name: "full", server: func(c *Config) { c.TicketKeys = ticket.Static{k[0]} },
			want: []string{"issued"}},
		{name: "rotated key", server: func(c *Config) { c.TicketKeys = ticket.Static{k[1], k[0]} },
			resumed: true, want: []string{"accepted:stale", "issued"}},
		{name: "current key", server: func(c *Config) { c.TicketKeys = ticket.Static{k[1]} },
			resumed: true, want: []string{"accepted", "issued"}},
		{name: "retired key", server: func(c *Config) { c.TicketKeys = ticket.Static{k[2]} },
			want: []string{"rejected:undecryptable", "issued"}},
		{name: "expired", server: func(c *Config) { c.TicketKeys = ticket.Static{k[2]}; c.Time = later },
			want: []string{"rejected:expired", "issued"}},
		{name: "age mismatch", server: func(c *Config) { c.TicketKeys = ticket.Static{k[2]}; c.Time = later },
			client: func() { cached().ageAdd += 10 * 60 * 1000 },
			want:   []string{"rejected:age_mismatch", "issued"}},
		{name: "client auth now required",
			server: func(c *Config) {
				c.TicketKeys, c.Time, c.ClientAuth = ticket.Static{k[2]}, later, RequireAndVerifyClientCert
			},
			want: []string{"rejected:client_auth_required", "issued"}},
		{name: "resumed with client auth",
			server: func(c *Config) {
				c.TicketKeys, c.Time, c.ClientAuth = ticket.Static{k[2]}, later, RequireAndVerifyClientCert
			},
			resumed: true, want: []string{"accepted", "issued"}},
		{name: "tickets disabled", server: func(c *Config) { c.SessionTicketsDisabled = true },
			want: []string{"rejected:disabled"}},
		{name: "bad binder",
			server: func(c *Config) {
				c.TicketKeys, c.Time, c.ClientAuth = ticket.Static{k[2]}, later, RequireAndVerifyClientCert
			},
			client:  func() { cached().secret[0] ^= 0xff },
			failure: true, want: []string{"rejected:bad_binder"}},
	}
	for _, st := range steps {
		cfg := srvBase.Clone()
		st.server(cfg)
		if st.client != nil {
			st.client()
		}
		if st.failure {
			cerr, _ := handshakeErrs(t, cfg, cliCfg)
			wantAlert(t, cerr, AlertDecryptError, true)
		} else {
			_, r := echoRound(t, cfg, cliCfg)
			if r.err != nil {
				t.Fatalf("%s: server: %v", st.name, r.err)
			}
			if r.state.DidResume != st.resumed {
				t.Fatalf("%s: resumed = %v, want %v", st.name, r.state.DidResume, st.resumed)
			}
		}
		if got := log.take(); !slices.Equal(got, st.want) {
			t.Errorf("%s: events %q, want %q", st.name, got, st.want)
		}
	}
}

// TestOnTicketPSKModeAndHRR: a client offering only psk_ke to a server
// without AllowPSKOnly is rejected as psk_mode; with a HelloRetryRequest
// the accepted event carries DidHRR.
func TestOnTicketPSKModeAndHRR(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	var mu sync.Mutex
	var events []TicketEvent
	srvCfg.OnTicket = func(e TicketEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	run := func(cli *Config) {
		t.Helper()
		if _, r := echoRound(t, srvCfg, cli); r.err != nil {
			t.Fatal(r.err)
		}
	}
	run(cliCfg)
	pskOnly := cliCfg.Clone()
	pskOnly.testPSKOnly = true
	run(pskOnly)
	hrr := cliCfg.Clone()
	hrr.testShareX25519 = true // curveSM2 preferred by the server: HRR
	run(hrr)
	mu.Lock()
	defer mu.Unlock()
	got := fmt.Sprint(events)
	want := fmt.Sprint([]TicketEvent{
		{Kind: TicketIssued},
		{Kind: TicketRejected, Reason: TicketReasonPSKMode},
		{Kind: TicketAccepted, DidHRR: true}, {Kind: TicketIssued, DidHRR: true},
	})
	if got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}
