package daemon

import (
	"context"
	"crypto/x509"
	"slices"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/staple"
)

// OCSPObserver is told of the nextUpdate of each site's stapled OCSP
// response (a zero time: the site staples none), and of the certificate
// status of the response held (RFC 6960 §4.2.1 certStatus: ocsp.Good,
// ocsp.Revoked, stapled, or ocsp.Unknown, not; -1 for none held).
type OCSPObserver interface {
	SetOCSPNextUpdate(site string, nextUpdate time.Time)
	SetOCSPStatus(site string, status int)
}

// reportStaple tells obs what site holds: st, nil for nothing.
func reportStaple(obs OCSPObserver, site string, st *staple.Staple) {
	var next time.Time
	status := -1
	if st != nil {
		status = st.Status
		if st.Status != ocsp.Unknown { // not stapled
			next = st.NextUpdate
		}
	}
	obs.SetOCSPNextUpdate(site, next)
	obs.SetOCSPStatus(site, status)
}

// ocspFetcher is a background fetcher of OCSP responses shared by the
// generations that staple them for the same site, certificate and
// responder: a reload that keeps those keeps the last good response and
// asks the responder nothing more.
type ocspFetcher struct {
	f   *staple.Fetcher
	key string
	// cancel stops the fetcher's Run; nil while it does not run (its
	// generations are all retired, draining on its last response).
	cancel context.CancelFunc
	refs   int
}

// start runs the fetcher unless it runs (e.mu held).
func (of *ocspFetcher) start() {
	if of.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	of.cancel = cancel
	go of.f.Run(ctx)
}

// stop ends the fetcher's Run (e.mu held): Current still gives its last
// response, until that response's nextUpdate.
func (of *ocspFetcher) stop() {
	if of.cancel != nil {
		of.cancel()
		of.cancel = nil
	}
}

// ocspKey names the fetcher of site s: its name (the metric's label),
// certificate, issuer and responder.
func ocspKey(s *conf.Site) string {
	m := &s.Material
	return s.Name + "\x00" + string(m.TLS.Leaf().Raw) + "\x00" + string(m.TLSOCSPIssuer.Raw) + "\x00" + m.TLSOCSPURL
}

// acquireOCSP returns the fetcher for site s's TLS certificate, starting
// one when there is none (one that reportOCSP stopped runs again when a
// generation that uses it is installed). Each call is matched by a
// releaseOCSP.
func (e *Env) acquireOCSP(s *conf.Site) *ocspFetcher {
	m := &s.Material
	key := ocspKey(s)
	e.mu.Lock()
	defer e.mu.Unlock()
	if of := e.ocsp[key]; of != nil {
		of.refs++
		if of.f.Current() == nil {
			of.f.Retry() // the reload may follow a fix of the responder
		}
		return of
	}
	leaf, err := x509.ParseCertificate(m.TLS.Leaf().Raw)
	if err != nil {
		return nil // conf parsed it
	}
	name, log, obs := s.Name, e.Logger.With("site", s.Name), e.OCSP
	f := &staple.Fetcher{Leaf: leaf, Issuer: m.TLSOCSPIssuer, URL: m.TLSOCSPURL, Log: log, MinRetry: e.ocspRetry, MaxRetry: e.ocspRetry}
	of := &ocspFetcher{f: f, key: key, refs: 1}
	f.Report = func(st *staple.Staple) {
		if st == nil {
			log.Warn("OCSP stapling: no current response to staple", "responder", f.URL)
		}
		// Only the fetcher of the generation in force reports: one a
		// reload replaced (another certificate, a response file, no
		// stapling) runs on while its generation drains. The check and
		// the report are one step under ocspMu: an install between them
		// would be undone.
		e.ocspMu.Lock()
		defer e.ocspMu.Unlock()
		e.mu.Lock()
		current := e.ocspInForce[name] == of
		e.mu.Unlock()
		if obs != nil && current {
			if e.ocspReportHook != nil {
				e.ocspReportHook()
			}
			reportStaple(obs, name, st)
		}
	}
	if e.ocsp == nil {
		e.ocsp = map[string]*ocspFetcher{}
	}
	e.ocsp[key] = of
	of.start()
	return of
}

