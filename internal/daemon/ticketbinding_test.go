package daemon

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// pki2 is a second development PKI: another CA ("CA2") issuing other
// client certificates than testPKI's CA ("CA1").
var pki2 = sync.OnceValues(func() (*devpki.PKI, error) {
	return devpki.Generate(devpki.Options{Organization: "gmproxy second test PKI", ClientCN: "client of CA2", SkipECDSA: true})
})

func testPKI2(t testing.TB) *devpki.PKI {
	t.Helper()
	p, err := pki2()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// smResult is what one TLS 1.3-SM connection to the daemon did.
type smResult struct {
	resumed bool
	status  int // HTTP status, 0 when the request failed
	body    string
	err     error // the handshake's or the request's error
}

// smFetch dials addr with a TLS 1.3-SM client presenting client (nil:
// none) with SNI sni and the sessions in cache, and does one request.
func smFetch(t *testing.T, addr, sni string, client *conf.KeyPair, cache tls13sm.ClientSessionCache) smResult {
	t.Helper()
	cfg := &tls13sm.Config{RootCAs: testRoots(t), ServerName: sni, ClientSessionCache: cache, NextProtos: []string{"http/1.1"}}
	if _, ok := cache.(transplanted); ok {
		// A client that verifies would not offer a ticket for one name
		// under another: only one that does not can try the server.
		cfg.InsecureSkipVerify = true
	}
	if client != nil {
		cfg.Certificates = []tls13sm.Certificate{{Certificate: client.DER(), PrivateKey: client.Key, Leaf: client.Leaf()}}
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	c := tls13sm.Client(raw, cfg)
	if err := c.Handshake(); err != nil {
		return smResult{err: err}
	}
	res := smResult{resumed: c.ConnectionState().DidResume}
	req, _ := http.NewRequest("GET", "https://"+sni+"/r", nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		res.err = err
		return res
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		res.err = err
		return res
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res.status, res.body = resp.StatusCode, string(body)
	return res
}

// offeredAs returns a client session cache holding the session cache
// keeps for from, under the name to: a client offering one site's ticket
// with another server name.
func offeredAs(t *testing.T, cache tls13sm.ClientSessionCache, from, to string) tls13sm.ClientSessionCache {
	t.Helper()
	cs, ok := cache.Get(from)
	if !ok {
		t.Fatalf("no session cached for %s", from)
	}
	out := tls13sm.NewLRUClientSessionCache(4)
	out.Put(to, cs)
	return transplanted{out}
}

// transplanted is a cache of offeredAs.
type transplanted struct{ tls13sm.ClientSessionCache }

// wantRemoteAlert checks that err is the server's alert a.
func wantRemoteAlert(t *testing.T, what string, err error, a tls13sm.Alert) {
	t.Helper()
	var ae *tls13sm.AlertError
	if !errors.As(err, &ae) || !ae.Remote || ae.Alert != a {
		t.Errorf("%s: error %v, want the server's alert %q", what, err, a)
	}
}

// ticketRejections returns the TLS 1.3-SM ticket rejections counted for reason.
func ticketRejections(t *testing.T, m *metrics.Metrics, reason string) string {
	t.Helper()
	prefix := `gmproxy_session_tickets_rejected_total{protocol="tls13sm",reason="` + reason + `"} `
	for _, l := range strings.Split(scrape(t, m), "\n") {
		if n, ok := strings.CutPrefix(l, prefix); ok {
			return n
		}
	}
	return "0"
}

// TestTLS13SMTicketBoundToSite: two sites share the daemon's ticket keys.
// Site A (a.example.cn) requests client certificates from CA2, site B
// (*.b.example.cn) requires them from CA1. A ticket issued by A, offered
// with B's name (in any case), does not resume: the full handshake that
// follows fails with unknown_ca; the same the other way round. A's ticket
// with A's name in upper case resumes (names compare without regard to
// case). Sites with identical client-auth settings do not resume each
// other's tickets either (identity_mismatch).
func TestTLS13SMTicketBoundToSite(t *testing.T) {
	p, p2 := testPKI(t), testPKI2(t)
	client1, client2 := pair(p.ClientSign), pair(p2.ClientSign)
	b := newBackend(t)
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Sessions.Tickets = true
	cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequest, CA: "ca2.crt"}
	cfg.Sites[0].Material.ClientCAs = []*smx509.Certificate{p2.CA.Cert}
	cfg.Sites[1].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca1.crt"}
	cfg.Sites[1].Material.ClientCAs = []*smx509.Certificate{p.CA.Cert}
	addr := startDaemon(t, cfg, func(e *Env) { e.Sessions = m }).addr
	const siteA, siteB = "a.example.cn", "x.b.example.cn"

	// Full handshakes: each client is accepted by its own site only.
	if r := smFetch(t, addr, siteB, client2, nil); r.status == 200 {
		t.Fatal("site B accepted a client certificate from CA2")
	}
	for _, c := range []struct {
		name, issuer, other string
		client, otherClient *conf.KeyPair
	}{
		{"A to B", siteA, siteB, client2, client2},
		{"B to A", siteB, siteA, client1, client1},
	} {
		cache := tls13sm.NewLRUClientSessionCache(4)
		if r := smFetch(t, addr, c.issuer, c.client, cache); r.err != nil || r.status != 200 || r.resumed {
			t.Fatalf("%s: issuing: %+v", c.name, r)
		}
		if r := smFetch(t, addr, c.issuer, c.client, cache); r.err != nil || !r.resumed {
			t.Fatalf("%s: resuming on the issuing site: %+v", c.name, r)
		}
		for _, name := range []string{c.other, strings.ToUpper(c.other)} {
			r := smFetch(t, addr, name, c.otherClient, offeredAs(t, cache, c.issuer, name))
			if r.resumed || r.status == 200 {
				t.Errorf("%s: ticket offered as %s: %+v (resumed on another site)", c.name, name, r)
			}
			wantRemoteAlert(t, c.name+" as "+name, r.err, tls13sm.AlertUnknownCA)
		}
		// Without a certificate the other site's full handshake fails too.
		if name := c.other; name == siteB {
			r := smFetch(t, addr, name, nil, offeredAs(t, cache, c.issuer, name))
			if r.resumed || r.status == 200 {
				t.Errorf("%s: ticket offered without a certificate: %+v", c.name, r)
			}
			wantRemoteAlert(t, c.name+" without a certificate", r.err, tls13sm.AlertCertificateRequired)
		}
		upper := strings.ToUpper(c.issuer)
		if r := smFetch(t, addr, upper, c.client, offeredAs(t, cache, c.issuer, upper)); r.err != nil || !r.resumed || r.status != 200 {
			t.Errorf("%s: ticket offered as %s on its own site: %+v", c.name, upper, r)
		}
	}
	if n := ticketRejections(t, m, "identity_mismatch"); n != "5" {
		t.Errorf("identity_mismatch rejections %s, want 5", n)
	}

	// Two sites with the same (no) client authentication.
	plain := testConfig(t, b.Listener.Addr().String())
	plain.Sessions.Tickets = true
	m2, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	addr2 := startDaemon(t, plain, func(e *Env) { e.Sessions = m2 }).addr
	cache := tls13sm.NewLRUClientSessionCache(4)
	if r := smFetch(t, addr2, siteA, nil, cache); r.err != nil || r.status != 200 {
		t.Fatalf("no client auth: issuing: %+v", r)
	}
	if r := smFetch(t, addr2, siteB, nil, offeredAs(t, cache, siteA, siteB)); r.err != nil || r.resumed || r.status != 200 {
		t.Errorf("no client auth: A's ticket on B: %+v, want a full handshake", r)
	}
	if n := ticketRejections(t, m2, "identity_mismatch"); n != "1" {
		t.Errorf("no client auth: identity_mismatch rejections %s, want 1", n)
	}
}

// TestTLS13SMTicketAfterClientCARemoved: a ticket issued to a client whose
// CA a reload then removes does not resume: the full handshake that follows
// fails with unknown_ca and the rejection is counted as client_cert_invalid.
// While the CA stays (another one added), the ticket still resumes.
func TestTLS13SMTicketAfterClientCARemoved(t *testing.T) {
	p, p2 := testPKI(t), testPKI2(t)
	client1 := pair(p.ClientSign)
	b := newBackend(t)
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	withCAs := func(cas ...*smx509.Certificate) *conf.Config {
		cfg := testConfig(t, b.Listener.Addr().String())
		cfg.Sessions.Tickets = true
		cfg.Sites[0].ClientAuth = conf.ClientAuth{Mode: conf.ClientAuthRequire, CA: "ca.crt"}
		cfg.Sites[0].Material.ClientCAs = cas
		return cfg
	}
	td := startDaemon(t, withCAs(p.CA.Cert), func(e *Env) { e.Sessions = m })
	cache := tls13sm.NewLRUClientSessionCache(4)
	if r := smFetch(t, td.addr, "localhost", client1, cache); r.err != nil || r.status != 200 || r.resumed {
		t.Fatalf("issuing: %+v", r)
	}
	td.reloadWith(t, withCAs(p.CA.Cert, p2.CA.Cert))
	if r := smFetch(t, td.addr, "localhost", client1, cache); r.err != nil || r.status != 200 || !r.resumed {
		t.Fatalf("after adding a CA: %+v, want a resumption", r)
	}
	td.reloadWith(t, withCAs(p2.CA.Cert))
	r := smFetch(t, td.addr, "localhost", client1, cache)
	if r.resumed || r.status == 200 {
		t.Fatalf("after removing the client's CA: %+v, want no resumption", r)
	}
	wantRemoteAlert(t, "after removing the client's CA", r.err, tls13sm.AlertUnknownCA)
	if n := ticketRejections(t, m, "client_cert_invalid"); n != "1" {
		t.Errorf("client_cert_invalid rejections %s, want 1", n)
	}
}
