package tlcp

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// ticketLog records OnTicket events (the hook runs in the server's goroutine).
type ticketLog struct {
	mu sync.Mutex
	ev []TicketEvent
}

func (l *ticketLog) hook(e TicketEvent) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

func (l *ticketLog) take() []TicketEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.ev
	l.ev = nil
	return ev
}

// oneCache is a client session cache of one entry that ignores the key, so
// a ticket can be offered under another server name.
type oneCache struct {
	mu sync.Mutex
	s  *ClientSessionState
}

func (o *oneCache) Get(string) (*ClientSessionState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.s, o.s != nil
}

func (o *oneCache) Put(_ string, cs *ClientSessionState) {
	o.mu.Lock()
	o.s = cs
	o.mu.Unlock()
}

var (
	evIssued   = TicketEvent{Kind: TicketIssued}
	evAccepted = TicketEvent{Kind: TicketAccepted}
	evStale    = TicketEvent{Kind: TicketAccepted, Stale: true}
)

func evRejected(reason string) TicketEvent { return TicketEvent{Kind: TicketRejected, Reason: reason} }

// TestTicketEvents: every OnTicket kind and rejection reason, each as a
// priming handshake followed by the handshake under test.
func TestTicketEvents(t *testing.T) {
	p := loadPKI(t)
	k1, k2, k3 := testTicketKey(t, 1), testTicketKey(t, 2), testTicketKey(t, 3)
	ca, caKey := genCA(t, "Second CA")
	other := genPair(t, ca, caKey, smx509.KeyUsageDigitalSignature, smx509.KeyUsageKeyEncipherment)
	log := &ticketLog{}
	store := NewLRUSessionStore(16, time.Hour)
	server := func(keys ...ticket.Key) *Config {
		c := p.serverConfig()
		c.TicketKeys = ticket.Static(keys)
		c.SessionStore = store
		c.OnTicket = log.hook
		return c
	}
	at := func(c *Config, d time.Duration) *Config {
		c.Time = func() time.Time { return time.Now().Add(d) }
		return c
	}
	with := func(c *Config, f func(*Config)) *Config { f(c); return c }
	// forge seals plaintext with k1 as a ticket the client offers.
	forge := func(plain []byte) *ClientSessionState {
		tk, err := ticket.Seal(nil, ticket.Static{k1}, ticket.TLCP, plain)
		if err != nil {
			t.Fatal(err)
		}
		return &ClientSessionState{ticket: tk, vers: VersionTLCP, cipherSuite: ECC_SM4_GCM_SM3, master: make([]byte, masterSecretLength), receivedAt: time.Now()}
	}
	tls12Session, err := (&sessionState{vers: 0x0303, cipherSuite: ECC_SM4_GCM_SM3, createdAt: uint64(time.Now().Unix()), master: make([]byte, masterSecretLength)}).marshal()
	if err != nil {
		t.Fatal(err)
	}

	// A forged session carries no verified chains: a client that verifies
	// would not offer it.
	skipVerify := func(c *Config) { c.InsecureSkipVerify = true }
	cases := []struct {
		name   string
		prime  *Config             // nil: no priming handshake
		inject *ClientSessionState // a session put in the client cache instead
		damage bool                // flip a byte of the client's ticket
		// relabel seals the client's ticket again as a TLS 1.3-SM ticket
		// under the same key (the protocol is authenticated data).
		relabel bool
		srv     *Config
		client  func(*Config)
		want    []TicketEvent
		resume  bool
	}{
		{name: "accepted", prime: server(k1), srv: server(k1), want: []TicketEvent{evAccepted}, resume: true},
		{name: "stale", prime: server(k1), srv: server(k2, k1), want: []TicketEvent{evStale, evIssued}, resume: true},
		{name: "unknown_key", prime: server(k1), srv: server(k3), want: []TicketEvent{evRejected(TicketReasonUndecryptable), evIssued}},
		{name: "damaged", prime: server(k1), damage: true, srv: server(k1), want: []TicketEvent{evRejected(TicketReasonUndecryptable), evIssued}},
		{name: "tls13sm_label", prime: server(k1), relabel: true, srv: server(k1), want: []TicketEvent{evRejected(TicketReasonUndecryptable), evIssued}},
		{name: "malformed", client: skipVerify, inject: forge([]byte("not a session")), srv: server(k1), want: []TicketEvent{evRejected(TicketReasonMalformed), evIssued}},
		{name: "other_version", client: skipVerify, inject: forge(tls12Session), srv: server(k1), want: []TicketEvent{evRejected(TicketReasonMalformed), evIssued}},
		{name: "expired", prime: server(k1), srv: at(server(k1), 3*time.Hour), want: []TicketEvent{evRejected(TicketReasonExpired), evIssued}},
		{name: "from_future", prime: at(server(k1), time.Hour), srv: server(k1), want: []TicketEvent{evRejected(TicketReasonExpired), evIssued}},
		{name: "other_cert", prime: server(k1), srv: with(server(k1), func(c *Config) { c.Certificates = []Certificate{other} }),
			client: func(c *Config) { c.InsecureSkipVerify = true }, want: []TicketEvent{evRejected(TicketReasonIdentity), evIssued}},
		{name: "other_sni", prime: server(k1), srv: server(k1),
			client: func(c *Config) { c.ServerName = "127.0.0.2.example"; c.InsecureSkipVerify = true }, want: []TicketEvent{evRejected(TicketReasonIdentity), evIssued}},
		{name: "sni_other_case", prime: server(k1), srv: server(k1),
			client: func(c *Config) { c.ServerName = "LocalHost" }, want: []TicketEvent{evAccepted}, resume: true},
		// Host names compare without regard to ASCII case only (RFC
		// 4343): U+017F LATIN SMALL LETTER LONG S folds to 's' in
		// Unicode, and frontdoor would pick another site for this name.
		{name: "sni_unicode_fold", prime: server(k1), srv: server(k1),
			client: func(c *Config) { c.ServerName = "localho\u017ft"; c.InsecureSkipVerify = true },
			want:   []TicketEvent{evRejected(TicketReasonIdentity), evIssued}},
		{name: "suite", prime: with(server(k1), func(c *Config) { c.CipherSuites = []uint16{ECC_SM4_GCM_SM3} }),
			srv:  with(server(k1), func(c *Config) { c.CipherSuites = []uint16{ECC_SM4_CBC_SM3, ECC_SM4_GCM_SM3} }),
			want: []TicketEvent{evRejected(TicketReasonSuite), evIssued}},
		{name: "client_auth", prime: server(k1), srv: with(server(k1), func(c *Config) { c.ClientAuth = RequireAndVerifyClientCert }),
			want: []TicketEvent{evRejected(TicketReasonClientAuth), evIssued}},
		{name: "disabled", prime: server(k1), srv: with(server(k1), func(c *Config) { c.SessionTicketsDisabled = true }),
			want: []TicketEvent{evRejected(TicketReasonDisabled)}},
		// Session IDs only: no ticket events at all.
		{name: "session_id", prime: with(server(k1), func(c *Config) { c.SessionTicketsDisabled = true }),
			srv: with(server(k1), func(c *Config) { c.SessionTicketsDisabled = true }), resume: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := &oneCache{}
			ccfg := p.clientConfig()
			ccfg.ClientSessionCache = cache
			if tc.prime != nil {
				r := runPair(t, tc.prime, ccfg, []byte("a"))
				if r.cerr != nil || r.serr != nil || r.ss.DidResume {
					t.Fatalf("priming: %v %v resumed=%v", r.cerr, r.serr, r.ss.DidResume)
				}
				want := []TicketEvent{evIssued}
				if tc.prime.SessionTicketsDisabled {
					want = nil
				}
				if got := log.take(); !slices.Equal(got, want) {
					t.Fatalf("priming events %v, want %v", got, want)
				}
			}
			if tc.inject != nil {
				cache.Put("", tc.inject)
			}
			if tc.damage {
				cache.s.ticket = bytes.Clone(cache.s.ticket)
				cache.s.ticket[len(cache.s.ticket)-1] ^= 1
			}
			if tc.relabel {
				plain, ok, _ := ticket.Open(ticket.Static{k1}, ticket.TLCP, cache.s.ticket)
				if !ok {
					t.Fatal("the primed ticket does not open")
				}
				tk, err := ticket.Seal(nil, ticket.Static{k1}, ticket.TLS13SM, plain)
				if err != nil {
					t.Fatal(err)
				}
				cache.s.ticket = tk
			}
			if tc.client != nil {
				tc.client(ccfg)
			}
			r := runPair(t, tc.srv, ccfg, []byte("a"))
			if r.cerr != nil || r.serr != nil {
				t.Fatalf("handshake: %v %v", r.cerr, r.serr)
			}
			if r.ss.DidResume != tc.resume || r.cs.DidResume != tc.resume {
				t.Errorf("resumed server=%v client=%v, want %v", r.ss.DidResume, r.cs.DidResume, tc.resume)
			}
			if got := log.take(); !slices.Equal(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTicketEventKindString(t *testing.T) {
	for k, want := range map[TicketEventKind]string{TicketIssued: "issued", TicketAccepted: "accepted", TicketRejected: "rejected", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("%d: %q, want %q", k, got, want)
		}
	}
}

// TestResumptionReverifiesClientCerts: a server that verifies client
// certificates verifies a resumed session's certificates again, against
// its ClientCAs of today, for tickets and session IDs alike.
func TestResumptionReverifiesClientCerts(t *testing.T) {
	p := loadPKI(t)
	k := testTicketKey(t, 7)
	secondCA, _ := genCA(t, "Second CA")
	otherPool := smx509.NewCertPool()
	otherPool.AddCert(secondCA)
	for _, tickets := range []bool{true, false} {
		log := &ticketLog{}
		store := NewLRUSessionStore(16, time.Hour)
		server := func(pool *smx509.CertPool) *Config {
			c := p.serverConfig()
			c.ClientAuth = RequireAndVerifyClientCert
			c.ClientCAs = pool
			c.TicketKeys = ticket.Static{k}
			c.SessionTicketsDisabled = !tickets
			c.SessionStore = store
			c.OnTicket = log.hook
			return c
		}
		ccfg := p.clientConfig()
		ccfg.ClientSessionCache = &oneCache{}
		if r := runPair(t, server(p.pool), ccfg, []byte("a")); r.cerr != nil || r.serr != nil || r.ss.DidResume {
			t.Fatalf("tickets=%v priming: %v %v resumed=%v", tickets, r.cerr, r.serr, r.ss.DidResume)
		}
		log.take()
		r := runPair(t, server(p.pool), ccfg, []byte("a"))
		if r.cerr != nil || r.serr != nil || !r.ss.DidResume {
			t.Fatalf("tickets=%v resumption: %v %v resumed=%v", tickets, r.cerr, r.serr, r.ss.DidResume)
		}
		if len(r.ss.PeerCertificates) == 0 || len(r.ss.VerifiedChains) == 0 {
			t.Fatalf("tickets=%v resumed connection: %d peer certificates, %d verified chains", tickets, len(r.ss.PeerCertificates), len(r.ss.VerifiedChains))
		}
		log.take()
		// The client's CA is no longer trusted: no resumption, and the full
		// handshake that follows refuses the certificate.
		r = runPair(t, server(otherPool), ccfg, []byte("a"))
		if r.serr == nil || r.ss.DidResume {
			t.Fatalf("tickets=%v after the CA change: server error %v, resumed=%v", tickets, r.serr, r.ss.DidResume)
		}
		want := []TicketEvent{evRejected(TicketReasonClientCert)}
		if !tickets {
			want = nil
		}
		if got := log.take(); !slices.Equal(got, want) {
			t.Fatalf("tickets=%v events %v, want %v", tickets, got, want)
		}
		// A server that verifies with no CAs at all refuses every
		// client certificate in a full handshake (unknown_ca), and so
		// a resumed one too.
		ccfg.ClientSessionCache = &oneCache{}
		if r := runPair(t, server(p.pool), ccfg, []byte("a")); r.cerr != nil || r.serr != nil || r.ss.DidResume {
			t.Fatalf("tickets=%v priming again: %v %v resumed=%v", tickets, r.cerr, r.serr, r.ss.DidResume)
		}
		log.take()
		r = runPair(t, server(nil), ccfg, []byte("a"))
		if r.serr == nil || r.ss.DidResume {
			t.Fatalf("tickets=%v verifying without CAs: server error %v, resumed=%v", tickets, r.serr, r.ss.DidResume)
		}
		if got := log.take(); !slices.Equal(got, want) {
			t.Fatalf("tickets=%v verifying without CAs: events %v, want %v", tickets, got, want)
		}
	}
}

// TestTicketRenewal: a resumption keeps a ticket sealed under the current
// key (no NewSessionTicket) and renews one sealed under an older key, so
// that the client still resumes once that key is retired.
func TestTicketRenewal(t *testing.T) {
	p := loadPKI(t)
	k1, k2 := testTicketKey(t, 1), testTicketKey(t, 2)
	server := func(keys ...ticket.Key) *Config {
		c := p.serverConfig()
		c.TicketKeys = ticket.Static(keys)
		return c
	}
	cache := &oneCache{}
	ccfg := p.clientConfig()
	ccfg.ClientSessionCache = cache
	// The client's clock moves a minute a step, so that a kept ticket shows
	// its age.
	now := time.Now()
	ccfg.Time = func() time.Time { return now }
	steps := []struct {
		name           string
		srv            *Config
		resume, newTkt bool
	}{
		{"full handshake", server(k1), false, true},
		{"resumed under the same key", server(k1), true, false},
		{"again", server(k1), true, false},
		{"resumed under a newer key", server(k2, k1), true, true},
		{"the older key retired", server(k2), true, false},
	}
	var last []byte
	var lastAt time.Time
	for _, st := range steps {
		now = now.Add(time.Minute)
		r := runPair(t, st.srv, ccfg, []byte("a"))
		if r.cerr != nil || r.serr != nil {
			t.Fatalf("%s: %v %v", st.name, r.cerr, r.serr)
		}
		if r.ss.DidResume != st.resume || r.cs.DidResume != st.resume {
			t.Errorf("%s: resumed server=%v client=%v, want %v", st.name, r.ss.DidResume, r.cs.DidResume, st.resume)
		}
		tk, _ := cache.Get("")
		if tk == nil || len(tk.ticket) == 0 {
			t.Fatalf("%s: the client holds no ticket", st.name)
		}
		if changed := !bytes.Equal(tk.ticket, last); changed != st.newTkt {
			t.Errorf("%s: new ticket = %v, want %v", st.name, changed, st.newTkt)
		}
		// A kept ticket keeps its age; a new one starts now.
		if wantAt := map[bool]time.Time{true: now, false: lastAt}[st.newTkt]; !tk.receivedAt.Equal(wantAt) {
			t.Errorf("%s: the client's ticket dates from %v, want %v", st.name, tk.receivedAt, wantAt)
		}
		last, lastAt = bytes.Clone(tk.ticket), tk.receivedAt
	}
}
