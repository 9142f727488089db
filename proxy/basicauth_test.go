package proxy

import (
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestBasicAuth: a basic_auth route answers 401 with its challenge to a
// request without a user and password of its users, and serves one with;
// a password that passed is not checked again (no bcrypt), but another
// password of that user is; a client address over its failures gets 429
// with Retry-After, even with the right password, while another address
// is served.
func TestBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{TrustedProxies: []string{"127.0.0.1", "::1"}, Sites: oneSite(
		RouteConfig{PathPrefix: "/ops/", Respond: &RespondConfig{Status: 200, Body: "in"},
			BasicAuth: &BasicAuthConfig{Realm: "ops", Users: map[string][]byte{"ops": hash}, FailuresPerMinute: 3}},
		RouteConfig{PathPrefix: "/", Respond: &RespondConfig{Status: 200, Body: "open"}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	do := func(client, user, pass string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.url+"/ops/x", nil)
		req.Host = "example.test"
		req.Header.Set("X-Forwarded-For", client)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	res, _ := do("192.0.2.1", "", "")
	if res.StatusCode != 401 || res.Header.Get("Www-Authenticate") != `Basic realm="ops", charset="UTF-8"` {
		t.Fatalf("no credentials: %d, WWW-Authenticate %q", res.StatusCode, res.Header.Get("Www-Authenticate"))
	}
	before := bcryptChecks.Load()
	for i := range 3 {
		if res, body := do("192.0.2.1", "ops", "open sesame"); res.StatusCode != 200 || body != "in" {
			t.Fatalf("right password, request %d: %d %q", i, res.StatusCode, body)
		}
	}
	if n := bcryptChecks.Load() - before; n != 1 {
		t.Errorf("%d bcrypt checks for 3 requests with one password, want 1 (then remembered)", n)
	}
	// Two failures: another password of the user, an unknown user.
	for _, up := range [][2]string{{"ops", "open sesame!"}, {"root", "open sesame"}} {
		if res, _ := do("192.0.2.1", up[0], up[1]); res.StatusCode != 401 || res.Header.Get("Www-Authenticate") == "" {
			t.Errorf("%s:%s: %d, want 401 with the challenge", up[0], up[1], res.StatusCode)
		}
	}
	if res, _ := do("192.0.2.1", "ops", "open sesame"); res.StatusCode != 200 {
		t.Errorf("right password after 2 failures: %d", res.StatusCode)
	}
	if res, _ := do("192.0.2.1", "ops", "wrong"); res.StatusCode != 401 {
		t.Errorf("third failure: %d, want 401", res.StatusCode)
	}
	res, _ = do("192.0.2.1", "ops", "open sesame")
	if res.StatusCode != 429 || res.Header.Get("Retry-After") == "" {
		t.Errorf("over its failures: %d, Retry-After %q; want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if res, body := do("198.51.100.7", "ops", "open sesame"); res.StatusCode != 200 || body != "in" {
		t.Errorf("another address: %d %q", res.StatusCode, body)
	}
	if res, _ := do("192.0.2.1", "", ""); res.StatusCode != 429 {
		t.Errorf("over its failures, no credentials: %d, want 429", res.StatusCode)
	}
}

// TestBasicAuthRefused: users Basic authentication cannot carry, hashes
// that are not bcrypt's and realms that would break the challenge are
// refused when the proxy is built.
func TestBasicAuthRefused(t *testing.T) {
	good, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	for _, c := range []BasicAuthConfig{
		{Users: map[string][]byte{"a:b": good}},
		{Users: map[string][]byte{"": good}},
		{Users: map[string][]byte{"ops": []byte("$apr1$abcdefgh$0123456789abcdefghijkl")}},
		{Users: map[string][]byte{"ops": []byte("{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=")}},
		{Users: map[string][]byte{"ops": []byte("$2y$")}},
		{Users: map[string][]byte{"ops": append([]byte("$2x"), good[3:]...)}},                                              // crypt_blowfish's buggy-hash marker
		{Users: map[string][]byte{"ops": append([]byte("$2y$15"), good[6:]...)}},                                           // each check seconds of a core
		{Users: map[string][]byte{"ops": good[:len(good)-1]}},                                                              // cut short: matches no password
		{Users: map[string][]byte{"ops": append(append([]byte(nil), good[:10]...), append([]byte("!"), good[11:]...)...)}}, // not bcrypt's base64
		{Users: map[string][]byte{}},
		{Realm: `a"b`, Users: map[string][]byte{"ops": good}},
		{Realm: "a\nb", Users: map[string][]byte{"ops": good}},
	} {
		rc := RouteConfig{Respond: &RespondConfig{Status: 200}, BasicAuth: &c}
		if _, err := New(Config{Sites: oneSite(rc)}, NopObserver{}, testLogger(t)); err == nil {
			t.Errorf("basic_auth %+v accepted", c)
		}
	}
}

// TestBasicAuthConcurrentFailures: wrong passwords a client sends at once
// cost no more bcrypt checks than its failures allow: each check is taken
// from its allowance before it waits for a slot, and the requests beyond
// it are answered 429 without waiting.
func TestBasicAuthConcurrentFailures(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	const allowed, sent = 3, 10
	cfg := Config{TrustedProxies: []string{"127.0.0.1", "::1"}, Sites: oneSite(
		RouteConfig{PathPrefix: "/", Respond: &RespondConfig{Status: 200, Body: "in"},
			BasicAuth: &BasicAuthConfig{Users: map[string][]byte{"ops": hash}, FailuresPerMinute: allowed}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)

	// Both slots held: no check runs until every request has either
	// started waiting for one or been answered.
	for range cap(bcryptSlots) {
		bcryptSlots <- struct{}{}
	}
	held := true
	release := func() {
		if held {
			for range cap(bcryptSlots) {
				<-bcryptSlots
			}
			held = false
		}
	}
	defer release()
	events := make(chan int, 2*sent) // 0: a check waits; else a status
	testHookBcryptWait = func() { events <- 0 }
	defer func() { testHookBcryptWait = nil }()
	for range sent {
		go func() {
			req, _ := http.NewRequest("GET", f.url+"/x", nil)
			req.Host = "example.test"
			req.Header.Set("X-Forwarded-For", "192.0.2.9")
			req.SetBasicAuth("ops", "guess")
			res, err := c.Do(req)
			if err != nil {
				events <- -1
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			events <- res.StatusCode
		}()
	}
	before := bcryptChecks.Load()
	waiting, statuses := 0, map[int]int{}
	for got := 0; got < sent; got++ {
		if e := <-events; e == 0 {
			waiting++
		} else {
			statuses[e]++
		}
	}
	release()
	for range waiting {
		statuses[<-events]++
	}
	if n := bcryptChecks.Load() - before; n > allowed {
		t.Errorf("%d bcrypt checks for %d wrong passwords sent at once, want at most %d (failures_per_minute)", n, sent, allowed)
	}
	if statuses[401] != allowed || statuses[429] != sent-allowed {
		t.Errorf("statuses %v, want %d 401 and %d 429", statuses, allowed, sent-allowed)
	}
}

// TestBasicAuthUnknownUserChecked: a name that is no user's costs the
// bcrypt check a user's wrong password does, and is refused even with a
// user's password: answered at once, its 401 would tell the users'
// names from others by its time.
func TestBasicAuthUnknownUserChecked(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Sites: oneSite(RouteConfig{PathPrefix: "/", Respond: &RespondConfig{Status: 200, Body: "in"},
		BasicAuth: &BasicAuthConfig{Users: map[string][]byte{"ops": hash}}})}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, up := range [][2]string{{"ops", "wrong"}, {"root", "wrong"}, {"root", "open sesame"}} {
		before := bcryptChecks.Load()
		req, _ := http.NewRequest("GET", f.url+"/", nil)
		req.Host = "example.test"
		req.SetBasicAuth(up[0], up[1])
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Errorf("%s:%s: %d, want 401", up[0], up[1], res.StatusCode)
		}
		if n := bcryptChecks.Load() - before; n != 1 {
			t.Errorf("%s:%s: %d bcrypt checks, want 1 as for any wrong password", up[0], up[1], n)
		}
	}
}

// TestBasicAuthOneAuthorization: a request with more than one
// Authorization field (RFC 9110 §11.6.2: one set of credentials) is
// refused 400 on a basic_auth route and not forwarded: the proxy checks
// the first, and a target that reads the last (or the joined list) would
// take the request for another user's. With one, it is forwarded.
func TestBasicAuthOneAuthorization(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRawRecorder(t)
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", rec.addr)}, Sites: oneSite(RouteConfig{Upstream: "u",
		BasicAuth: &BasicAuthConfig{Users: map[string][]byte{"ops": hash}}})}
	f := newFront(t, cfg, frontOpts{})
	ops := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("ops:open sesame")) + "\r\n"
	admin := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("admin:x")) + "\r\n"
	wantForwarded(t, f.addr, rec, "GET /a HTTP/1.1\r\nHost: example.test\r\n"+ops+"Connection: close\r\n\r\n", "GET /a ")
	wantNotForwarded(t, f.addr, rec, "GET /a HTTP/1.1\r\nHost: example.test\r\n"+ops+admin+"Connection: close\r\n\r\n", "400")
	wantNotForwarded(t, f.addr, rec, "GET /a HTTP/1.1\r\nHost: example.test\r\n"+ops+"Authorization: \r\nConnection: close\r\n\r\n", "400")
}

