package staple

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/gmproxy/gmproxy/internal/staple/ocsptest"
)

// TestVerify: a response is stapled only when the certificate's issuer
// signed it, itself or through a responder certificate it issued for OCSP
// signing, about the certificate's serial, with status good, and current.
func TestVerify(t *testing.T) {
	p := ocsptest.New(t)
	now := time.Now()
	this, next := now.Add(-time.Minute), now.Add(time.Hour)
	good := ocsp.Response{Status: ocsp.Good, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: this, NextUpdate: next}
	with := func(f func(*ocsp.Response)) ocsp.Response { r := good; f(&r); return r }
	delegate, dkey := p.Delegate(t, true, now.Add(-time.Hour), now.Add(time.Hour))
	notDelegated, nkey := p.Delegate(t, false, now.Add(-time.Hour), now.Add(time.Hour))
	expiredDelegate, ekey := p.Delegate(t, true, now.Add(-2*time.Hour), now.Add(-time.Hour))
	otherCA, otherKey := ocsptest.NewCA(t, "Other CA")
	sameName, _ := ocsptest.NewCA(t, p.CA.Subject.CommonName) // another key
	sameKey := selfSigned(t, "Renamed CA", p.CAKey)
	otherDelegate, odkey := ocsptest.Issue(t, otherCA, otherKey, &x509.Certificate{
		SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "OCSP Responder"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageOCSPSigning},
	})
	for _, c := range []struct {
		name string
		der  []byte
		want string // "" for stapled, else part of the error
	}{
		{"signed by the issuer", p.Sign(t, good, nil, nil), ""},
		{"signed by the issuer, embedded", p.Sign(t, good, p.CA, p.CAKey), ""},
		{"delegated responder", p.Sign(t, good, delegate, dkey), ""},
		{"no nextUpdate", p.Sign(t, with(func(r *ocsp.Response) { r.NextUpdate = time.Time{} }), nil, nil), ""},
		{"signed by another CA", p.Sign(t, good, otherCA, otherKey), "not issued by the certificate's issuer"},
		{"signed by another CA's key without its certificate", signWithKey(t, p, good, otherKey), "not signed by the certificate's issuer"},
		{"responder of another CA", p.Sign(t, good, otherDelegate, odkey), "not issued by the certificate's issuer"},
		{"responder not delegated OCSP", p.Sign(t, good, notDelegated, nkey), "lacks extendedKeyUsage OCSPSigning"},
		{"responder certificate expired", p.Sign(t, good, expiredDelegate, ekey), "valid only from"},
		{"about the same serial of another issuer", aboutIssuer(t, p, good, otherCA), "about a certificate of another issuer"},
		{"about the same serial of an issuer of the same name", aboutIssuer(t, p, good, sameName), "about a certificate of another issuer"},
		{"about the same serial of an issuer of the same key", aboutIssuer(t, p, good, sameKey), "about a certificate of another issuer"},
		{"another serial", p.Sign(t, with(func(r *ocsp.Response) { r.SerialNumber = big.NewInt(42) }), nil, nil), "no response matching"},
		{"revoked", p.Sign(t, with(func(r *ocsp.Response) { r.Status, r.RevokedAt = ocsp.Revoked, this }), nil, nil), "revoked"},
		{"unknown", p.Sign(t, with(func(r *ocsp.Response) { r.Status = ocsp.Unknown }), nil, nil), "status unknown"},
		{"expired", p.Sign(t, with(func(r *ocsp.Response) { r.ThisUpdate, r.NextUpdate = now.Add(-2*time.Hour), now.Add(-time.Second) }), nil, nil), "expired"},
		{"not yet valid", p.Sign(t, with(func(r *ocsp.Response) { r.ThisUpdate, r.NextUpdate = now.Add(time.Hour), now.Add(2*time.Hour) }), nil, nil), "not valid before"},
		{"nextUpdate before thisUpdate", p.Sign(t, with(func(r *ocsp.Response) { r.ThisUpdate, r.NextUpdate = now.Add(2*time.Minute), now.Add(time.Minute) }), nil, nil), "before its thisUpdate"},
		{"responderID by key, signed by the issuer", byKeyID(t, p.Sign(t, good, nil, nil), p.CA, p.CAKey), ""},
		{"responderID by key, delegated responder", byKeyID(t, p.Sign(t, good, delegate, dkey), delegate, dkey), ""},
		{"responderID naming a delegate, signed by the issuer", namedBy(t, p, delegate, good, p.CAKey), "responderID names another responder than its signer"},
		{"responderID naming the issuer, signed by a delegate", namedBy(t, p, p.CA, with(func(r *ocsp.Response) { r.Certificate = delegate }), dkey), "responderID names another responder than its signer"},
		{"responderID by another key, signed by the issuer", byKeyID(t, p.Sign(t, good, nil, nil), delegate, p.CAKey), "names another responder key"},
		{"responderID by the issuer's key, signed by a delegate", byKeyID(t, p.Sign(t, good, delegate, dkey), p.CA, dkey), "names another responder key"},
		{"garbage", []byte("not DER"), "not an OCSP response"},
		{"too large", make([]byte, MaxResponse+1), "over"},
		{"try later", ocsp.TryLaterErrorResponse, "not an OCSP response"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := Verify(c.der, p.Leaf, p.CA, now)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && resp.Status != ocsp.Good:
				t.Fatalf("status %d", resp.Status)
			case c.want != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q, want %q in it", err, c.want)
			}
		})
	}
}

