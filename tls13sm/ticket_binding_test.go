package tls13sm

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// rejections records the reasons of a server's TicketRejected events.
type rejections struct {
	mu      sync.Mutex
	reasons []string
}

func (r *rejections) hook(e TicketEvent) {
	if e.Kind == TicketRejected {
		r.mu.Lock()
		r.reasons = append(r.reasons, e.Reason)
		r.mu.Unlock()
	}
}

func (r *rejections) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reasons
	r.reasons = nil
	return out
}

// offerAs moves the client's cached "localhost" session under name and
// returns a client config that offers it with SNI name.
func offerAs(t *testing.T, cliCfg *Config, name string) *Config {
	t.Helper()
	cs := cachedSession(t, cliCfg)
	c := cliCfg.Clone()
	c.ServerName = name
	c.InsecureSkipVerify = true // a full handshake to a name the certificate lacks
	c.ClientSessionCache = NewLRUClientSessionCache(2)
	c.ClientSessionCache.Put(name, cs)
	return c
}

// TestTicketBoundToSite: one ticket key set shared by two server configs (two
// sites). A ticket resumes only with the server name it was issued for,
// compared without regard to case, and only on the config with the same
// certificate; elsewhere it is rejected as identity_mismatch.
func TestTicketBoundToSite(t *testing.T) {
	p := loadPKI(t)
	srv, cliCfg := testConfigs(t)
	var rej rejections
	srv.OnTicket = rej.hook
	other := srv.Clone()
	other.Certificates = []Certificate{p.client} // another SM2 signing certificate

	cases := []struct {
		name    string
		srv     *Config
		sni     string
		resumed bool
	}{
		{"same name", srv, "localhost", true},
		{"name in upper case", srv, "LOCALHOST", true},
		{"name with a final dot", srv, "LocalHost.", true},
		{"other name", srv, "other.test", false},
		{"other certificate", other, "localhost", false},
	}
	for _, c := range cases {
		if _, r := echoRound(t, srv, cliCfg); r.err != nil {
			t.Fatalf("%s: issuing: %v", c.name, r.err)
		}
		rej.take()
		_, r := echoRound(t, c.srv, offerAs(t, cliCfg, c.sni))
		if r.err != nil {
			t.Fatalf("%s: %v", c.name, r.err)
		}
		if r.state.DidResume != c.resumed {
			t.Errorf("%s: resumed = %v, want %v", c.name, r.state.DidResume, c.resumed)
		}
		got := strings.Join(rej.take(), ",")
		if want := map[bool]string{true: "", false: TicketReasonIdentity}[c.resumed]; got != want {
			t.Errorf("%s: rejections %q, want %q", c.name, got, want)
		}
	}
}

