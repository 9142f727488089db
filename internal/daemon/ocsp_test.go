package daemon

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/staple"
	"github.com/gmproxy/gmproxy/internal/staple/ocsptest"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// ocspObserver records the reported nextUpdates by site.
type ocspObserver struct {
	mu   sync.Mutex
	next map[string]time.Time
}

func (o *ocspObserver) SetOCSPNextUpdate(site string, next time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.next == nil {
		o.next = map[string]time.Time{}
	}
	o.next[site] = next
}

func (o *ocspObserver) get(site string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next[site]
}

// ocspConfig is a one-site configuration whose TLS certificate is p's leaf
// with its CA in the chain.
func ocspConfig(t *testing.T, p *ocsptest.PKI) *conf.Config {
	cfg := testConfig(t, newBackend(t).Listener.Addr().String())
	cfg.Sites = cfg.Sites[:1]
	leaf, err := smx509.ParseCertificate(p.Leaf.Raw)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := smx509.ParseCertificate(p.CA.Raw)
	if err != nil {
		t.Fatal(err)
	}
	m := &cfg.Sites[0].Material
	m.TLS = &conf.KeyPair{Chain: []*smx509.Certificate{leaf, ca}, Key: p.LeafKey}
	m.TLSOCSPIssuer = p.CA
	return cfg
}

// stapled returns the OCSP response a crypto/tls client gets from td.
func stapled(t *testing.T, td *testDaemon, p *ocsptest.PKI) []byte {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.CA)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: testwait.Bound(20 * time.Second)}, "tcp", td.addr,
		&tls.Config{ServerName: "localhost", RootCAs: roots, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().OCSPResponse
}

// TestOCSPStapleFile: the response of tls.ocsp_file is stapled, and its
// nextUpdate reported; a reload without it staples nothing and reports so.
func TestOCSPStapleFile(t *testing.T) {
	p := ocsptest.New(t)
	now := time.Now().Truncate(time.Second)
	der := p.Response(t, now.Add(-time.Minute), now.Add(time.Hour))
	cfg := ocspConfig(t, p)
	cfg.Sites[0].Material.TLSOCSP = &staple.Staple{DER: der, NextUpdate: now.Add(time.Hour)}
	obs := &ocspObserver{}
	td := startDaemon(t, cfg, func(e *Env) { e.OCSP = obs })
	if got := stapled(t, td, p); !bytes.Equal(got, der) {
		t.Fatalf("stapled %d bytes, want the file's %d", len(got), len(der))
	}
	if got := obs.get("main"); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("reported nextUpdate %v", got)
	}
	cfg2 := ocspConfig(t, p)
	td.setConfig(cfg2)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := stapled(t, td, p); got != nil {
		t.Fatalf("stapled %d bytes after a reload without ocsp_file", len(got))
	}
	if got := obs.get("main"); !got.IsZero() {
		t.Errorf("reported nextUpdate %v after the staple went", got)
	}
}

// TestOCSPStapleFetched: with tls.ocsp_fetch the response fetched from the
// certificate's responder is stapled, handshakes complete before it is
// (without one), a reload retries a failing responder at once, and a
// reload that keeps the certificate keeps the response without asking the
// responder again.
func TestOCSPStapleFetched(t *testing.T) {
	p := ocsptest.New(t)
	cfg := ocspConfig(t, p)
	cfg.Sites[0].Material.TLSOCSPURL = p.Leaf.OCSPServer[0]
	obs := &ocspObserver{}
	td := startDaemon(t, cfg, func(e *Env) { e.OCSP = obs })
	// The responder answers 500: handshakes go on without a staple.
	if got := stapled(t, td, p); got != nil {
		t.Fatalf("stapled %d bytes with no good response", len(got))
	}
	if got := obs.get("main"); !got.IsZero() {
		t.Errorf("reported nextUpdate %v with no response", got)
	}
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); p.Requests.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the responder was not asked")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The responder is fixed: a reload (which keeps the fetcher, waiting
	// a minute to retry) has it ask at once, and staple the response.
	now := time.Now().Truncate(time.Second)
	der := p.Response(t, now.Add(-time.Minute), now.Add(time.Hour))
	p.Serve(der)
	cfg3 := ocspConfig(t, p)
	cfg3.Sites[0].Material.TLSOCSPURL = p.Leaf.OCSPServer[0]
	td.setConfig(cfg3)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testwait.Bound(20 * time.Second))
	var got []byte
	for got == nil && time.Now().Before(deadline) {
		if got = stapled(t, td, p); got == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !bytes.Equal(got, der) {
		t.Fatalf("stapled %d bytes, want the responder's %d", len(got), len(der))
	}
	if got := obs.get("main"); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("reported nextUpdate %v", got)
	}
	// A reload keeping the certificate keeps the staple; the responder
	// is not asked for it.
	asked := p.Requests.Load()
	cfg4 := ocspConfig(t, p)
	cfg4.Sites[0].Material.TLSOCSPURL = p.Leaf.OCSPServer[0]
	td.setConfig(cfg4)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := stapled(t, td, p); !bytes.Equal(got, der) {
		t.Fatalf("stapled %d bytes after a reload, want the kept response", len(got))
	}
	if n := p.Requests.Load(); n != asked {
		t.Errorf("the reload asked the responder %d more times", n-asked)
	}
}

// TestOCSPStaleFetcherNotReported: a fetcher of a generation a reload
// replaced (its site now staples another certificate's response, or a
// file's), still running while that generation drains, does not report
// its responses over those of the generation in force.
func TestOCSPStaleFetcherNotReported(t *testing.T) {
	p := ocsptest.New(t)
	obs := &ocspObserver{}
	e := &Env{OCSP: obs, Logger: slog.New(slog.DiscardHandler)}
	defer e.Close()
	old := ocspConfig(t, p)
	old.Sites[0].Material.TLSOCSPURL = "http://127.0.0.1:1/" // never answers
	of := e.acquireOCSP(&old.Sites[0])
	e.reportOCSP(old, []*ocspFetcher{of})

	now := time.Now().Truncate(time.Second)
	cfg := ocspConfig(t, p)
	cfg.Sites[0].Material.TLSOCSP = &staple.Staple{DER: p.Response(t, now.Add(-time.Minute), now.Add(time.Hour)), NextUpdate: now.Add(time.Hour)}
	e.reportOCSP(cfg, nil)
	of.f.Report(now.Add(time.Minute)) // the old fetcher got a response
	of.f.Report(time.Time{})          // and later dropped it
	if got := obs.get("main"); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("reported nextUpdate %v, want the file's %v", got, now.Add(time.Hour))
	}
	e.releaseOCSP([]*ocspFetcher{of})
}
