package daemon

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/ocsp"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/staple"
	"github.com/gmproxy/gmproxy/internal/staple/ocsptest"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// ocspObserver records the reported nextUpdates and statuses by site.
type ocspObserver struct {
	mu     sync.Mutex
	next   map[string]time.Time
	status map[string]int
}

func (o *ocspObserver) SetOCSPStatus(site string, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.status == nil {
		o.status = map[string]int{}
	}
	o.status[site] = status
}

// getStatus is the status reported for site; -2 for none.
func (o *ocspObserver) getStatus(site string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st, ok := o.status[site]; ok {
		return st
	}
	return -2
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
	return ocspConfigFor(t, p, newBackend(t))
}

// ocspConfigFor is ocspConfig with the backend b.
func ocspConfigFor(t *testing.T, p *ocsptest.PKI, b *testBackend) *conf.Config {
	cfg := testConfig(t, b.Listener.Addr().String())
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
	of.f.Report(&staple.Staple{NextUpdate: now.Add(time.Minute), Status: ocsp.Revoked}) // the old fetcher got a response
	of.f.Report(nil)                                                                    // and later dropped it
	if got := obs.get("main"); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("reported nextUpdate %v, want the file's %v", got, now.Add(time.Hour))
	}
	if got := obs.getStatus("main"); got != ocsp.Good {
		t.Errorf("reported status %d, want the file's, good", got)
	}
	e.releaseOCSP([]*ocspFetcher{of})
}

// TestOCSPReportRacingInstall: a report of the fetcher in force that
// checked it was, then was held up while a reload's install changed the
// site (its response now a file's, or the site removed: the install, then
// the metrics' Retain, deletes its series), is made before the install,
// not over what the install set: the file's nextUpdate stays, and the
// removed site's series does not come back.
func TestOCSPReportRacingInstall(t *testing.T) {
	for _, removed := range []bool{false, true} {
		name := map[bool]string{false: "file", true: "removed"}[removed]
		t.Run(name, func(t *testing.T) {
			p := ocsptest.New(t)
			obs := &ocspObserver{}
			checked, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			e := &Env{OCSP: obs, Logger: slog.New(slog.DiscardHandler), ocspReportHook: func() {
				once.Do(func() {
					close(checked)
					<-release
				})
			}}
			defer e.Close()
			old := ocspConfig(t, p)
			old.Sites[0].Material.TLSOCSPURL = "http://127.0.0.1:1/" // never answers
			of := e.acquireOCSP(&old.Sites[0])
			e.reportOCSP(old, []*ocspFetcher{of})

			now := time.Now().Truncate(time.Second)
			reported := make(chan struct{})
			go func() {
				defer close(reported)
				of.f.Report(&staple.Staple{NextUpdate: now.Add(time.Minute), Status: ocsp.Good})
			}()
			<-checked // the report checked its fetcher is in force

			cfg := ocspConfig(t, p)
			if removed {
				cfg.Sites[0].Name = "renamed"
			}
			cfg.Sites[0].Material.TLSOCSP = &staple.Staple{DER: p.Response(t, now.Add(-time.Minute), now.Add(time.Hour)), NextUpdate: now.Add(time.Hour)}
			installed := make(chan struct{})
			go func() {
				defer close(installed)
				e.reportOCSP(cfg, nil)
				if removed { // the metrics' Retain, after the install
					obs.mu.Lock()
					delete(obs.next, "main")
					delete(obs.status, "main")
					obs.mu.Unlock()
				}
			}()
			select {
			case <-installed: // the defect: the install did not wait
			case <-time.After(300 * time.Millisecond):
			}
			close(release)
			<-reported
			<-installed
			if removed {
				obs.mu.Lock()
				_, next := obs.next["main"]
				_, status := obs.status["main"]
				obs.mu.Unlock()
				if next || status {
					t.Errorf("the removed site's series came back (nextUpdate %v, status %v)", next, status)
				}
			} else {
				if got := obs.get("main"); !got.Equal(now.Add(time.Hour)) {
					t.Errorf("reported nextUpdate %v, want the file's %v", got, now.Add(time.Hour))
				}
			}
			e.releaseOCSP([]*ocspFetcher{of})
		})
	}
}