// TestVerifySerialOfSingleResponse: a single response about another
// certificate of the same issuer is refused even when found without the
// certificate (the serial check does not rest on the parser's choice).
func TestVerifySerialOfSingleResponse(t *testing.T) {
	p := ocsptest.New(t)
	now := time.Now()
	other := *p.Leaf
	other.SerialNumber = big.NewInt(43)
	der := p.Sign(t, ocsp.Response{Status: ocsp.Good, SerialNumber: other.SerialNumber, ThisUpdate: now, NextUpdate: now.Add(time.Hour)}, nil, nil)
	if _, err := Verify(der, &other, p.CA, now); err != nil {
		t.Fatalf("the response of serial 43 for serial 43: %v", err)
	}
	if _, err := Verify(der, p.Leaf, p.CA, now); err == nil {
		t.Fatal("the response of serial 43 stapled for the leaf")
	}
	// The CertID check on its own, whatever single response a parser
	// chose: serial 43 is no answer about the leaf.
	resp, err := ocsp.ParseResponse(der, p.CA)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCertID(der, resp, p.Leaf, p.CA); err == nil {
		t.Error("checkCertID took the response of serial 43 for the leaf")
	}
	if err := checkCertID(der, resp, &other, p.CA); err != nil {
		t.Errorf("checkCertID refused the response of serial 43 for serial 43: %v", err)
	}
}

