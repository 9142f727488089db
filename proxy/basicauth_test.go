package proxy

import (
	"io"
	"net/http"
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
		{Users: map[string][]byte{"ops": append([]byte("$2x"), good[3:]...)}}, // crypt_blowfish's buggy-hash marker
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
