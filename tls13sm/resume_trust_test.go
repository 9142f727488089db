package tls13sm

import (
	"crypto"
	"crypto/rand"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/ticket"
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

// chainWithIntermediate issues root CA → intermediate CA (valid until interUntil) →
// client leaf (valid 30 days) with SM2 keys; it returns the client
// Certificate (leaf and intermediate) and a pool holding the root only.
func chainWithIntermediate(t *testing.T, interUntil time.Time) (Certificate, *smx509.CertPool) {
	t.Helper()
	now := time.Now()
	serial := int64(1000)
	mk := func(tmpl, parent *smx509.Certificate, pub any, signer crypto.Signer) *smx509.Certificate {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := smx509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	rootKey, _ := sm2.GenerateKey(rand.Reader)
	interKey, _ := sm2.GenerateKey(rand.Reader)
	leafKey, _ := sm2.GenerateKey(rand.Reader)
	rootT := &smx509.Certificate{Subject: pkix.Name{CommonName: "test root"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: smx509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	root := mk(rootT, rootT, rootKey.Public(), rootKey)
	inter := mk(&smx509.Certificate{Subject: pkix.Name{CommonName: "test intermediate"}, NotBefore: now.Add(-time.Hour), NotAfter: interUntil,
		KeyUsage: smx509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}, root, interKey.Public(), rootKey)
	leaf := mk(&smx509.Certificate{Subject: pkix.Name{CommonName: "test client"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(30 * 24 * time.Hour),
		KeyUsage: smx509.KeyUsageDigitalSignature, ExtKeyUsage: []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}}, inter, leafKey.Public(), interKey)
	pool := smx509.NewCertPool()
	pool.AddCert(root)
	return Certificate{Certificate: [][]byte{leaf.Raw, inter.Raw}, PrivateKey: leafKey, Leaf: leaf}, pool
}

// TestResumptionEndsWithTheChain: a TLS 1.3-SM session whose client chain
// verified does not resume once a CA of that chain has expired, though
// the leaf has not: a full handshake at that instant is refused, and the
// ticket must not keep the client authenticated (RFC 5280 §6.1.3(a)(2);
// crypto/tls checks every certificate of the verified chain, and the TLCP
// server verifies the chain again).
func TestResumptionEndsWithTheChain(t *testing.T) {
	p := loadPKI(t)
	start := time.Now()
	clientCert, roots := chainWithIntermediate(t, start.Add(time.Hour))
	var mu sync.Mutex
	now := start
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := &Config{Certificates: []Certificate{p.server}, ClientCAs: roots, ClientAuth: RequireAndVerifyClientCert,
		TicketKeys: ticket.Static(mustKeys(t, 1)), TicketLifetime: 24 * time.Hour, Time: clock}
	cli := &Config{RootCAs: p.roots, ServerName: "localhost", Certificates: []Certificate{clientCert},
		ClientSessionCache: NewLRUClientSessionCache(8), Time: clock}
	if _, r := echoRound(t, srv, cli); r.err != nil || r.state.DidResume || len(r.state.VerifiedChains) == 0 {
		t.Fatalf("full handshake: err %v resumed %v chains %d", r.err, r.state.DidResume, len(r.state.VerifiedChains))
	}
	mu.Lock()
	now = start.Add(2 * time.Hour)
	mu.Unlock()

	// Control: a fresh client (no ticket) is refused now.
	fresh := cli.Clone()
	fresh.ClientSessionCache = nil
	if cerr, serr := handshakeErrs(t, srv, fresh); serr == nil {
		t.Fatalf("control: a full handshake with an expired intermediate succeeded (client %v)", cerr)
	}

	addr, res := echoServer(t, srv)
	c, err := dialTest(t, addr, cli)
	if err != nil {
		<-res
		return // refused: correct
	}
	// In TLS 1.3 the client's handshake ends before the server has
	// checked its flight: a refusal shows on the first read.
	c.Write([]byte("ping"))
	_, rerr := io.ReadFull(c, make([]byte, 4))
	c.Close()
	r := <-res
	if rerr == nil && r.err == nil && r.state.DidResume {
		t.Errorf("a ticket resumed 1h after the intermediate CA of the client's chain expired (full handshake refused): ClientVerified %v, %d verified chains, leaf %q",
			r.state.ClientVerified, len(r.state.VerifiedChains), clientCert.Leaf.Subject.CommonName)
	}
}
