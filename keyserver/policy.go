package keyserver

import (
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/sm2sign"
)

// Roles, identities and limits: what keeps the key server from being an
// oracle for anyone holding a client certificate.

// Role is a set of operations a key may run.
type Role uint8

// Roles. A TLCP signing key is RoleSign (TLS 1.3-SM uses the same key);
// a TLCP encryption key is RoleDecrypt (ECC suites) and RoleKeyAgreement
// (ECDHE suites).
const (
	RoleSign Role = 1 << iota
	RoleDecrypt
	RoleKeyAgreement
)

// RoleNames are the configuration names of the roles, in bit order.
var RoleNames = []string{"sign", "decrypt", "key_agreement"}

// ParseRole returns the role named name (one of RoleNames).
func ParseRole(name string) (Role, bool) {
	for i, n := range RoleNames {
		if n == name {
			return Role(1) << i, true
		}
	}
	return 0, false
}

func (r Role) String() string {
	var names []string
	for i, n := range RoleNames {
		if r&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// allows reports whether r includes op.
func (r Role) allows(op Op) bool {
	switch op {
	case OpSign:
		return r&RoleSign != 0
	case OpDecrypt:
		return r&RoleDecrypt != 0
	case OpKeyAgreement:
		return r&RoleKeyAgreement != 0
	}
	return false
}

// Key is a served key.
type Key struct {
	// Name identifies the key in allow-lists, logs and metrics.
	Name string
	// Private is the key.
	Private *sm2.PrivateKey
	// Roles are the operations it may run; operations outside them are
	// refused with CodeWrongRole.
	Roles Role
}

// DefaultLimits are the limits of a client that sets none (gmproxy
// keyserver's clients[] defaults and its Unix-socket client).
var DefaultLimits = Limits{Rate: 10000, Burst: 1000, MaxInFlight: 256, MaxConns: 64}

// Limits bound what one client may ask.
type Limits struct {
	// Rate is the sustained operations per second; 0 means unlimited.
	Rate float64
	// Burst is the operations allowed at once above Rate (at least 1 when
	// Rate is set).
	Burst int
	// MaxInFlight bounds the client's operations in progress, over all its
	// connections, answers not yet written included (a client that does not
	// read its answers gets no more than this many run); 0 means unlimited.
	MaxInFlight int
	// MaxConns bounds the client's open connections: one more is refused
	// after the greeting (CodeBusy, then closed), so that one client
	// cannot take all of Server.MaxConns from the others; 0 means
	// unlimited.
	MaxConns int
}

// Grant is a client identity allowed to use some keys.
type Grant struct {
	// Name identifies the client in logs and metrics.
	Name string
	// Subject matches the certificate subject, in the RFC 2253 form of
	// crypto/x509 (for example "CN=edge-1,O=Example") written from every
	// attribute of the subject, the last RDN first (pkix.RDNSequence
	// String): a subject with a second CN or its attributes in another
	// order does not match, where pkix.Name.String would drop or reorder
	// them. For an ordinary certificate both forms are the same.
	Subject string
	// SPKISHA256 matches the SHA-256 of the certificate's
	// SubjectPublicKeyInfo. A grant sets Subject or SPKISHA256 (or both:
	// then both must match).
	SPKISHA256 []byte
	// Keys are the names of the keys it may use.
	Keys []string
	Limits
}

// Policy is what the server serves and to whom.
type Policy struct {
	Keys []Key
	// Clients are the identities allowed on TLS connections; a TLS peer
	// matching none is refused.
	Clients []Grant
	// Local is the client of connections without TLS (Unix sockets, which
	// file permissions protect); nil refuses them.
	Local *Grant
	// ClientCAs, when set, are the CAs the TLS clients' certificates
	// chain to (the listener's tls.Config should verify new connections
	// against the same pool): after SetPolicy, an open connection's
	// certificate is verified against the new pool before its next
	// request, so that a CA no longer trusted cuts its clients off.
	ClientCAs *x509.CertPool
}

// SPKIHash returns the SHA-256 of cert's SubjectPublicKeyInfo, as matched
// by Client.SPKISHA256.
func SPKIHash(cert *x509.Certificate) [32]byte {
	return sha256.Sum256(cert.RawSubjectPublicKeyInfo)
}

// policy is a compiled Policy.
type policy struct {
	keys      map[[32]byte]*servedKey
	clients   []*clientPolicy
	local     *clientPolicy
	clientCAs *x509.CertPool
}

type servedKey struct {
	Key
	id [32]byte
	// signer signs with Private (sm2sign: per-key precomputation).
	signer *sm2sign.Key
}

type clientPolicy struct {
	Grant
	spki  string // hex, "" when not matched
	allow map[*servedKey]bool
	state *clientState
	// local: the grant of Unix-socket clients (Policy.Local), which a TLS
	// client never gets, whatever its name.
	local bool
}

// stateKey names a client's limits state, kept across reloads: the Local
// grant's is its own even when a TLS client has the same name.
type stateKey struct {
	name  string
	local bool
}

// compilePolicy compiles p, taking each client's state from states (new
// ones are added); the clients' new limits apply only once all of p
// compiled: a policy refused leaves every client as it was.
func compilePolicy(p *Policy, states map[stateKey]*clientState) (*policy, error) {
	type staged struct {
		st *clientState
		l  Limits
	}
	var limits []staged
	cp := &policy{keys: map[[32]byte]*servedKey{}, clientCAs: p.ClientCAs}
	byName := map[string]*servedKey{}
	for _, k := range p.Keys {
		if k.Private == nil {
			return nil, fmt.Errorf("key %q: no private key", k.Name)
		}
		id, err := KeyID(k.Private.Public())
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.Name, err)
		}
		signer, err := sm2sign.New(k.Private)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.Name, err)
		}
		sk := &servedKey{Key: k, id: id, signer: signer}
		if _, dup := byName[k.Name]; dup {
			return nil, fmt.Errorf("key name %q used twice", k.Name)
		}
		if prev := cp.keys[id]; prev != nil {
			// Requests name a key by its ID: the later entry would replace
			// the earlier one, its roles with it, and the grants of the
			// earlier name would be refused.
			return nil, fmt.Errorf("keys %q and %q are the same key; serve it once, with the roles of both", prev.Name, k.Name)
		}
		byName[k.Name] = sk
		cp.keys[id] = sk
	}
	compile := func(c *Grant, local bool) (*clientPolicy, error) {
		if c.Name == "" {
			return nil, errors.New("client without a name")
		}
		ccp := &clientPolicy{Grant: *c, allow: map[*servedKey]bool{}, local: local}
		if len(c.SPKISHA256) > 0 {
			ccp.spki = hex.EncodeToString(c.SPKISHA256)
		}
		for _, n := range c.Keys {
			sk := byName[n]
			if sk == nil {
				return nil, fmt.Errorf("client %q: unknown key %q", c.Name, n)
			}
			ccp.allow[sk] = true
		}
		sk := stateKey{c.Name, local}
		st := states[sk]
		if st == nil {
			st = &clientState{name: c.Name}
			states[sk] = st
		}
		limits = append(limits, staged{st, c.Limits})
		ccp.state = st
		return ccp, nil
	}
	for i := range p.Clients {
		c := &p.Clients[i]
		if c.Subject == "" && len(c.SPKISHA256) == 0 {
			return nil, fmt.Errorf("client %q: no subject or SPKI hash to match", c.Name)
		}
		ccp, err := compile(c, false)
		if err != nil {
			return nil, err
		}
		cp.clients = append(cp.clients, ccp)
	}
	if p.Local != nil {
		ccp, err := compile(p.Local, true)
		if err != nil {
			return nil, err
		}
		cp.local = ccp
	}
	for _, s := range limits {
		s.st.setLimits(s.l)
	}
	// A client the policy no longer names loses its connections now
	// rather than at their next request (their places count in
	// Server.MaxConns), and its state is forgotten.
	for k, st := range states {
		if !slices.ContainsFunc(limits, func(s staged) bool { return s.st == st }) {
			st.shedAll()
			delete(states, k)
		}
	}
	return cp, nil
}

