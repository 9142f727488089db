package proxy

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/lru"
)

// Basic authentication: a route with a BasicAuthConfig asks for a user
// name and password (RFC 7617), as nginx's auth_basic with
// auth_basic_user_file. Passwords are checked against bcrypt hashes, whose
// cost (tens of milliseconds of CPU each) is what makes a stolen file hard
// to crack and what a client sending wrong passwords would make the proxy
// spend: each client address has a small allowance of failures, the
// checks run a few at a time, and a password that passed is remembered (by
// a hash of it) for a while, so that a browser's every request does not
// cost a bcrypt.

// BasicAuthConfig protects a route with HTTP Basic authentication.
type BasicAuthConfig struct {
	// Realm names the protected area in the browser's prompt. Default
	// "restricted".
	Realm string
	// Users maps each user name to its bcrypt hash ($2a$, $2b$ or $2y$,
	// as htpasswd -B writes).
	Users map[string][]byte
	// FailuresPerMinute bounds the failed attempts of a client address
	// (its /64 for IPv6); beyond it the route answers 429 with
	// Retry-After, checking nothing. Default DefaultBasicAuthFailures.
	FailuresPerMinute int
}

const (
	// DefaultBasicAuthFailures: ten tries a minute is plenty for a person
	// who mistyped, and 14400 a day for a guesser.
	DefaultBasicAuthFailures = 10
	// basicAuthRemember is how long a user and password that passed go
	// unchecked: a browser sends them with every request.
	basicAuthRemember = 5 * time.Minute
	// basicAuthRemembered bounds the passwords remembered per route.
	basicAuthRemembered = 4096
)

// bcryptSlots bounds the bcrypt checks running at once in the process:
// each takes a core for tens of milliseconds, and the other requests need
// the cores too. A check waits for a slot as long as its request lives.
var bcryptSlots = make(chan struct{}, 2)

// testHookBcryptWait, when not nil, runs as a check starts waiting for a
// slot (tests hold the slots).
var testHookBcryptWait func()

// bcryptChecks counts the bcrypt checks made (tests).
var bcryptChecks atomic.Int64

// basicAuth is a compiled BasicAuthConfig.
type basicAuth struct {
	challenge string // the WWW-Authenticate value
	users     map[string][]byte
	// decoy is the hash a name that is no user's is checked against
	// (a user's, of the highest cost), its answer ignored.
	decoy    []byte
	failures *rateLimiter
	passed   *lru.Cache[[sha256.Size]byte, struct{}]
}

func newBasicAuth(c *BasicAuthConfig) (*basicAuth, error) {
	if c == nil {
		return nil, nil
	}
	realm := c.Realm
	if realm == "" {
		realm = "restricted"
	}
	if err := CheckBasicAuthRealm(realm); err != nil {
		return nil, err
	}
	if len(c.Users) == 0 {
		return nil, errors.New("basic_auth: no users")
	}
	for u, h := range c.Users {
		if err := CheckBasicAuthUser(u, h); err != nil {
			return nil, err
		}
	}
	var decoy []byte
	decoyCost := 0
	for _, h := range c.Users {
		if cost, _ := bcrypt.Cost(h); cost > decoyCost || cost == decoyCost && string(h) < string(decoy) {
			decoy, decoyCost = h, cost
		}
	}
	per := c.FailuresPerMinute
	if per <= 0 {
		per = DefaultBasicAuthFailures
	}
	return &basicAuth{
		challenge: `Basic realm="` + realm + `", charset="UTF-8"`,
		users:     c.Users,
		decoy:     decoy,
		failures:  newRateLimiter(RateLimitConfig{Interval: time.Minute / time.Duration(per), Burst: per - 1}),
		passed:    lru.New[[sha256.Size]byte, struct{}](basicAuthRemembered, basicAuthRemember),
	}, nil
}