// signWithKey signs a response with key and the CA's name as responder,
// carrying no certificate: a forgery the issuer's signature check catches.
func signWithKey(t *testing.T, p *ocsptest.PKI, tmpl ocsp.Response, key crypto.Signer) []byte {
	t.Helper()
	der, err := ocsp.CreateResponse(p.CA, p.CA, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// aboutIssuer makes a response signed by the CA about the certificate
// of tmpl's serial number issued by issuer (its CertID names issuer's
// name and key): what a responder the CA runs for several issuers may
// answer, which is no answer about the leaf.
func aboutIssuer(t *testing.T, p *ocsptest.PKI, tmpl ocsp.Response, issuer *x509.Certificate) []byte {
	t.Helper()
	der, err := ocsp.CreateResponse(issuer, p.CA, tmpl, p.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// namedBy makes a response of tmpl signed with key (carrying
// tmpl.Certificate) whose responderID names responder by name.
func namedBy(t *testing.T, p *ocsptest.PKI, responder *x509.Certificate, tmpl ocsp.Response, key crypto.Signer) []byte {
	t.Helper()
	der, err := ocsp.CreateResponse(p.CA, responder, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// byKeyID rewrites the response der (of ocsp.CreateResponse, signed with
// ECDSA-SHA256) with a responderID naming the key of named by its SHA-1
// hash (RFC 6960 §4.2.1 byKey, which x/crypto/ocsp does not write), signed
// again with key.
func byKeyID(t *testing.T, der []byte, named *x509.Certificate, key crypto.Signer) []byte {
	t.Helper()
	var outer struct {
		Status asn1.Enumerated
		Bytes  struct {
			Type     asn1.ObjectIdentifier
			Response []byte
		} `asn1:"explicit,tag:0"`
	}
	var basic struct {
		TBS   asn1.RawValue
		Alg   pkix.AlgorithmIdentifier
		Sig   asn1.BitString
		Certs asn1.RawValue `asn1:"optional"`
	}
	var tbs struct{ ResponderID, ProducedAt, Responses asn1.RawValue }
	var spki struct {
		Alg pkix.AlgorithmIdentifier
		Key asn1.BitString
	}
	must := func(_ []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(asn1.Unmarshal(der, &outer))
	must(asn1.Unmarshal(outer.Bytes.Response, &basic))
	must(asn1.Unmarshal(basic.TBS.FullBytes, &tbs))
	must(asn1.Unmarshal(named.RawSubjectPublicKeyInfo, &spki))
	h := sha1.Sum(spki.Key.RightAlign())
	hash, err := asn1.Marshal(h[:])
	if err != nil {
		t.Fatal(err)
	}
	tbs.ResponderID = asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 2, IsCompound: true, Bytes: hash}
	raw, err := asn1.Marshal(tbs)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(raw)
	sig, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	basic.TBS = asn1.RawValue{FullBytes: raw}
	basic.Sig = asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)}
	if outer.Bytes.Response, err = asn1.Marshal(basic); err != nil {
		t.Fatal(err)
	}
	out, err := asn1.Marshal(outer)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// selfSigned makes a CA certificate named name for key.
func selfSigned(t *testing.T, name string, key crypto.Signer) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	return ocsptest.Sign(t, tmpl, tmpl, key, key)
}

// clock is a test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// TestFetcher: the fetcher asks the certificate's responder, staples a
// verified response, replaces it at a refresh, keeps it while the
// responder is down or answers a bad response, and drops it at its
// nextUpdate.
func TestFetcher(t *testing.T) {
	p := ocsptest.New(t)
	start := time.Now().Truncate(time.Second) // OCSP times have seconds
	clk := &clock{t: start}
	var reports []time.Time
	f := &Fetcher{Leaf: p.Leaf, Issuer: p.CA, URL: p.Leaf.OCSPServer[0], Now: clk.Now,
		Report: func(s *Staple) {
			var next time.Time
			if s != nil {
				next = s.NextUpdate
			}
			reports = append(reports, next)
		}}
	ctx := context.Background()

	if _, err := f.Refresh(ctx); err == nil || f.Current() != nil {
		t.Fatalf("responder answering 500: err %v, staple %d bytes", err, len(f.Current()))
	}
	first := p.Response(t, start.Add(-time.Minute), start.Add(2*time.Hour-time.Minute))
	p.Serve(first)
	next, err := f.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Current(), first) {
		t.Fatal("the fetched response is not stapled")
	}
	if half := start.Add(time.Hour - time.Minute); next.Before(half) || !next.Before(half.Add(30*time.Minute)) {
		t.Errorf("refresh at %v, want from halfway, %v, to three quarters of the way", next, half)
	}
	if len(reports) != 1 || !reports[0].Equal(start.Add(2*time.Hour-time.Minute)) {
		t.Errorf("reports %v", reports)
	}

	// Refresh: a newer response replaces it.
	clk.Set(next)
	second := p.Response(t, next, next.Add(2*time.Hour))
	p.Serve(second)
	if _, err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Current(), second) {
		t.Fatal("the refreshed response is not stapled")
	}

	// A bad signature, a revoked status signed by another key, a dead
	// responder, a copy older than the one kept (a cache in front of the
	// responder): the last good response stays.
	_, otherKey := ocsptest.NewCA(t, "Other CA")
	for name, der := range map[string][]byte{
		"bad signature":          signWithKey(t, p, ocsp.Response{Status: ocsp.Good, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: next, NextUpdate: next.Add(3 * time.Hour)}, otherKey),
		"revoked, bad signature": signWithKey(t, p, ocsp.Response{Status: ocsp.Revoked, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: next, NextUpdate: next.Add(3 * time.Hour), RevokedAt: next}, otherKey),
		"down":                   nil,
		"older (a cached copy)":  first,
	} {
		p.Serve(der)
		if _, err := f.Refresh(ctx); err == nil {
			t.Errorf("%s: no error", name)
		}
		if !bytes.Equal(f.Current(), second) {
			t.Errorf("%s: the last good response is not stapled", name)
		}
	}
	p.Responder.Close()
	if _, err := f.Refresh(ctx); err == nil || !bytes.Equal(f.Current(), second) {
		t.Errorf("responder gone: err %v, last good response stapled: %v", err, bytes.Equal(f.Current(), second))
	}

	// Past its nextUpdate, it is no longer stapled, and the drop is
	// reported.
	clk.Set(next.Add(2 * time.Hour))
	if f.Current() != nil {
		t.Fatal("a response past its nextUpdate is stapled")
	}
	f.Refresh(ctx)
	if f.Stapled() != nil || !reports[len(reports)-1].IsZero() {
		t.Errorf("expired response kept: %v, reports %v", f.Stapled() != nil, reports)
	}
}

// TestRefreshSpread: the fetchers of one certificate, which hold the
// same response (every worker of every edge of a fleet), refresh it and
// retry failures at different times, not all in the same second: from
// halfway to three quarters of its validity, and from the backoff to 1.5
// times it.
func TestRefreshSpread(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	resp := &ocsp.Response{ThisUpdate: now, NextUpdate: now.Add(4 * time.Hour)}
	noNext := &ocsp.Response{ThisUpdate: now}
	f := &Fetcher{}
	at, retries, unbounded := map[time.Time]bool{}, map[time.Duration]bool{}, map[time.Time]bool{}
	for range 16 {
		a := refreshAt(resp, now, time.Minute, time.Hour)
		if a.Before(now.Add(2*time.Hour)) || !a.Before(now.Add(3*time.Hour)) {
			t.Fatalf("refresh at %v, want from %v to %v", a, now.Add(2*time.Hour), now.Add(3*time.Hour))
		}
		at[a] = true
		u := refreshAt(noNext, now, time.Minute, time.Hour)
		if u.Before(now.Add(time.Hour)) || !u.Before(now.Add(90*time.Minute)) {
			t.Fatalf("refresh without nextUpdate at %v, want from an hour to 90 minutes from now", u)
		}
		unbounded[u] = true
		wait, next := f.backoff(time.Minute)
		if wait < time.Minute || wait >= 90*time.Second || next != 2*time.Minute {
			t.Fatalf("backoff from 1m: wait %v, next %v; want 1m to 1m30s, then 2m", wait, next)
		}
		retries[wait] = true
	}
	if len(at) < 2 || len(retries) < 2 || len(unbounded) < 2 {
		t.Errorf("16 fetchers: %d refresh times, %d refresh times without nextUpdate, %d retry waits: all in step", len(at), len(unbounded), len(retries))
	}
}

// TestFetchBounded: a responder that answers more than MaxResponse bytes,
// or not 200, gives an error, not a staple.
func TestFetchBounded(t *testing.T) {
	p := ocsptest.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.NotFound(w, r)
		case "/endless":
			// Until the client goes: read without bound, the body
			// would take the whole fetch's time, which a fast
			// machine filled with 1 GiB and then refused it as too
			// large all the same.
			chunk := make([]byte, 64<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		default:
			w.Write(make([]byte, MaxResponse+10))
		}
	}))
	defer srv.Close()
	for _, c := range []struct{ path, want string }{
		{"/", "more than"}, {"/endless", "more than"}, {"/404", "answered 404"},
	} {
		// Bounded in time too: the endless body must be refused for its
		// size, long before the fetch's timeout.
		f := &Fetcher{Leaf: p.Leaf, Issuer: p.CA, URL: srv.URL + c.path, Timeout: 3 * time.Second}
		if _, err := f.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) || f.Current() != nil {
			t.Errorf("%s: err %v, want %q", c.path, err, c.want)
		}
	}
}