// TestBasicAuthKeptAcrossReload: a reload keeps a route's basic_auth
// state: a client over its failures stays over (its allowance does not
// come back with every reload), and a password that passed is not checked
// again (every browser's next request would cost a bcrypt, queued behind
// the others') unless its user's hash changed: then the old password is
// refused.
func TestBasicAuthKeptAcrossReload(t *testing.T) {
	oldHash, _ := bcrypt.GenerateFromPassword([]byte("old"), bcrypt.MinCost)
	newHash, _ := bcrypt.GenerateFromPassword([]byte("new"), bcrypt.MinCost)
	cfg := func(hash []byte, prev *Proxy) Config {
		return Config{TrustedProxies: []string{"127.0.0.1", "::1"}, Previous: prev, Sites: oneSite(
			RouteConfig{PathPrefix: "/", Respond: &RespondConfig{Status: 200, Body: "in"},
				BasicAuth: &BasicAuthConfig{Users: map[string][]byte{"ops": hash}, FailuresPerMinute: 1}})}
	}
	c := testClient(t)
	do := func(f *front, client, pass string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", f.url+"/", nil)
		req.Host = "example.test"
		req.Header.Set("X-Forwarded-For", client)
		req.SetBasicAuth("ops", pass)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	f := newFront(t, cfg(oldHash, nil), frontOpts{})
	if st := do(f, "192.0.2.1", "guess"); st != 401 {
		t.Fatalf("a wrong password: %d", st)
	}
	if st := do(f, "192.0.2.2", "old"); st != 200 {
		t.Fatalf("the right password: %d", st)
	}
	g := newFront(t, cfg(oldHash, f.p), frontOpts{})
	before := bcryptChecks.Load()
	if st := do(g, "192.0.2.2", "old"); st != 200 {
		t.Errorf("the right password after a reload: %d", st)
	}
	if n := bcryptChecks.Load() - before; n != 0 {
		t.Errorf("%d bcrypt checks for a password that passed before the reload, want 0", n)
	}
	if st := do(g, "192.0.2.1", "guess"); st != 429 {
		t.Errorf("a client over its failures after a reload: %d, want 429", st)
	}
	h := newFront(t, cfg(newHash, g.p), frontOpts{})
	if st := do(h, "192.0.2.2", "old"); st != 401 {
		t.Errorf("the old password after a reload that changed it: %d, want 401", st)
	}
	if st := do(h, "192.0.2.3", "new"); st != 200 {
		t.Errorf("the new password: %d", st)
	}
}

// TestBasicAuthRemoteUser: the access log names the user basic_auth let
// in (remote_user, in the combined format where nginx's has it), for a
// checked and for a remembered password, and no name for a request it
// refused: the name of a failed login may be a password typed in the
// wrong box.
func TestBasicAuthRemoteUser(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "access.log")
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/ops/", Respond: &RespondConfig{Status: 200, Body: "in"},
			BasicAuth: &BasicAuthConfig{Realm: "ops", Users: map[string][]byte{"ops": hash}}}),
		AccessLog: AccessLogConfig{Path: logPath}}
	f := newFront(t, cfg, frontOpts{})
	c := testClient(t)
	for _, pass := range []string{"open sesame", "open sesame", "hunter2"} {
		req, _ := http.NewRequest("GET", f.url+"/ops/x", nil)
		req.Host = "example.test"
		req.SetBasicAuth("ops", pass)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	f.p.AccessLog().Flush()
	data, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d access log lines for 3 requests:\n%s", len(lines), data)
	}
	for i, want := range []string{" - ops [", " - ops [", " - - ["} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"GET /ops/x HTTP/1.1" `+[]string{"200", "200", "401"}[i]) {
			t.Errorf("request %d's line %q; want %q after the client, as nginx's combined", i, lines[i], want)
		}
	}
}

// TestBasicAuthRefusedNameNotInProgramLog: a refused login's name that is
// no user's may be a password typed in the user box, so the program log
// (its debug line for the 401) leaves it out, as the access log does;
// a known user's name stays, to tell whose password failed.
func TestBasicAuthRefusedNameNotInProgramLog(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	cfg := Config{Sites: oneSite(
		RouteConfig{PathPrefix: "/ops/", Respond: &RespondConfig{Status: 200, Body: "in"},
			BasicAuth: &BasicAuthConfig{Realm: "ops", Users: map[string][]byte{"ops": hash}}})}
	f := newFront(t, cfg, frontOpts{logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c := testClient(t)
	for _, user := range []string{"Tr0ub4dor&3", "ops"} {
		req, _ := http.NewRequest("GET", f.url+"/ops/x", nil)
		req.Host = "example.test"
		req.SetBasicAuth(user, "wrong")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("user %q: status %d, want 401", user, res.StatusCode)
		}
	}
	out := logs.String()
	if strings.Contains(out, "Tr0ub4dor") {
		t.Errorf("a refused name that is no user's is in the program log:\n%s", out)
	}
	if !strings.Contains(out, `\"ops\"`) {
		t.Errorf("the known user whose password failed is not named in the program log:\n%s", out)
	}
}
