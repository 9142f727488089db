package tls13sm

import (
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// forgetClientChain drops a client chain from this process's cache, which
// is what a second instance (another process sharing the ticket keys)
// looks like to a resumed connection.
func forgetClientChain(leafDER []byte) { clientChainCache.Delete(sm3.Sum(leafDER)) }

// TestResumedClientIdentityAcrossInstances: two server instances share the
// ticket keys and require verified client certificates. A ticket issued by
// the first resumes on the second, which no longer has the client chain:
// the connection still counts as client-authenticated, from the ticket.
func TestResumedClientIdentityAcrossInstances(t *testing.T) {
	p := loadPKI(t)
	srvA, cliCfg := testConfigs(t)
	srvA.ClientAuth = RequireAndVerifyClientCert
	srvA.TicketKeys = ticket.Static(mustKeys(t, 1))
	srvB := srvA.Clone()
	leaf := p.client.Certificate[0]
	wantHash := sm3.Sum(leaf)

	_, a := echoRound(t, srvA, cliCfg)
	if a.err != nil || a.state.DidResume {
		t.Fatalf("first connection: err %v resumed %v", a.err, a.state.DidResume)
	}
	if !a.state.ClientCertificate || !a.state.ClientVerified || a.state.ClientLeafHash != wantHash ||
		len(a.state.PeerCertificates) == 0 || len(a.state.VerifiedChains) == 0 {
		t.Fatalf("full handshake client identity: %+v", a.state)
	}

	// Same process first (the chain is still cached), then as another
	// process would see it (the chain is gone).
	for _, cached := range []bool{true, false} {
		if !cached {
			forgetClientChain(leaf)
		}
		_, b := echoRound(t, srvB, cliCfg)
		if b.err != nil || !b.state.DidResume {
			t.Fatalf("cached=%v: second instance: err %v resumed %v", cached, b.err, b.state.DidResume)
		}
		if !b.state.ClientCertificate || !b.state.ClientVerified || b.state.ClientLeafHash != wantHash {
			t.Fatalf("cached=%v: resumed connection lost the client identity: %+v", cached, b.state)
		}
		hasChain := len(b.state.PeerCertificates) > 0 && len(b.state.VerifiedChains) > 0
		noChain := len(b.state.PeerCertificates) == 0 && len(b.state.VerifiedChains) == 0
		if cached && !hasChain || !cached && !noChain {
			t.Fatalf("cached=%v: %d peer certificates, %d verified chains", cached, len(b.state.PeerCertificates), len(b.state.VerifiedChains))
		}
	}
}

// TestTicketClientPolicy: a session whose client certificate was not
// verified (RequestClientCert) does not resume where verification is
// required, and a verified one stops resuming once the client leaf expires.
func TestTicketClientPolicy(t *testing.T) {
	p := loadPKI(t)
	srvCfg, cliCfg := testConfigs(t)
	var mu sync.Mutex
	var reasons []string
	srvCfg.OnTicket = func(e TicketEvent) {
		if e.Kind == TicketRejected {
			mu.Lock()
			reasons = append(reasons, e.Reason)
			mu.Unlock()
		}
	}
	connect := func(cfg *Config) ConnectionState {
		t.Helper()
		_, r := echoRound(t, cfg, cliCfg)
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.state
	}
	lastReason := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(reasons) == 0 {
			return ""
		}
		return reasons[len(reasons)-1]
	}

	// Unverified certificate, then a server that requires verification.
	req := srvCfg.Clone()
	req.ClientAuth = RequestClientCert
	if st := connect(req); !st.ClientCertificate || st.ClientVerified {
		t.Fatalf("RequestClientCert: %+v", st)
	}
	if st := connect(req); !st.DidResume || !st.ClientCertificate || st.ClientVerified {
		t.Fatalf("RequestClientCert resumed: %+v", st)
	}
	strict := srvCfg.Clone()
	strict.ClientAuth = RequireAndVerifyClientCert
	if st := connect(strict); st.DidResume || !st.ClientVerified || lastReason() != TicketReasonClientAuth {
		t.Fatalf("unverified ticket under RequireAndVerifyClientCert: resumed %v, reason %q", st.DidResume, lastReason())
	}
	// A ticket without a client certificate under RequireAnyClientCert,
	// and an unverified one under VerifyClientCertIfGiven, do not resume
	// either (each client with its own cache: the ticket is the one the
	// first server issued).
	for _, tc := range []struct{ issue, resume ClientAuthType }{
		{NoClientCert, RequireAnyClientCert},
		{RequestClientCert, VerifyClientCertIfGiven},
	} {
		cli := cliCfg.Clone()
		cli.ClientSessionCache = NewLRUClientSessionCache(8)
		issuer, resumer := srvCfg.Clone(), srvCfg.Clone()
		issuer.ClientAuth, resumer.ClientAuth = tc.issue, tc.resume
		if _, r := echoRound(t, issuer, cli); r.err != nil {
			t.Fatal(r.err)
		}
		_, r := echoRound(t, resumer, cli)
		if r.err != nil || r.state.DidResume || lastReason() != TicketReasonClientAuth {
			t.Fatalf("ticket issued under ClientAuth %v, resumed under %v: %v, resumed %v, reason %q", tc.issue, tc.resume, r.err, r.state.DidResume, lastReason())
		}
	}

	// Expiry of the verified client leaf: issue 30 minutes before its
	// NotAfter, resume 30 minutes after (the ticket itself is still fresh).
	notAfter := p.client.Leaf.NotAfter
	var clockMu sync.Mutex
	now := notAfter.Add(-30 * time.Minute)
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	exp := strict.Clone()
	exp.Time = clock
	cliCfg.Time, cliCfg.InsecureSkipVerify = clock, true // the server certificate is not under test
	if st := connect(exp); !st.ClientVerified {
		t.Fatalf("before expiry: %+v", st)
	}
	if st := connect(exp); !st.DidResume {
		t.Fatal("verified ticket did not resume before the client certificate expired")
	}
	clockMu.Lock()
	now = notAfter.Add(30 * time.Minute)
	clockMu.Unlock()
	// TLS 1.3: the client finishes before the server checks its
	// certificate, so the failure shows on the server (and later reads).
	// A failed server handshake reports no state, so no resumption either.
	if _, serr := handshakeErrs(t, exp, cliCfg); serr == nil {
		t.Fatal("expired client certificate: server handshake succeeded")
	} else {
		wantAlert(t, serr, AlertCertificateExpired, false)
	}
	if lastReason() != TicketReasonClientCertExpired {
		t.Fatalf("reason %q, want %q", lastReason(), TicketReasonClientCertExpired)
	}
}