// releaseOCSP ends a generation's use of fetchers; the last use stops
// one (the handshakes still draining read its last response).
func (e *Env) releaseOCSP(fs []*ocspFetcher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, of := range fs {
		if of.refs--; of.refs == 0 {
			of.stop()
			delete(e.ocsp, of.key)
		}
	}
}

// siteStaple returns what the TLS handshakes of site s staple: the
// response of tls.ocsp_file, or the fetched one, while current. The
// fetcher is appended to b.ocsp for the generation to release.
func (b *siteBuild) siteStaple(s *conf.Site) func() []byte {
	m := &s.Material
	switch {
	case m.TLSOCSP != nil:
		st := m.TLSOCSP
		return func() []byte { return st.At(time.Now()) }
	case m.TLSOCSPURL != "" && m.TLSOCSPIssuer != nil:
		of := b.env.acquireOCSP(s)
		if of == nil {
			return func() []byte { return nil }
		}
		*b.ocsp = append(*b.ocsp, of)
		return of.f.Current
	}
	return func() []byte { return nil }
}

// reportOCSP tells env.OCSP what each site of cfg staples, when the
// generation is installed: a reload that changed or removed a site's
// response file leaves no stale nextUpdate, and one that shares a running
// fetcher shows its response. An ocsp_file response's end is reported at
// its nextUpdate, as a fetched one's is.
//
// The fetchers of the generation installed before, which this one does
// not use, stop: that generation serves no new connection, and the
// handshakes still draining on it read the last response; asking the
// responder for it, and warning of its failures, until its last
// connection ends (a long-lived tunnel: hours) would be for nothing.
//
// It holds ocspMu throughout: a fetcher's report is made before or after
// the install's, not within it.
func (e *Env) reportOCSP(cfg *conf.Config, fs []*ocspFetcher) {
	e.ocspMu.Lock()
	defer e.ocspMu.Unlock()
	byKey := map[string]*ocspFetcher{}
	for _, of := range fs {
		byKey[of.key] = of
	}
	inForce := map[string]*ocspFetcher{}
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		if m := &s.Material; m.TLSOCSP == nil && m.TLSOCSPURL != "" && m.TLSOCSPIssuer != nil && m.TLS != nil {
			if of := byKey[ocspKey(s)]; of != nil {
				inForce[s.Name] = of
			}
		}
	}
	e.mu.Lock()
	for _, of := range e.ocspInForce {
		if byKey[of.key] != of {
			of.stop()
		}
	}
	for _, of := range fs {
		// A fetcher stopped at the install of a generation after the
		// one that used it, used again (by a reload back while that
		// one drains, or by a pending build sharing it) runs again,
		// fetching at once.
		of.start()
	}
	e.ocspInForce = inForce
	e.stopOCSPExpiry()
	e.mu.Unlock()
	if e.OCSP == nil {
		return
	}
	now := time.Now()
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		var st *staple.Staple
		switch m := &s.Material; {
		case m.TLSOCSP != nil:
			if st = m.TLSOCSP; st.At(now) == nil {
				st = nil
			} else if !st.NextUpdate.IsZero() {
				e.expireOCSPFile(s.Name, st.NextUpdate.Sub(now))
			}
		case m.TLSOCSPURL != "" && m.TLSOCSPIssuer != nil && m.TLS != nil:
			if of := byKey[ocspKey(s)]; of != nil {
				if st = of.f.Stapled(); st != nil && st.Expired(now) {
					st = nil
				}
			}
		}
		reportStaple(e.OCSP, s.Name, st)
	}
}

// expireOCSPFile reports in d that site's ocsp_file response is no longer
// stapled, unless the generation was replaced by then.
func (e *Env) expireOCSPFile(site string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if slices.Contains(e.ocspExpiry, t) { // not stopped by a reload
			e.Logger.Warn("OCSP stapling: the response of ocsp_file is past its nextUpdate, stapling nothing: replace the file and reload", "site", site)
			reportStaple(e.OCSP, site, nil)
		}
	})
	e.ocspExpiry = append(e.ocspExpiry, t)
}

// stopOCSPExpiry stops the timers of expireOCSPFile (e.mu held).
func (e *Env) stopOCSPExpiry() {
	for _, t := range e.ocspExpiry {
		t.Stop()
	}
	e.ocspExpiry = nil
}