// basicAuth compiles c for the route of scope (compileRoute), with the
// state of the previous generation's route of that scope: a reload keeps
// the clients' failures (a guesser's allowance does not come back with
// it) while the allowance stays the same, and the passwords that passed
// (each browser's next request would cost a check, queued behind all the
// others'). Those are remembered with their user's hash: a user whose
// hash changed, or who is gone, is checked afresh.
func (p *Proxy) basicAuth(scope string, c *BasicAuthConfig) (*basicAuth, error) {
	a, err := newBasicAuth(c)
	if a == nil || err != nil {
		return nil, err
	}
	if prev := p.prevAuths[scope]; prev != nil {
		a.passed = prev.passed
		if prev.failures.interval == a.failures.interval && prev.failures.tolerance == a.failures.tolerance {
			a.failures = prev.failures
		}
	}
	if p.auths == nil {
		p.auths = map[string]*basicAuth{}
	}
	p.auths[scope] = a
	return a, nil
}

// CheckBasicAuthRealm reports what is wrong with realm: it goes in a
// quoted string, so no quote, backslash or control character.
func CheckBasicAuthRealm(realm string) error {
	if strings.ContainsAny(realm, "\"\\") || strings.ContainsFunc(realm, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("basic_auth: realm %q holds a quote, backslash or control character", realm)
	}
	return nil
}

// CheckBasicAuthUser reports what is wrong with a user and its hash: a
// name Basic authentication cannot carry (a colon, a control character,
// RFC 7617 §2), or a hash that is not bcrypt's.
func CheckBasicAuthUser(user string, hash []byte) error {
	switch {
	case user == "" || strings.ContainsFunc(user, func(r rune) bool { return r == ':' || r < ' ' || r == 0x7f }):
		return fmt.Errorf("basic_auth: user %q: a name may not be empty or hold a colon or control character", user)
	case len(hash) < 4 || hash[0] != '$' || hash[1] != '2' || (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') || hash[3] != '$':
		return fmt.Errorf("basic_auth: user %q: not a bcrypt hash (MD5 $apr1$, {SHA} and crypt hashes are refused: regenerate it with htpasswd -B)", user)
	}
	cost, err := bcrypt.Cost(hash)
	if err != nil {
		return fmt.Errorf("basic_auth: user %q: %v", user, err)
	}
	if cost > MaxBasicAuthCost {
		return fmt.Errorf("basic_auth: user %q: bcrypt cost %d, over %d: each check would take a core for seconds, a request's wait and a client's failures the proxy's CPU (htpasswd -B -C 10)", user, cost, MaxBasicAuthCost)
	}
	// bcrypt.Cost reads the prefix only: a hash cut short, or with a
	// character out of bcrypt's alphabet in its salt or digest, matches no
	// password, and its user would be refused with no word why.
	if len(hash) != bcryptHashLen || strings.ContainsFunc(string(hash[7:]), func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '/')
	}) {
		return fmt.Errorf("basic_auth: user %q: not a whole bcrypt hash (%d characters, %s and then 53 of ./A-Za-z0-9): cut short or altered, it matches no password", user, bcryptHashLen, hash[:min(len(hash), 7)])
	}
	return nil
}

// MaxBasicAuthCost bounds a users file's bcrypt cost: each step doubles
// a check's time, tens of milliseconds at 10 (htpasswd -B writes 5), about
// a second at 14. The failures allowed, the checks run at once and the
// name that is no user's (checked at the highest cost) assume a check
// takes a moment.
const MaxBasicAuthCost = 14

// bcryptHashLen is the length of a bcrypt hash: $2y$, the cost, '$', 22
// characters of salt and 31 of digest.
const bcryptHashLen = 60