// identify returns the client of a connection whose peer presented
// cert (nil: no TLS), or nil when none matches.
func (p *policy) identify(cert *x509.Certificate) *clientPolicy {
	if cert == nil {
		return p.local
	}
	subject := SubjectString(cert)
	h := SPKIHash(cert)
	spki := hex.EncodeToString(h[:])
	for _, c := range p.clients {
		if (c.Subject == "" || c.Subject == subject) && (c.spki == "" || c.spki == spki) {
			return c
		}
	}
	return nil
}

// verifies reports whether chain (a client's certificates as sent, leaf
// first) chains to the policy's ClientCAs for client authentication; true
// when the policy has none.
func (p *policy) verifies(chain []*x509.Certificate) bool {
	if p.clientCAs == nil {
		return true
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: p.clientCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// SubjectString returns the subject of cert as Grant.Subject matches it:
// every attribute, in RFC 2253 form (the last RDN first), or "" when the
// subject does not parse.
func SubjectString(cert *x509.Certificate) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) != 0 {
		return ""
	}
	return rdns.String()
}

// peerName describes cert for the log of a refused connection.
func peerName(cert *x509.Certificate) string {
	h := SPKIHash(cert)
	return fmt.Sprintf("subject %q, spki_sha256 %s", SubjectString(cert), hex.EncodeToString(h[:]))
}

