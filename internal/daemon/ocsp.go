package daemon

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/staple"
)

// OCSPObserver is told of the nextUpdate of each site's stapled OCSP
// response (a zero time: the site staples none).
type OCSPObserver interface {
	SetOCSPNextUpdate(site string, nextUpdate time.Time)
}

// ocspFetcher is a background fetcher of OCSP responses shared by the
// generations that staple them for the same site, certificate and
// responder: a reload that keeps those keeps the last good response and
// asks the responder nothing more.
type ocspFetcher struct {
	f      *staple.Fetcher
	key    string
	cancel context.CancelFunc
	refs   int
}

// ocspKey names the fetcher of site s: its name (the metric's label),
// certificate, issuer and responder.
func ocspKey(s *conf.Site) string {
	m := &s.Material
	return s.Name + "\x00" + string(m.TLS.Leaf().Raw) + "\x00" + string(m.TLSOCSPIssuer.Raw) + "\x00" + m.TLSOCSPURL
}

// acquireOCSP returns the running fetcher for site s's TLS certificate,
// starting one when none runs. Each call is matched by a releaseOCSP.
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
	f := &staple.Fetcher{Leaf: leaf, Issuer: m.TLSOCSPIssuer, URL: m.TLSOCSPURL, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	of := &ocspFetcher{f: f, key: key, cancel: cancel, refs: 1}
	f.Report = func(next time.Time) {
		if next.IsZero() {
			log.Warn("OCSP stapling: no current response to staple", "responder", f.URL)
		}
		// Only the fetcher of the generation in force reports: one a
		// reload replaced (another certificate, a response file, no
		// stapling) runs on while its generation drains.
		e.mu.Lock()
		current := e.ocspInForce[name] == of
		e.mu.Unlock()
		if obs != nil && current {
			obs.SetOCSPNextUpdate(name, next)
		}
	}
	if e.ocsp == nil {
		e.ocsp = map[string]*ocspFetcher{}
	}
	e.ocsp[key] = of
	go f.Run(ctx)
	return of
}

// releaseOCSP ends a generation's use of fetchers; the last use stops
// one (the handshakes still draining read its last response).
func (e *Env) releaseOCSP(fs []*ocspFetcher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, of := range fs {
		if of.refs--; of.refs == 0 {
			of.cancel()
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
// fetcher shows its response.
func (e *Env) reportOCSP(cfg *conf.Config, fs []*ocspFetcher) {
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
	e.ocspInForce = inForce
	e.mu.Unlock()
	if e.OCSP == nil {
		return
	}
	fetched := map[string]*staple.Staple{}
	for _, of := range fs {
		if st := of.f.Stapled(); st != nil && of.f.Current() != nil {
			fetched[of.key] = st
		}
	}
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		var next time.Time
		switch m := &s.Material; {
		case m.TLSOCSP != nil:
			next = m.TLSOCSP.NextUpdate
		case m.TLSOCSPURL != "" && m.TLSOCSPIssuer != nil && m.TLS != nil:
			if st := fetched[ocspKey(s)]; st != nil {
				next = st.NextUpdate
			}
		}
		e.OCSP.SetOCSPNextUpdate(s.Name, next)
	}
}