// authorized reports whether r carries a user and password of rt's, or
// answers it (401 with the challenge, 429 for a client over its failures,
// 400 for more than one Authorization) and returns false.
func (s *site) authorized(rs *reqState, r *http.Request, rt *route) bool {
	a := rt.auth
	var client netip.Addr
	if ip, err := netip.ParseAddr(s.p.realClient(r)); err == nil {
		client = frontdoor.ClientKeyOf(ip)
	}
	if client.IsValid() {
		if wait, over := a.failures.exhausted(client); over {
			s.authOver(rs, r, rt, client, wait)
			return false
		}
	}
	if len(r.Header["Authorization"]) > 1 {
		// One set of credentials (RFC 9110 §11.6.2), as nginx holds
		// it: the first is checked here, and a target that read the
		// last, or the list, would take the request for another user's.
		s.errorResponse(rs, r, http.StatusBadRequest, "malformed request", "more than one Authorization field for route "+rt.name)
		return false
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		s.errorResponseWith(rs, r, http.StatusUnauthorized, "Www-Authenticate", a.challenge, "authentication required", "no credentials for route "+rt.name)
		return false
	}
	hash, known := a.users[user]
	// Remembered by a hash of user, password and bcrypt hash (kept
	// across reloads: a changed hash is another key): never the password.
	key := sha256.Sum256([]byte(user + "\x00" + pass + "\x00" + string(hash)))
	if _, ok := a.passed.Get(key); ok && known {
		rs.authUser = user
		return true
	}
	// A check counts as a failure until it passes, taken from the
	// client's allowance before it waits for a slot: the wrong passwords
	// a client sends at once cost no more checks than its failures
	// allow, and those beyond wait for none.
	if client.IsValid() {
		if ok, wait := a.failures.allow(client); !ok {
			s.authOver(rs, r, rt, client, wait)
			return false
		}
	}
	if !known {
		// Checked as a user's wrong password is: answered at once, a
		// name that is no user's would tell the users' names apart by
		// the time its 401 takes.
		checkBcrypt(r, a.decoy, pass)
	} else if checkBcrypt(r, hash, pass) {
		if client.IsValid() {
			a.failures.giveBack(client)
		}
		a.passed.Put(key, struct{}{})
		rs.authUser = user
		return true
	}
	// A name that is no user's may be a password typed in the user box:
	// the log names only a known user whose password failed.
	why := "unknown user for route " + rt.name
	if known {
		why = "wrong password for route " + rt.name + " (user " + strconv.Quote(user) + ")"
	}
	s.errorResponseWith(rs, r, http.StatusUnauthorized, "Www-Authenticate", a.challenge, "authentication required", why)
	return false
}

// authOver answers 429 to client, over its failures on rt for wait.
func (s *site) authOver(rs *reqState, r *http.Request, rt *route, client netip.Addr, wait time.Duration) {
	secs := (wait + time.Second - 1) / time.Second
	s.errorResponseWith(rs, r, http.StatusTooManyRequests, "Retry-After", strconv.FormatInt(int64(secs), 10),
		"too many failed logins from this address", "client "+client.String()+" is over route "+rt.name+"'s basic_auth failures")
}

// checkBcrypt reports whether pass is the password of hash, bcrypt's
// answer, taken in one of bcryptSlots (false when r ends first).
func checkBcrypt(r *http.Request, hash []byte, pass string) bool {
	if testHookBcryptWait != nil {
		testHookBcryptWait()
	}
	select {
	case bcryptSlots <- struct{}{}:
	case <-r.Context().Done():
		return false
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(pass))
	<-bcryptSlots
	bcryptChecks.Add(1)
	return err == nil
}

// exhausted reports whether client has no allowance left (and how long
// until it has), taking none.
func (l *rateLimiter) exhausted(client netip.Addr) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, wait := l.arrival(client, now); wait > 0 {
		return time.Duration(wait), true
	}
	return 0, false
}

// giveBack returns to client the request allow took last from its
// allowance (a basic_auth check that passed is no failure).
func (l *rateLimiter) giveBack(client netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tat, ok := l.tat.Get(client); ok {
		l.tat.Put(client, tat-l.interval)
	}
}