// TestTicketClientAuthBinding: a ticket with a verified client certificate
// is bound to the client-auth settings it was verified under. After they
// change, the chain still cached in this process is verified again against
// the current ClientCAs (resumes while the CA stays); without the chain, or
// when the CA is gone, the ticket is rejected as client_cert_invalid and the
// full handshake fails with unknown_ca when the CA was removed.
func TestTicketClientAuthBinding(t *testing.T) {
	p := loadPKI(t)
	srv, cliCfg := testConfigs(t)
	var rej rejections
	srv.OnTicket = rej.hook
	srv.ClientAuth = RequireAndVerifyClientCert
	srv.ClientCAsFingerprint = []byte("CAs of epoch 1")
	issue := func() {
		t.Helper()
		if _, r := echoRound(t, srv, cliCfg); r.err != nil {
			t.Fatal(r.err)
		}
		rej.take()
	}

	// Same settings: resumes.
	issue()
	if _, r := echoRound(t, srv.Clone(), cliCfg); r.err != nil || !r.state.DidResume {
		t.Fatalf("unchanged settings: err %v resumed %v", r.err, r.state.DidResume)
	}

	// New fingerprint, same CAs, chain cached: verified again, resumes.
	issue()
	epoch2 := srv.Clone()
	epoch2.ClientCAsFingerprint = []byte("CAs of epoch 2")
	if _, r := echoRound(t, epoch2, cliCfg); r.err != nil || !r.state.DidResume || len(r.state.VerifiedChains) == 0 {
		t.Fatalf("changed settings, chain cached: err %v resumed %v", r.err, r.state.DidResume)
	}
	if got := rej.take(); len(got) != 0 {
		t.Fatalf("rejections %q", got)
	}

	// New fingerprint, chain not cached (another instance): rejected, and
	// the full handshake that follows succeeds with the certificate.
	issue()
	forgetClientChain(p.client.Certificate[0])
	epoch3 := srv.Clone()
	epoch3.ClientCAsFingerprint = []byte("CAs of epoch 3")
	if _, r := echoRound(t, epoch3, cliCfg); r.err != nil || r.state.DidResume {
		t.Fatalf("changed settings, chain not cached: err %v resumed %v", r.err, r.state.DidResume)
	}
	if got := strings.Join(rej.take(), ","); got != TicketReasonClientCert {
		t.Fatalf("rejections %q, want %q", got, TicketReasonClientCert)
	}

	// The client's CA removed (chain cached): rejected, full handshake fails.
	issue()
	noCA := srv.Clone()
	noCA.ClientCAs = smx509.NewCertPool()
	noCA.ClientCAsFingerprint = CertificatesFingerprint(nil)
	_, serr := handshakeErrs(t, noCA, cliCfg)
	wantAlert(t, serr, AlertUnknownCA, false)
	if got := strings.Join(rej.take(), ","); got != TicketReasonClientCert {
		t.Fatalf("CA removed: rejections %q, want %q", got, TicketReasonClientCert)
	}

	// The policy changed to no client certificates: the identity is not
	// carried over to a site that does not check it.
	issue()
	none := srv.Clone()
	none.ClientAuth = NoClientCert
	if _, r := echoRound(t, none, cliCfg); r.err != nil || r.state.DidResume || r.state.ClientCertificate {
		t.Fatalf("policy none: err %v resumed %v client %v", r.err, r.state.DidResume, r.state.ClientCertificate)
	}
}

// TestResumedChainPassesHook: the VerifyPeerCertificate hook runs on the
// client chain of a resumed session though the client-auth settings are
// unchanged, so a policy that refuses today what it passed when the ticket
// was issued (a CRL gone stale) is not passed by resuming: the ticket is
// rejected and the full handshake fails with the hook's alert.
func TestResumedChainPassesHook(t *testing.T) {
	srv, cliCfg := testConfigs(t)
	var rej rejections
	srv.OnTicket = rej.hook
	srv.ClientAuth = RequireAndVerifyClientCert
	srv.ClientCAsFingerprint = []byte("unchanged")
	var refuse atomic.Bool
	var calls atomic.Int32
	srv.VerifyPeerCertificate = func(_ [][]byte, chains [][]*smx509.Certificate) error {
		calls.Add(1)
		if len(chains) == 0 {
			return errors.New("no verified chain")
		}
		if refuse.Load() {
			return &AlertError{Alert: AlertCertificateRevoked, Err: errors.New("refused since")}
		}
		return nil
	}
	if _, r := echoRound(t, srv, cliCfg); r.err != nil {
		t.Fatal(r.err)
	}
	rej.take()
	calls.Store(0)
	if _, r := echoRound(t, srv.Clone(), cliCfg); r.err != nil || !r.state.DidResume {
		t.Fatalf("hook passing: err %v resumed %v", r.err, r.state.DidResume)
	}
	if calls.Load() == 0 {
		t.Fatal("the hook did not run on the resumed session's chain")
	}
	refuse.Store(true)
	_, serr := handshakeErrs(t, srv.Clone(), cliCfg)
	wantAlert(t, serr, AlertCertificateRevoked, false)
	if got := strings.Join(rej.take(), ","); got != TicketReasonClientCert {
		t.Fatalf("hook refusing: rejections %q, want %q", got, TicketReasonClientCert)
	}
}