// clientState is a client's rate limiter, in-flight count and open
// connections; it outlives policy changes that keep the client's name.
type clientState struct {
	name     string
	inFlight atomic.Int64

	mu     sync.Mutex
	limits Limits
	tokens float64
	last   time.Time
	// open are the client's connections, oldest first; shed those closed
	// by a reload, with the reason.
	open []net.Conn
	shed map[net.Conn]string
	// removed: a reload removed the client (its state is forgotten).
	removed bool
}

// Reasons a reload sheds a connection.
const (
	shedLowered = "the client's max_connections was lowered"
	shedRemoved = "the client was removed from the allow-list"
)

// setLimits applies l. When l.MaxConns is below the connections open,
// the newest beyond it are shed.
func (s *clientState) setLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Rate > 0 && l.Burst < 1 {
		l.Burst = 1
	}
	if s.limits != l {
		if s.limits.Rate != l.Rate || s.limits.Burst != l.Burst {
			s.retoken(l, time.Now())
		}
		s.limits = l
	}
	if l.MaxConns <= 0 {
		return
	}
	s.shedLocked(s.open[min(l.MaxConns, len(s.open)):], shedLowered)
}

// retoken moves the token bucket to the rate and burst of l at now; s.mu
// is held. What the client used under the old rate stays used (its tokens,
// refilled up to now, carry over, at most the new burst): a reload that
// tightens the rate must not hand a throttled client a fresh burst. A
// client that had no rate, or sent nothing yet, starts with its burst.
func (s *clientState) retoken(l Limits, now time.Time) {
	old := s.limits
	if old.Rate <= 0 || s.last.IsZero() {
		s.tokens, s.last = float64(l.Burst), time.Time{}
		return
	}
	t := min(float64(old.Burst), s.tokens+now.Sub(s.last).Seconds()*old.Rate)
	s.tokens, s.last = min(t, float64(l.Burst)), now
}

// shedAll sheds every connection of the client (a reload removed it).
func (s *clientState) shedAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = true
	s.shedLocked(s.open, shedRemoved)
}

// shedLocked marks conns shed for why and wakes their reads, so that
// each stops taking requests and closes once its operations in progress
// are answered (as on Shutdown); s.mu is held.
func (s *clientState) shedLocked(conns []net.Conn, why string) {
	for _, c := range conns {
		if s.shed == nil {
			s.shed = map[net.Conn]string{}
		}
		if s.shed[c] == "" {
			s.shed[c] = why
			c.SetReadDeadline(time.Unix(1, 0))
		}
	}
}

// rate takes a token for one request: every request but a ping, refused
// or not, so that a client cannot probe keys or send malformed requests
// faster than it may run operations. The code is CodeOK or
// CodeRateLimited.
func (s *clientState) rate(now time.Time) Code {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limits
	if l.Rate <= 0 {
		return CodeOK
	}
	if !s.last.IsZero() {
		s.tokens = min(float64(l.Burst), s.tokens+now.Sub(s.last).Seconds()*l.Rate)
	}
	s.last = now
	if s.tokens < 1 {
		return CodeRateLimited
	}
	s.tokens--
	return CodeOK
}

// enter takes an in-flight slot for one operation; release gives it
// back. The code is CodeOK or CodeBusy.
func (s *clientState) enter() Code {
	s.mu.Lock()
	limit := s.limits.MaxInFlight
	s.mu.Unlock()
	if n := s.inFlight.Add(1); limit > 0 && n > int64(limit) {
		s.inFlight.Add(-1)
		return CodeBusy
	}
	return CodeOK
}

func (s *clientState) release() { s.inFlight.Add(-1) }

// addConn counts c as a connection of the client; false, and not counted,
// when the client already has MaxConns open.
func (s *clientState) addConn(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit := s.limits.MaxConns; limit > 0 && len(s.open) >= limit {
		return false
	}
	s.open = append(s.open, c)
	if s.removed {
		// Identified under a policy that a reload replaced, removing the
		// client, before c was counted here: shed like the client's
		// other connections, not left open until a request or the idle
		// timeout.
		s.shedLocked([]net.Conn{c}, shedRemoved)
	}
	return true
}

// doneConn forgets c; it returns why c was shed ("" when it was not).
func (s *clientState) doneConn(c net.Conn) (shed string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.open, c); i >= 0 {
		s.open = slices.Delete(s.open, i, i+1)
	}
	shed = s.shed[c]
	delete(s.shed, c)
	return shed
}

// isShed reports whether c was shed.
func (s *clientState) isShed(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shed[c] != ""
}
