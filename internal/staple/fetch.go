package staple

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ocsp"
)

// Defaults of a Fetcher's bounds.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMinRetry = time.Minute
	DefaultMaxRetry = time.Hour
)

// client is the HTTP client of Fetchers that name none: responders are
// asked seldom, so no connection is kept, and a few redirects are
// followed (some CAs move their responders behind one).
var client = &http.Client{
	Transport: &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DisableKeepAlives:      true,
		TLSHandshakeTimeout:    DefaultTimeout,
		ResponseHeaderTimeout:  DefaultTimeout,
		MaxResponseHeaderBytes: 16 << 10,
	},
	CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("more than 3 redirects")
		}
		return nil
	},
}

// A Fetcher keeps a verified OCSP response for one certificate, asked of
// the certificate's responder by Run in the background: a handshake only
// reads the last good response (Current), so a slow or dead responder
// delays none. A response is refreshed between halfway and three quarters
// of the way from its thisUpdate to its nextUpdate; a failed fetch keeps
// the last good response until its nextUpdate and is retried, backing off
// from MinRetry to MaxRetry. Both waits are spread at random (spread).
//
// A verified, current answer that the certificate is revoked is not a
// failed fetch: it replaces the good response kept, and is stapled. The
// CA has withdrawn what the good response said, so stapling that until
// its nextUpdate (days, at many CAs) would tell clients "good" about a
// certificate its CA revoked; stapling nothing would leave the clients
// that do not ask the responder themselves (most browsers soft-fail)
// going on as if nothing happened. The revoked response is the CA's own
// signed word, which a client that checks the staple refuses the
// handshake on, as the revocation means it to; Caddy's certmagic staples
// it likewise (and renews the certificate). An answer of status unknown
// (RFC 6960 §2.2: the responder does not know the certificate) also
// replaces the good response kept, for the same reason, but is not
// stapled: it says nothing of revocation, often comes from a responder
// out of step with its CA, and clients refuse the handshake on it
// (mozilla::pkix, OpenSSL's status checks) where a missing staple lets
// them check for themselves. Either is logged at error level when the
// status changes, not at every refresh, and reported (Report).
type Fetcher struct {
	Leaf, Issuer *x509.Certificate
	// URL is the responder's (the certificate's AIA OCSP URL).
	URL string
	// Client makes the requests; nil for a default one.
	Client *http.Client
	// Timeout bounds one fetch, redirects and body included; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MinRetry and MaxRetry bound the wait before a retry; 0 means the
	// defaults.
	MinRetry, MaxRetry time.Duration
	Log                *slog.Logger
	// Report, when set, is told of every change of the response kept:
	// the new one (its Status may be revoked or unknown), nil when none
	// is kept any more.
	Report func(s *Staple)
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	cur atomic.Pointer[Staple]
	// status is 1 + the certStatus of the last answer verified, 0
	// before one: a change is logged once.
	status   atomic.Int64
	kickOnce sync.Once
	kick     chan struct{}
}

func (f *Fetcher) kicks() chan struct{} {
	f.kickOnce.Do(func() { f.kick = make(chan struct{}, 1) })
	return f.kick
}

// Retry makes Run fetch now instead of waiting out its backoff (a reload
// that found the responder failing may come after it was fixed).
func (f *Fetcher) Retry() {
	select {
	case f.kicks() <- struct{}{}:
	default:
	}
}

func (f *Fetcher) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Current returns the response to staple now: nil when none was fetched,
// the last one is past its nextUpdate or of status unknown.
func (f *Fetcher) Current() []byte { return f.cur.Load().At(f.now()) }

// Stapled returns the response kept, nil for none.
func (f *Fetcher) Stapled() *Staple { return f.cur.Load() }

// set replaces the kept response and reports the change.
func (f *Fetcher) set(s *Staple) {
	f.cur.Store(s)
	if f.Report != nil {
		f.Report(s)
	}
}

// expire drops the kept response when it is past its nextUpdate.
func (f *Fetcher) expire() {
	if s := f.cur.Load(); s != nil && s.Expired(f.now()) {
		f.set(nil)
	}
}

// noteStatus logs a change of the certificate's status from the one the
// responder's last verified answer gave: at error level to revoked or
// unknown, once per change, not at each refresh that confirms it.
func (f *Fetcher) noteStatus(resp *ocsp.Response) {
	prev := f.status.Swap(1+int64(resp.Status)) - 1
	if prev == int64(resp.Status) || f.Log == nil {
		return
	}
	switch resp.Status {
	case ocsp.Revoked:
		f.Log.Error("OCSP stapling: the responder says the certificate is REVOKED; stapling that answer (clients that check it refuse the handshake): replace the certificate",
			"responder", f.URL, "revoked_at", resp.RevokedAt.UTC().Format(time.RFC3339), "reason", resp.RevocationReason, "serial", fmt.Sprintf("%x", f.Leaf.SerialNumber))
	case ocsp.Unknown:
		f.Log.Error("OCSP stapling: the responder does not know the certificate (status unknown); stapling nothing",
			"responder", f.URL, "serial", fmt.Sprintf("%x", f.Leaf.SerialNumber))
	default:
		if prev >= 0 {
			f.Log.Info("OCSP stapling: the responder says the certificate is good again; stapling that answer", "responder", f.URL)
		}
	}
}

