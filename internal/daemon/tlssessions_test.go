package daemon

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"io"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestTLSSessionsSealed: crypto/tls sessions sealed with the daemon's
// ticket keys resume on a tls.Config built again with the same keys and
// binding (a reload, another worker), in TLS 1.2 and 1.3; not under
// another binding (another site, certificate or client-auth policy), not
// past the lifetime, and not with other keys.
func TestTLSSessionsSealed(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"site.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	keys := ticket.Static{testTicketKey(t, 1)}
	clock := time.Now()
	server := func(keys ticket.Source, binding [32]byte) *tls.Config {
		tc := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
		sealTLSSessions(tc, keys, binding, 5*time.Minute, func() time.Time { return clock })
		return tc
	}
	a := tlsSessionBinding("site", der, "")
	for _, vers := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		client := &tls.Config{RootCAs: roots, ServerName: "site.test", MaxVersion: vers, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		resumed := func(srv *tls.Config) bool {
			t.Helper()
			c1, c2 := testpeer.TCPPair(t)
			s := tls.Server(c2, srv)
			go func() {
				defer c2.Close()
				if s.Handshake() == nil {
					s.Write([]byte{1}) // after the TLS 1.3 ticket
				}
			}()
			c := tls.Client(c1, client)
			defer c.Close()
			c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
			if err := c.Handshake(); err != nil {
				t.Fatalf("version %x: %v", vers, err)
			}
			if _, err := c.Read(make([]byte, 1)); err != nil { // takes the TLS 1.3 ticket first
				t.Fatalf("version %x: %v", vers, err)
			}
			return c.ConnectionState().DidResume
		}
		if resumed(server(keys, a)) {
			t.Fatalf("version %x: the first connection resumed", vers)
		}
		if !resumed(server(keys, a)) {
			t.Errorf("version %x: no resumption on a Config built again with the same keys and binding", vers)
		}
		for name, b := range map[string][32]byte{
			"another site":        tlsSessionBinding("other", der, ""),
			"another certificate": tlsSessionBinding("site", append([]byte{1}, der...), ""),
			"client auth added":   tlsSessionBinding("site", der, "require:00"),
		} {
			if resumed(server(keys, b)) {
				t.Errorf("version %x: resumed under %s", vers, name)
			}
			resumed(server(keys, a)) // a fresh session of binding a again
		}
		if resumed(server(ticket.Static{testTicketKey(t, 2)}, a)) {
			t.Errorf("version %x: resumed with other ticket keys", vers)
		}
		resumed(server(keys, a))
		clock = clock.Add(6 * time.Minute)
		if resumed(server(keys, a)) {
			t.Errorf("version %x: resumed past the lifetime", vers)
		}
		clock = time.Now()
	}
}