// TestCertificatesFingerprint: the fingerprint depends on the set of
// certificates, not their order.
func TestCertificatesFingerprint(t *testing.T) {
	p := loadPKI(t)
	a, b := p.server.Leaf, p.client.Leaf
	if a == nil || b == nil {
		t.Fatal("test PKI without parsed leaves")
	}
	ab, ba := CertificatesFingerprint([]*smx509.Certificate{a, b}), CertificatesFingerprint([]*smx509.Certificate{b, a})
	if string(ab) != string(ba) {
		t.Error("fingerprint depends on the order")
	}
	if string(ab) == string(CertificatesFingerprint([]*smx509.Certificate{a})) {
		t.Error("removing a certificate left the fingerprint unchanged")
	}
}

// TestTicketMaxSize: the largest session state (client certificate, a
// 64-byte ALPN name) is maxSessionState bytes and seals to at most 256, and a
// real handshake with both issues a ticket within that bound.
func TestTicketMaxSize(t *testing.T) {
	s := sessionState{suite: TLS_SM4_GCM_SM3, client: clientIdentity{presented: true, verified: true}, alpn: strings.Repeat("a", maxTicketALPN)}
	plain := s.marshalFast(nil)
	if len(plain) != maxSessionState {
		t.Fatalf("largest state is %d bytes, maxSessionState %d", len(plain), maxSessionState)
	}
	if std, err := s.marshal(); err != nil || string(std) != string(plain) {
		t.Fatalf("marshal and marshalFast differ (%v)", err)
	}
	sealed, err := ticket.Seal(nil, ticket.Static(mustKeys(t, 1)), ticket.TLS13SM, plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) > maxTicketSize || maxSessionState+ticket.Overhead > 256 {
		t.Fatalf("largest ticket is %d bytes, over 256", len(sealed))
	}

	srv, cliCfg := testConfigs(t)
	srv.ClientAuth = RequireAndVerifyClientCert
	long := strings.Repeat("p", maxTicketALPN)
	srv.NextProtos, cliCfg.NextProtos = []string{long}, []string{long}
	if _, r := echoRound(t, srv, cliCfg); r.err != nil {
		t.Fatal(r.err)
	}
	if n := len(cachedSession(t, cliCfg).ticket); n != maxSessionState+ticket.Overhead {
		t.Fatalf("issued ticket of %d bytes, want the maximum %d", n, maxSessionState+ticket.Overhead)
	}
}

// TestTicketProtocolLabel: a TLS 1.3-SM ticket sealed again as a TLCP
// ticket under the same key does not open (undecryptable): the protocol is
// authenticated with the ticket.
func TestTicketProtocolLabel(t *testing.T) {
	srv, cliCfg := testConfigs(t)
	var rej rejections
	srv.OnTicket = rej.hook
	keys := ticket.Static(mustKeys(t, 1))
	srv.TicketKeys = keys
	if _, r := echoRound(t, srv, cliCfg); r.err != nil {
		t.Fatal(r.err)
	}
	cs := cachedSession(t, cliCfg)
	plain, ok, _ := ticket.Open(keys, ticket.TLS13SM, cs.ticket)
	if !ok {
		t.Fatal("the issued ticket does not open")
	}
	relabeled, err := ticket.Seal(nil, keys, ticket.TLCP, plain)
	if err != nil {
		t.Fatal(err)
	}
	cs.ticket = relabeled
	rej.take()
	if _, r := echoRound(t, srv, cliCfg); r.err != nil || r.state.DidResume {
		t.Fatalf("relabeled ticket: err %v resumed %v", r.err, r.state.DidResume)
	}
	if got := strings.Join(rej.take(), ","); got != TicketReasonUndecryptable {
		t.Errorf("rejections %q, want %q", got, TicketReasonUndecryptable)
	}
}