// Refresh fetches and verifies a response once. On success it keeps the
// response, whatever the certificate's status it gives, and returns when
// to refresh it; on failure the last response stays.
func (f *Fetcher) Refresh(ctx context.Context) (next time.Time, err error) {
	f.expire()
	der, err := f.fetch(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := f.now()
	resp, err := verify(der, f.Leaf, f.Issuer, now, true)
	if err != nil {
		return time.Time{}, fmt.Errorf("OCSP response from %s refused: %w", f.URL, err)
	}
	// A responder behind a cache (a CDN) may serve a copy older than the
	// one kept: it would bring the staple's expiry nearer, so the newer
	// stays and the fetch is retried.
	if kept := f.cur.Load(); kept != nil && resp.ThisUpdate.Before(kept.ThisUpdate) {
		return time.Time{}, fmt.Errorf("OCSP response from %s (thisUpdate %s) is older than the one stapled (thisUpdate %s): kept that one",
			f.URL, resp.ThisUpdate.UTC().Format(time.RFC3339), kept.ThisUpdate.UTC().Format(time.RFC3339))
	}
	f.noteStatus(resp)
	f.set(&Staple{DER: der, ThisUpdate: resp.ThisUpdate, NextUpdate: resp.NextUpdate, Status: resp.Status})
	return refreshAt(resp, now, f.minRetry(), f.maxRetry()), nil
}

// refreshAt is when to refresh resp: from halfway through its validity,
// spread, but not sooner than min from now; max from now, spread, when
// it gives no nextUpdate.
func refreshAt(resp *ocsp.Response, now time.Time, min, max time.Duration) time.Time {
	if resp.NextUpdate.IsZero() {
		return now.Add(spread(max))
	}
	at := resp.ThisUpdate.Add(spread(resp.NextUpdate.Sub(resp.ThisUpdate) / 2))
	if at.Before(now.Add(min)) {
		at = now.Add(min)
	}
	return at
}

// spread returns a random wait from d to 1.5 d. Every fetcher of a
// certificate holds the same response (each worker of each edge of a
// fleet fetches its own), so a fixed point of its validity, or a fixed
// backoff from a responder outage they all saw, would send all their
// requests to the responder in the same second.
func spread(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d + rand.N(d/2)
}

// backoff returns the wait before retrying a fetch that failed after
// waiting retry before it, and the retry to pass next time.
func (f *Fetcher) backoff(retry time.Duration) (wait, next time.Duration) {
	return spread(retry), min(2*retry, f.maxRetry())
}

func (f *Fetcher) minRetry() time.Duration {
	if f.MinRetry > 0 {
		return f.MinRetry
	}
	return DefaultMinRetry
}

func (f *Fetcher) maxRetry() time.Duration {
	if f.MaxRetry > 0 {
		return max(f.MaxRetry, f.minRetry())
	}
	return max(DefaultMaxRetry, f.minRetry())
}

// fetch POSTs an OCSP request for the certificate (RFC 6960 Appendix A.1)
// and returns the body of a 200 response, at most MaxResponse bytes,
// within Timeout.
func (f *Fetcher) fetch(ctx context.Context) ([]byte, error) {
	req, err := ocsp.CreateRequest(f.Leaf, f.Issuer, nil)
	if err != nil {
		return nil, err
	}
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, bytes.NewReader(req))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/ocsp-request")
	hr.Header.Set("Accept", "application/ocsp-response")
	c := f.Client
	if c == nil {
		c = client
	}
	res, err := c.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("OCSP responder: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("OCSP responder %s answered %s", f.URL, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("OCSP responder %s: %w", f.URL, err)
	}
	if len(body) > MaxResponse {
		return nil, fmt.Errorf("OCSP responder %s sent more than %d bytes", f.URL, MaxResponse)
	}
	return body, nil
}

// Run refreshes the response until ctx is done: at once, then as Refresh
// says, retrying failures with backoff, and dropping the kept response at
// its nextUpdate when no refresh replaced it.
func (f *Fetcher) Run(ctx context.Context) {
	retry := f.minRetry()
	for {
		next, err := f.Refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		now := f.now()
		var wait time.Duration
		if err != nil {
			wait, retry = f.backoff(retry)
			if f.Log != nil {
				f.Log.Warn("OCSP stapling: no new response", "responder", f.URL, "err", err, "retry_in", wait)
			}
		} else {
			wait, retry = next.Sub(now), f.minRetry()
		}
		if s := f.cur.Load(); s != nil && !s.NextUpdate.IsZero() {
			wait = min(wait, s.NextUpdate.Sub(now))
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-f.kicks():
			t.Stop()
		}
	}
}
