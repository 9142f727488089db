package tlcp

import (
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// Session resumption (digest A.4): session IDs through a SessionStore, and
// RFC 5077 tickets as Tongsuo does in NTLS — the client offers an empty
// session_ticket extension, the server echoes it with an empty session_id
// and sends NewSessionTicket before its ChangeCipherSpec.

// SessionStore keeps server sessions for session-ID resumption. Keys are the
// session IDs (as strings), values opaque serialized sessions. Several
// gmproxy instances can share one store. Implementations must be safe for
// concurrent use.
type SessionStore interface {
	// Get returns the state stored under id, if any and not expired.
	Get(id string) ([]byte, bool)
	// Put stores state under id for lifetime.
	Put(id string, state []byte, lifetime time.Duration)
	// Delete forgets id.
	Delete(id string)
}

type storeEntry struct {
	state   []byte
	expires time.Time
}

type lruStore struct {
	c   *lru.Cache[string, storeEntry]
	now func() time.Time
}

// NewLRUSessionStore returns an in-memory SessionStore holding at most
// capacity sessions, each for at most lifetime (and its own Put lifetime).
func NewLRUSessionStore(capacity int, lifetime time.Duration) SessionStore {
	return &lruStore{c: lru.New[string, storeEntry](capacity, lifetime), now: time.Now}
}

func (s *lruStore) Get(id string) ([]byte, bool) {
	e, ok := s.c.Get(id)
	if !ok || (!e.expires.IsZero() && !s.now().Before(e.expires)) {
		return nil, false
	}
	return e.state, true
}

func (s *lruStore) Put(id string, state []byte, lifetime time.Duration) {
	e := storeEntry{state: state}
	if lifetime > 0 {
		e.expires = s.now().Add(lifetime)
	}
	s.c.Put(id, e)
}

func (s *lruStore) Delete(id string) { s.c.Delete(id) }

// byteStore is implemented by stores that look session IDs up without
// converting them to strings.
type byteStore interface {
	getBytes(id []byte) ([]byte, bool)
}

func (s *lruStore) getBytes(id []byte) ([]byte, bool) {
	// A direct conversion in the call does not allocate when the key does
	// not escape; lru.Cache.Get only uses it for the map index.
	e, ok := s.c.Get(string(id))
	if !ok || (!e.expires.IsZero() && !s.now().Before(e.expires)) {
		return nil, false
	}
	return e.state, true
}

// storeGet looks id up in store.
func storeGet(store SessionStore, id []byte) ([]byte, bool) {
	if bs, ok := store.(byteStore); ok {
		return bs.getBytes(id)
	}
	return store.Get(string(id))
}

// sessionState is what the server keeps (in a store or sealed in a ticket).
type sessionState struct {
	vers        uint16
	cipherSuite uint16
	createdAt   uint64 // Unix seconds
	master      []byte
	certs       [][]byte // client certificates, if any
	serverName  string
	// serverCert is SM3 of the server signing certificate the session was
	// made with, so a store or ticket key shared by several sites never
	// resumes a session on another identity.
	serverCert []byte
}

func (s *sessionState) marshal() ([]byte, error) {
	var b cryptobyte.Builder
	b.AddUint16(s.vers)
	b.AddUint16(s.cipherSuite)
	b.AddUint64(s.createdAt)
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.master) })
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range s.certs {
			b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(c) })
		}
	})
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(s.serverName)) })
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(s.serverCert) })
	return b.Bytes()
}

func (s *sessionState) unmarshal(data []byte) bool {
	*s = sessionState{}
	in := cryptobyte.String(data)
	var master, certs, name, sc cryptobyte.String
	if !in.ReadUint16(&s.vers) || !in.ReadUint16(&s.cipherSuite) || !in.ReadUint64(&s.createdAt) ||
		!in.ReadUint8LengthPrefixed(&master) || len(master) != masterSecretLength ||
		!in.ReadUint24LengthPrefixed(&certs) || !in.ReadUint16LengthPrefixed(&name) ||
		!in.ReadUint8LengthPrefixed(&sc) || !in.Empty() {
		return false
	}
	s.serverCert = []byte(sc)
	s.master = []byte(master)
	for !certs.Empty() {
		var c cryptobyte.String
		if !certs.ReadUint24LengthPrefixed(&c) || len(c) == 0 || len(s.certs) >= maxCertChain {
			return false
		}
		s.certs = append(s.certs, []byte(c))
	}
	s.serverName = string(name)
	return true
}

// ClientSessionState is a session a client can resume.
type ClientSessionState struct {
	sessionID      []byte
	ticket         []byte
	vers           uint16
	cipherSuite    uint16
	master         []byte
	serverCerts    []*smx509.Certificate
	verifiedChains [][]*smx509.Certificate
	receivedAt     time.Time
	lifetime       time.Duration
}

// ClientSessionCache keeps client sessions by server key (ServerName or the
// dialed address). Put with a nil state deletes.
type ClientSessionCache interface {
	Get(key string) (*ClientSessionState, bool)
	Put(key string, cs *ClientSessionState)
}

type lruClientCache struct {
	c *lru.Cache[string, *ClientSessionState]
}

// NewLRUClientSessionCache returns a ClientSessionCache of at most capacity
// entries (default 64 when capacity <= 0).
func NewLRUClientSessionCache(capacity int) ClientSessionCache {
	if capacity <= 0 {
		capacity = 64
	}
	return &lruClientCache{c: lru.New[string, *ClientSessionState](capacity, 0)}
}

func (l *lruClientCache) Get(key string) (*ClientSessionState, bool) { return l.c.Get(key) }

func (l *lruClientCache) Put(key string, cs *ClientSessionState) {
	if cs == nil {
		l.c.Delete(key)
		return
	}
	l.c.Put(key, cs)
}

// sealTicket encrypts a session state with the newest ticket key.
func sealTicket(src ticket.Source, s *sessionState) ([]byte, error) {
	b, err := s.marshal()
	if err != nil {
		return nil, err
	}
	return ticket.Seal(nil, src, b)
}

// openTicket decrypts and parses a ticket. reason is "" on success, else
// TicketReasonUndecryptable or TicketReasonMalformed; stale says an older
// key opened it.
func openTicket(src ticket.Source, t []byte, s *sessionState) (stale bool, reason string) {
	b, ok, stale := ticket.Open(src, t)
	if !ok {
		return false, TicketReasonUndecryptable
	}
	if !s.unmarshal(b) {
		return false, TicketReasonMalformed
	}
	return stale, ""
}