// TestRunStaplesAndStops: Run fetches at once in the background and ends
// with its context.
func TestRunStaplesAndStops(t *testing.T) {
	p := ocsptest.New(t)
	now := time.Now()
	der := p.Response(t, now.Add(-time.Minute), now.Add(time.Hour))
	p.Serve(der)
	got := make(chan *Staple, 4)
	f := &Fetcher{Leaf: p.Leaf, Issuer: p.CA, URL: p.Leaf.OCSPServer[0], Report: func(s *Staple) { got <- s }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no response fetched")
	}
	if !bytes.Equal(f.Current(), der) {
		t.Fatal("not stapled")
	}
	cancel()
	<-done
}

// TestFetcherRevoked: a verified, current answer that the certificate is
// revoked replaces the good response kept and is stapled (the good one
// was stapled until its nextUpdate: clients were told "good" about a
// certificate its CA had revoked); one of status unknown replaces it too
// and staples nothing. Each is reported, and logged at error level once
// per change, not at every refresh that repeats it.
func TestFetcherRevoked(t *testing.T) {
	p := ocsptest.New(t)
	start := time.Now().Truncate(time.Second)
	clk := &clock{t: start}
	var reports []*Staple
	var logs bytes.Buffer
	f := &Fetcher{Leaf: p.Leaf, Issuer: p.CA, URL: p.Leaf.OCSPServer[0], Now: clk.Now,
		Log:    slog.New(slog.NewTextHandler(&logs, nil)),
		Report: func(s *Staple) { reports = append(reports, s) }}
	ctx := context.Background()
	refresh := func(what string, der []byte) {
		t.Helper()
		p.Serve(der)
		if _, err := f.Refresh(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	errorsLogged := func() int { return strings.Count(logs.String(), "level=ERROR") }
	resp := func(status int, this time.Time) []byte {
		return p.Sign(t, ocsp.Response{Status: status, SerialNumber: p.Leaf.SerialNumber, ThisUpdate: this, NextUpdate: this.Add(4 * time.Hour), RevokedAt: start}, nil, nil)
	}

	refresh("good", p.Response(t, start.Add(-time.Minute), start.Add(4*time.Hour)))
	if errorsLogged() != 0 {
		t.Fatalf("a good response logged an error: %s", logs.String())
	}
	for i := range 2 {
		clk.Add(time.Minute)
		revoked := resp(ocsp.Revoked, clk.Now())
		refresh("revoked", revoked)
		if !bytes.Equal(f.Current(), revoked) {
			t.Fatalf("refresh %d after the revocation: the revoked response is not stapled (%d bytes)", i, len(f.Current()))
		}
		if r := reports[len(reports)-1]; r == nil || r.Status != ocsp.Revoked || !r.NextUpdate.Equal(clk.Now().Add(4*time.Hour)) {
			t.Fatalf("refresh %d after the revocation: reported %+v", i, r)
		}
		if n := errorsLogged(); n != 1 || !strings.Contains(logs.String(), "REVOKED") {
			t.Fatalf("refresh %d after the revocation: %d errors logged, want 1 saying REVOKED: %s", i, n, logs.String())
		}
	}

	clk.Add(time.Minute)
	refresh("unknown", resp(ocsp.Unknown, clk.Now()))
	if f.Current() != nil {
		t.Fatal("a response of status unknown, or the one before, is stapled")
	}
	if r := reports[len(reports)-1]; r == nil || r.Status != ocsp.Unknown {
		t.Fatalf("status unknown: reported %+v", r)
	}
	if n := errorsLogged(); n != 2 || !strings.Contains(logs.String(), "status unknown") {
		t.Fatalf("status unknown: %d errors logged, want 2: %s", n, logs.String())
	}
	// The unknown answer is kept until its nextUpdate: the refresh
	// before it does not drop it.
	clk.Add(time.Minute)
	p.Serve(nil)
	f.Refresh(ctx)
	if st := f.Stapled(); st == nil || st.Status != ocsp.Unknown {
		t.Fatalf("status unknown kept before its nextUpdate: %+v", st)
	}

	clk.Add(time.Minute)
	good := resp(ocsp.Good, clk.Now())
	refresh("good again", good)
	if !bytes.Equal(f.Current(), good) || errorsLogged() != 2 || !strings.Contains(logs.String(), "good again") {
		t.Fatalf("good again: stapled %v, log %s", bytes.Equal(f.Current(), good), logs.String())
	}
}