// waitFor polls cond every 5 ms until it holds, for 20 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOCSPRevokedStapled: when the responder answers, with a verified
// current response, that the certificate is revoked, the handshakes
// staple that answer at once instead of the good response fetched before
// (stapled until its nextUpdate: clients were told "good" about a revoked
// certificate), the observer is told the status (the metric), and the
// revocation is logged at error level once.
func TestOCSPRevokedStapled(t *testing.T) {
	p := ocsptest.New(t)
	now := time.Now().Truncate(time.Second)
	// Refreshed from halfway: 1 to 2.5 s from now.
	good := p.Response(t, now.Add(-2*time.Second), now.Add(4*time.Second))
	p.Serve(good)
	cfg := ocspConfig(t, p)
	cfg.Sites[0].Material.TLSOCSPURL = p.Leaf.OCSPServer[0]
	obs := &ocspObserver{}
	var logs testpeer.SyncBuffer
	td := startDaemon(t, cfg, func(e *Env) {
		e.OCSP, e.ocspRetry = obs, 20*time.Millisecond
		e.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	waitFor(t, "the good response reported", func() bool { return obs.getStatus("main") == ocsp.Good })
	revoked := p.Sign(t, ocsp.Response{Status: ocsp.Revoked, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: now, NextUpdate: now.Add(time.Hour), RevokedAt: now.Add(-time.Minute)}, nil, nil)
	p.Serve(revoked)
	waitFor(t, "the revoked response stapled", func() bool { return bytes.Equal(stapled(t, td, p), revoked) })
	if got := obs.getStatus("main"); got != ocsp.Revoked {
		t.Errorf("reported status %d, want revoked (%d)", got, ocsp.Revoked)
	}
	if got := obs.get("main"); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("reported nextUpdate %v, want the revoked response's", got)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "REVOKED") {
		t.Errorf("%d errors logged, want 1 saying REVOKED:\n%s", n, logs.String())
	}
}

// TestOCSPFileExpiryReported: an ocsp_file response past its nextUpdate
// is no longer stapled, and the observer is told so then (the metric
// promises no series while none is stapled; it kept the past nextUpdate
// until the next reload).
func TestOCSPFileExpiryReported(t *testing.T) {
	p := ocsptest.New(t)
	now := time.Now()
	next := now.Add(time.Second)
	cfg := ocspConfig(t, p)
	cfg.Sites[0].Material.TLSOCSP = &staple.Staple{DER: p.Response(t, now.Add(-time.Minute), next), NextUpdate: next}
	obs := &ocspObserver{}
	td := startDaemon(t, cfg, func(e *Env) { e.OCSP = obs })
	if got := obs.get("main"); !got.Equal(next) {
		t.Fatalf("reported nextUpdate %v, want the file's %v", got, next)
	}
	waitFor(t, "the file's response reported expired", func() bool { return obs.get("main").IsZero() && obs.getStatus("main") == -1 })
	if got := stapled(t, td, p); got != nil {
		t.Errorf("stapled %d bytes past the file's nextUpdate", len(got))
	}

	// A reload that brings a newer file before the old one's nextUpdate:
	// the old one's end is not reported over it.
	now = time.Now()
	soon, later := now.Add(time.Second), now.Add(time.Hour)
	for _, next := range []time.Time{soon, later} {
		c := ocspConfig(t, p)
		c.Sites[0].Material.TLSOCSP = &staple.Staple{DER: p.Response(t, now.Add(-time.Minute), next), NextUpdate: next}
		td.setConfig(c)
		if err := td.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(soon) + 200*time.Millisecond)
	if got := obs.get("main"); !got.Equal(later) {
		t.Errorf("reported nextUpdate %v after the replaced file's nextUpdate, want the new file's %v", got, later)
	}
}

// TestReportStapleUnknown: a response of status unknown, held but not
// stapled, is reported with its status and no nextUpdate.
func TestReportStapleUnknown(t *testing.T) {
	obs := &ocspObserver{}
	next := time.Now().Add(time.Hour)
	reportStaple(obs, "main", &staple.Staple{NextUpdate: next, Status: ocsp.Unknown})
	if got, st := obs.get("main"), obs.getStatus("main"); !got.IsZero() || st != ocsp.Unknown {
		t.Errorf("reported nextUpdate %v, status %d; want none, unknown", got, st)
	}
	reportStaple(obs, "main", &staple.Staple{NextUpdate: next, Status: ocsp.Revoked})
	if got, st := obs.get("main"), obs.getStatus("main"); !got.Equal(next) || st != ocsp.Revoked {
		t.Errorf("reported nextUpdate %v, status %d; want %v, revoked", got, st, next)
	}
	reportStaple(obs, "main", nil)
	if got, st := obs.get("main"), obs.getStatus("main"); !got.IsZero() || st != -1 {
		t.Errorf("reported nextUpdate %v, status %d; want none, -1", got, st)
	}
}

// TestOCSPRetiredFetcherStops: once a reload replaced the generation
// whose site fetched OCSP responses (here: stapling turned off), its
// fetcher asks the responder nothing more and logs no more failures,
// although that generation still drains a request; a reload that turns
// stapling on again while it drains runs that fetcher again.
func TestOCSPRetiredFetcherStops(t *testing.T) {
	p := ocsptest.New(t) // the responder answers 500: retried every 20 ms
	b := newBackend(t)
	cfg := ocspConfigFor(t, p, b)
	cfg.Sites[0].Material.TLSOCSPURL = p.Leaf.OCSPServer[0]
	var logs testpeer.SyncBuffer
	td := startDaemon(t, cfg, func(e *Env) {
		e.ocspRetry = 20 * time.Millisecond
		e.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	waitFor(t, "the responder asked 3 times", func() bool { return p.Requests.Load() >= 3 })

	// A request the old generation drains.
	roots := x509.NewCertPool()
	roots.AddCert(p.CA)
	c := &http.Client{Timeout: testwait.Bound(20 * time.Second), Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}}}
	defer c.CloseIdleConnections()
	done := make(chan error, 1)
	go func() {
		res, err := c.Get("https://" + td.addr + "/slow")
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	select {
	case <-b.slowStarted:
	case <-time.After(testwait.Bound(20 * time.Second)):
		t.Fatal("the slow request did not reach the backend")
	}
	defer func() {
		close(b.release)
		if err := <-done; err != nil {
			t.Errorf("the drained request: %v", err)
		}
	}()

	off := ocspConfigFor(t, p, b)
	td.setConfig(off)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	asked, warned := p.Requests.Load(), strings.Count(logs.String(), "no new response")
	time.Sleep(500 * time.Millisecond) // 25 retries of a running fetcher
	// One fetch in flight at the reload may still reach the responder.
	if n := p.Requests.Load() - asked; n > 1 {
		t.Errorf("the retired generation's fetcher asked the responder %d more times", n)
	}
	if n := strings.Count(logs.String(), "no new response") - warned; n > 1 {
		t.Errorf("the retired generation's fetcher logged %d more failures", n)
	}

	on := ocspConfigFor(t, p, b)
	on.Sites[0].Material.TLSOCSPURL = p.Leaf.OCSPServer[0]
	td.setConfig(on)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	asked = p.Requests.Load()
	waitFor(t, "the responder asked again", func() bool { return p.Requests.Load() >= asked+3 })
}

// TestOCSPInstallRunsSharedFetcher: a fetcher that the installation of a
// generation stopped (it was only the one before's) runs again when a
// generation built meanwhile, which shares it, is installed.
func TestOCSPInstallRunsSharedFetcher(t *testing.T) {
	p := ocsptest.New(t) // answers 500: retried every 20 ms
	e := &Env{Logger: slog.New(slog.DiscardHandler), ocspRetry: 20 * time.Millisecond}
	defer e.Close()
	a := ocspConfig(t, p)
	a.Sites[0].Material.TLSOCSPURL = p.Leaf.OCSPServer[0]
	of := e.acquireOCSP(&a.Sites[0])
	e.reportOCSP(a, []*ocspFetcher{of})  // a installed
	shared := e.acquireOCSP(&a.Sites[0]) // b built, sharing it
	if shared != of {
		t.Fatal("b does not share a's fetcher")
	}
	e.reportOCSP(ocspConfig(t, p), nil) // c, without it, installed
	e.mu.Lock()
	stopped := of.cancel == nil
	e.mu.Unlock()
	if !stopped {
		t.Fatal("the fetcher of the generation c replaced runs on")
	}
	asked := p.Requests.Load()
	e.reportOCSP(a, []*ocspFetcher{shared}) // b installed
	waitFor(t, "the responder asked again", func() bool { return p.Requests.Load() >= asked+3 })
	e.releaseOCSP([]*ocspFetcher{of, shared})
}