// testTicketKey is a ticket key made of 32 bytes of b.
func testTicketKey(t *testing.T, b byte) ticket.Key {
	t.Helper()
	secret := make([]byte, ticket.KeySize)
	for i := range secret {
		secret[i] = b
	}
	k, err := ticket.NewKey(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestTLSResumesAcrossReload: an ordinary TLS client resumes its session
// after a reload (each reload builds new tls.Configs, whose own ticket
// keys crypto/tls would make anew), on the site that issued it only.
func TestTLSResumesAcrossReload(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	d := startDaemon(t, cfg)
	for _, vers := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cache := tls.NewLRUClientSessionCache(4)
		resumed := func(sni string) bool {
			t.Helper()
			c, err := tls.Dial("tcp", d.addr, &tls.Config{RootCAs: ecdsaRoots(t), ServerName: sni, MaxVersion: vers,
				ClientSessionCache: cache, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatalf("version %x: %v", vers, err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+sni+"\r\nConnection: close\r\n\r\n")
			io.Copy(io.Discard, c) // the response, and the TLS 1.3 ticket before it
			return c.ConnectionState().DidResume
		}
		resumed("localhost")
		if !resumed("localhost") {
			t.Fatalf("version %x: no resumption before the reload", vers)
		}
		d.reloadWith(t, testConfig(t, b.Listener.Addr().String()))
		if !resumed("localhost") {
			t.Errorf("version %x: no resumption after a reload of the same configuration", vers)
		}
	}
}

// FuzzTLSSessionTicket: a TLS client's session ticket (any bytes) resumes
// nothing unless it opens with the ticket keys; a sealed one resumes only
// a session of this binding, issued within the lifetime (a minute of
// clock skew allowed), whose state crypto/tls reads; and every session
// WrapSession seals resumes again as itself.
func FuzzTLSSessionTicket(f *testing.F) {
	// Seeds (and in testdata: sessions crypto/tls made, TLS 1.2 and 1.3
	// without a client certificate): ages in and out of the lifetime.
	f.Add([]byte("ticket"), []byte{}, int64(0), true)
	f.Add([]byte{}, []byte{3, 4, 1, 0x13, 1}, int64(-61), true)
	f.Add(make([]byte, 64), []byte{}, int64(301), false)
	f.Add([]byte{1}, []byte{}, int64(math.MinInt64), true)
	secret := make([]byte, ticket.KeySize)
	for i := range secret {
		secret[i] = byte(i)
	}
	key, err := ticket.NewKey(secret, time.Now())
	if err != nil {
		f.Fatal(err)
	}
	keys := ticket.Static{key}
	binding := tlsSessionBinding("site", []byte("cert"), "")
	other := tlsSessionBinding("site", []byte("cert"), "require:00")
	now := time.Unix(1_800_000_000, 0)
	const lifetime = 5 * time.Minute
	tc := &tls.Config{}
	sealTLSSessions(tc, keys, binding, lifetime, func() time.Time { return now })
	f.Fuzz(func(t *testing.T, identity, state []byte, age int64, bound bool) {
		if ss, err := tc.UnwrapSession(identity, tls.ConnectionState{}); ss != nil || err != nil {
			t.Fatalf("raw ticket %x: %v, %v", identity, ss, err)
		}
		b := other
		if bound {
			b = binding
		}
		issued := now.Unix() - age
		pt := binary.BigEndian.AppendUint64(bytes.Clone(b[:]), uint64(issued))
		pt = append(pt, state...)
		sealed, err := ticket.Seal(nil, keys, ticket.TLS, pt)
		if err != nil {
			t.Fatal(err)
		}
		ss, err := tc.UnwrapSession(sealed, tls.ConnectionState{})
		if err != nil {
			t.Fatalf("UnwrapSession: %v (a failure must be a full handshake: nil, nil)", err)
		}
		_, perr := tls.ParseSessionState(state)
		// (compared without subtracting: issued may be any int64)
		inTime := issued >= now.Unix()-int64(lifetime/time.Second) && issued <= now.Unix()+60
		if want := bound && inTime && perr == nil; (ss != nil) != want {
			t.Fatalf("binding %v, issued %ds ago, state parses %v: resumed %v, want %v", bound, age, perr == nil, ss != nil, want)
		}
		if perr != nil {
			return
		}
		orig, _ := tls.ParseSessionState(state)
		ticketBytes, err := tc.WrapSession(tls.ConnectionState{}, orig)
		if err != nil {
			t.Fatal(err)
		}
		again, err := tc.UnwrapSession(ticketBytes, tls.ConnectionState{})
		if again == nil || err != nil {
			t.Fatalf("a session WrapSession sealed does not resume: %v", err)
		}
		if x, y := mustBytes(t, orig), mustBytes(t, again); !bytes.Equal(x, y) {
			t.Fatalf("session %x resumes as %x", x, y)
		}
	})
}

func mustBytes(t *testing.T, ss *tls.SessionState) []byte {
	t.Helper()
	b, err := ss.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTLS12ResumptionKeepsTheLifetime: crypto/tls renews a TLS 1.2
// ticket on every resumption, sealing the same master secret again; the
// new ticket must keep the session's creation time, so that the session
// resumes for sessions.lifetime after its full handshake, as with nginx's
// ssl_session_timeout, and no longer. Each new ticket was stamped with
// the time it was sealed: a client resuming every 4 minutes kept one
// master secret (and, with mutual TLS, one certificate check) for 7 days
// under a lifetime of 5 minutes.
func TestTLS12ResumptionKeepsTheLifetime(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"site.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	keys := ticket.Static{testTicketKey(t, 1)}
	clock := time.Now()
	now := func() time.Time { return clock }
	srv := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, Time: now}
	sealTLSSessions(srv, keys, tlsSessionBinding("site", der, ""), 5*time.Minute, now)
	client := &tls.Config{RootCAs: roots, ServerName: "site.test", MaxVersion: tls.VersionTLS12,
		ClientSessionCache: tls.NewLRUClientSessionCache(4), Time: now}
	resumed := func() bool {
		t.Helper()
		c1, c2 := testpeer.TCPPair(t)
		s := tls.Server(c2, srv)
		go func() {
			defer c2.Close()
			s.Handshake()
		}()
		c := tls.Client(c1, client)
		defer c.Close()
		c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c.ConnectionState().DidResume
	}
	resumed()
	clock = clock.Add(4 * time.Minute)
	if !resumed() {
		t.Fatal("no resumption 4 minutes after the full handshake (lifetime 5m)")
	}
	clock = clock.Add(4 * time.Minute)
	if resumed() {
		t.Fatal("a session resumed 8 minutes after its full handshake (lifetime 5m): the ticket its resumption renewed was stamped anew")
	}
}
