package tls13sm

import (
	"github.com/emmansun/gmsm/smx509"
	"sync"
	"testing"
	"time"
)

// TestRenewedTicketKeepsSessionStart: a TLS 1.3-SM session made by one
// full handshake (with a verified client certificate) stops resuming once
// it is older than TicketLifetime (gmproxy's sessions.lifetime), however
// often the client resumed it in between: tickets issued on resumption keep
// the session's start. RFC 8446 §4.6.1 recommends limiting "the total
// lifetime of such keying material", counting from the peer's online
// CertificateVerify.
func TestRenewedTicketKeepsSessionStart(t *testing.T) {
	srv, cli := testConfigs(t)
	srv.ClientAuth = RequireAndVerifyClientCert
	srv.TicketLifetime = 10 * time.Minute

	advance := sharedClock(srv, cli)

	_, r := echoRound(t, srv, cli)
	if r.err != nil || r.state.DidResume || !r.state.ClientVerified {
		t.Fatalf("full handshake: err %v resumed %v verified %v", r.err, r.state.DidResume, r.state.ClientVerified)
	}
	advance(8 * time.Minute)
	_, r = echoRound(t, srv, cli)
	if r.err != nil || !r.state.DidResume {
		t.Fatalf("resumption 8 minutes after the full handshake (lifetime 10m): err %v resumed %v", r.err, r.state.DidResume)
	}
	advance(8 * time.Minute)
	_, r = echoRound(t, srv, cli)
	if r.err != nil {
		t.Fatalf("third connection: %v", r.err)
	}
	if r.state.DidResume {
		t.Errorf("a session made by a full handshake 16m ago resumed although TicketLifetime is 10m "+
			"(client still counted as verified: %v): tickets renewed on resumption restart the clock "+
			"(RFC 8446 §4.6.1 recommends limiting the total lifetime; sessions.lifetime promises it)", r.state.ClientVerified)
	}
}

// TestClientResumesOnlyTrustedSessions: the TLS 1.3-SM client (the
// daemon's upstream dialer) offers a cached ticket only under trust
// settings that would accept its server now: a session made with
// InsecureSkipVerify, or verified against a CA since removed from RootCAs,
// is not offered by a Config that verifies against other roots (as
// crypto/tls does; RFC 8446 §4.6.1 binds a PSK to the server identity the
// client accepted).
func TestClientResumesOnlyTrustedSessions(t *testing.T) {
	p := loadPKI(t)
	for _, before := range []string{"InsecureSkipVerify", "the server's CA, since removed from RootCAs"} {
		srv, _ := testConfigs(t)
		cache := NewLRUClientSessionCache(4)
		first := &Config{ServerName: "localhost", InsecureSkipVerify: true, ClientSessionCache: cache}
		if before != "InsecureSkipVerify" {
			first = &Config{ServerName: "localhost", RootCAs: p.roots, ClientSessionCache: cache}
		}
		if _, r := echoRound(t, srv, first); r.err != nil || r.state.DidResume {
			t.Fatalf("full handshake: %v", r.err)
		}
		strict := &Config{ServerName: "localhost", RootCAs: smx509.NewCertPool(), ClientSessionCache: cache}
		addr, res := echoServer(t, srv)
		c, err := dialTest(t, addr, strict)
		if err == nil {
			st := c.ConnectionState()
			pingClose(t, c)
			<-res
			t.Errorf("a client whose RootCAs do not hold the server's CA completed a handshake (resumed %v, %d verified chains): it resumed a session made with %s",
				st.DidResume, len(st.VerifiedChains), before)
			continue
		}
		<-res
	}
}

// TestSessionAgeCheckedAfterLifetimeShrinks: the session's own age is
// checked, not only its ticket's: a ticket issued on resumption may
// outlive a TicketLifetime that a reload shortened, and must not resume a
// session older than the new lifetime.
func TestSessionAgeCheckedAfterLifetimeShrinks(t *testing.T) {
	srv, cli := testConfigs(t)
	srv.TicketLifetime = 10 * time.Minute
	advance := sharedClock(srv, cli)
	if _, r := echoRound(t, srv, cli); r.err != nil || r.state.DidResume {
		t.Fatalf("full handshake: %v resumed %v", r.err, r.state.DidResume)
	}
	advance(4 * time.Minute)
	if _, r := echoRound(t, srv, cli); r.err != nil || !r.state.DidResume {
		t.Fatalf("resumption at 4 minutes: %v resumed %v", r.err, r.state.DidResume)
	}
	// The new ticket lasts what is left of the session (6m); the
	// lifetime falls to 5m; at 7m the ticket is 3m old, the session 7m.
	srv.TicketLifetime = 5 * time.Minute
	advance(3 * time.Minute)
	if _, r := echoRound(t, srv, cli); r.err != nil || r.state.DidResume {
		t.Errorf("a session 7m old resumed under a lifetime of 5m: %v resumed %v", r.err, r.state.DidResume)
	}
}

// TestResumeNeedsClientChain: with ResumeNeedsClientChain, a ticket whose
// client chain this process does not hold (another instance issued it, or
// the cache lost it) is declined and the client authenticates again in a
// full handshake; without it, the ticket resumes on the identity it
// carries.
func TestResumeNeedsClientChain(t *testing.T) {
	for _, need := range []bool{false, true} {
		srv, cli := testConfigs(t)
		srv.ClientAuth = RequireAndVerifyClientCert
		srv.ResumeNeedsClientChain = need
		_, r := echoRound(t, srv, cli)
		if r.err != nil || r.state.DidResume || len(r.state.PeerCertificates) == 0 {
			t.Fatalf("need %v: full handshake: %v resumed %v", need, r.err, r.state.DidResume)
		}
		clientChainCache.Delete(r.state.ClientLeafHash)
		_, r = echoRound(t, srv, cli)
		if r.err != nil || r.state.DidResume == need {
			t.Errorf("need %v: ticket without its chain: %v, resumed %v", need, r.err, r.state.DidResume)
		}
		if need && len(r.state.PeerCertificates) == 0 {
			t.Errorf("need %v: the full handshake has no client certificate", need)
		}
	}
}

// sharedClock gives the configs one clock, moved on by the function it
// returns.
func sharedClock(cfgs ...*Config) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	for _, c := range cfgs {
		c.Time = clock
	}
	return func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}
