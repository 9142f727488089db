package tlcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"

	"github.com/gmproxy/gmproxy/internal/lru"
	"github.com/gmproxy/gmproxy/internal/sm3state"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// Session resumption (protocol-notes §4.3): session IDs through a SessionStore, and
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
	prep    *preparedSession // set by putPrepared
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

// preparedSession is a session as the in-memory store keeps it next to its
// serialized form: parsed, with its client certificates parsed and the
// master secret's HMAC-SM3 key state (the ipad/opad chaining values)
// saved, so that a session-ID resumption neither parses the state nor keys
// the PRF again (two SM3 compressions). The state is as secret as the
// master secret it is derived from and is kept exactly as long. A
// preparedSession is shared by concurrent handshakes and never modified
// once stored.
type preparedSession struct {
	s         sessionState
	peerCerts []*smx509.Certificate
	macState  sm3state.HMACState
	// chainKey is the verify-cache key of the client certificates, when the
	// full handshake computed it (hasChainKey).
	chainKey    chainCacheKey
	hasChainKey bool
}

// preparedStore is implemented by the in-memory store (other stores see
// only the serialized state).
type preparedStore interface {
	getPrepared(id []byte) (*preparedSession, bool)
	putPrepared(id string, state []byte, p *preparedSession, lifetime time.Duration)
}

func (s *lruStore) getPrepared(id []byte) (*preparedSession, bool) {
	e, ok := s.c.Get(string(id))
	if !ok || e.prep == nil || (!e.expires.IsZero() && !s.now().Before(e.expires)) {
		return nil, false
	}
	return e.prep, true
}

func (s *lruStore) putPrepared(id string, state []byte, p *preparedSession, lifetime time.Duration) {
	e := storeEntry{state: state, prep: p}
	if lifetime > 0 {
		e.expires = s.now().Add(lifetime)
	}
	s.c.Put(id, e)
}

// newPreparedSession parses state (which it keeps) and copies the HMAC
// state of its master secret. peerCerts are the parsed certificates of
// the state's client certificate list (copied); chainKey, if not nil, is
// their verify-cache key.
func newPreparedSession(state []byte, macState *sm3state.HMACState, peerCerts []*smx509.Certificate, chainKey *chainCacheKey) (*preparedSession, bool) {
	p := &preparedSession{macState: *macState}
	if chainKey != nil {
		p.chainKey, p.hasChainKey = *chainKey, true
	}
	if !p.s.unmarshal(state) || len(p.s.certs) != len(peerCerts) {
		return nil, false
	}
	for i, c := range peerCerts {
		if !bytes.Equal(c.Raw, p.s.certs[i]) {
			return nil, false
		}
	}
	p.peerCerts = slices.Clone(peerCerts)
	return p, true
}

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

// Serialized form (all lengths big-endian):
//
//	vers u16 || cipher_suite u16 || created_at u64 || master<u8> ||
//	certs<u24> of cert<u24> || server_name<u16> || server_cert<u8>

func (s *sessionState) marshal() ([]byte, error) {
	return s.appendTo(make([]byte, 0, s.size()))
}

// size is the length of the serialized state.
func (s *sessionState) size() int {
	n := 2 + 2 + 8 + 1 + len(s.master) + 3 + 2 + len(s.serverName) + 1 + len(s.serverCert)
	for _, c := range s.certs {
		n += 3 + len(c)
	}
	return n
}

// appendTo appends the serialized state to b (by hand: a ticket is sealed
// in every ticket handshake, resumed ones included).
func (s *sessionState) appendTo(b []byte) ([]byte, error) {
	certsLen := s.size() - (2 + 2 + 8 + 1 + len(s.master) + 3 + 2 + len(s.serverName) + 1 + len(s.serverCert))
	if len(s.master) > 0xff || len(s.serverCert) > 0xff || len(s.serverName) > 0xffff || certsLen > 0xffffff {
		return nil, errors.New("tlcp: session state too large")
	}
	b = binary.BigEndian.AppendUint16(b, s.vers)
	b = binary.BigEndian.AppendUint16(b, s.cipherSuite)
	b = binary.BigEndian.AppendUint64(b, s.createdAt)
	b = append(b, byte(len(s.master)))
	b = append(b, s.master...)
	b = append(b, byte(certsLen>>16), byte(certsLen>>8), byte(certsLen))
	for _, c := range s.certs {
		b = append(b, byte(len(c)>>16), byte(len(c)>>8), byte(len(c)))
		b = append(b, c...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.serverName)))
	b = append(b, s.serverName...)
	b = append(b, byte(len(s.serverCert)))
	return append(b, s.serverCert...), nil
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
	// What the server's certificates were verified for (ClientHandshake
	// checks them against the Config's before resuming): the ServerName,
	// the RootCAs pool (nil with verification off, or the system roots)
	// and the window in which their chains are valid.
	serverName            string
	roots                 *smx509.CertPool
	validFrom, validUntil time.Time
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

// sealTicket encrypts a session state with the newest ticket key and
// appends the ticket to dst; scratch is space for the serialized state.
func sealTicket(dst []byte, src ticket.Source, s *sessionState, scratch []byte) ([]byte, error) {
	b, err := s.appendTo(scratch[:0])
	if err != nil {
		return nil, err
	}
	out, err := ticket.Seal(dst, src, ticket.TLCP, b)
	clear(b) // the master secret, in the clear
	return out, err
}

// openTicket decrypts and parses a ticket. reason is "" on success, else
// TicketReasonUndecryptable or TicketReasonMalformed; stale says an older
// key opened it.
func openTicket(src ticket.Source, t []byte, s *sessionState) (stale bool, reason string) {
	b, ok, stale := ticket.Open(src, ticket.TLCP, t)
	if !ok {
		return false, TicketReasonUndecryptable
	}
	if !s.unmarshal(b) {
		return false, TicketReasonMalformed
	}
	return stale, ""
}
