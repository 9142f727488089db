package handshake

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Remote key server: SM2 private keys live in a separate process (or host);
// gmproxy sends it the private-key operations of its handshakes. The
// transport is any net.Listener / dialer pair — a Unix socket with file
// permissions, or TCP with mutual TLS (crypto/tls with
// RequireAndVerifyClientCert on the server and a client certificate on the
// client). RemoteKey implements smkey.ContextSigner, ContextDecrypter and
// KeyAgreement, so it can be used directly or behind the Offload engine.
//
// Wire format, both directions: uint32 length (big endian, at most
// keyServerMaxFrame) followed by that many bytes.
//
//	request:  op (1) || key ID (32) || payload
//	response: status (1: 0 ok, 1 error) || result, or an error message
//
// The key ID is SM3 of the key's PKIX SubjectPublicKeyInfo. Payloads:
//
//	sign:          e (32): the SM2 digest SM3(Z_A || M), computed by the client
//	decrypt:       SM2 ciphertext (ASN.1, C1C3C2)
//	key_agreement: ephemeral private key (32) || peer static (65) ||
//	               peer ephemeral (65) || responder (1) || key length (2) ||
//	               uid (u16 length-prefixed) || peer uid (u16 length-prefixed)
//
// The ephemeral private key of a TLCP ECDHE handshake crosses the channel
// (the static key never does): protect the channel accordingly.
const keyServerMaxFrame = 16 << 10

const (
	keyOpSign         = 1
	keyOpDecrypt      = 2
	keyOpKeyAgreement = 3
)

// KeyID returns the identifier of a public key in the key-server protocol.
func KeyID(pub crypto.PublicKey) ([32]byte, error) {
	der, err := smx509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [32]byte{}, err
	}
	return sm3.Sum(der), nil
}

// KeyServer answers key-server requests for its SM2 keys.
type KeyServer struct {
	// Logger receives one line per failed connection (nil: none).
	Logger *slog.Logger
	// IdleTimeout closes a client connection idle this long (default 5m).
	IdleTimeout time.Duration

	mu   sync.RWMutex
	keys map[[32]byte]*sm2.PrivateKey

	// Connection tracking for Shutdown.
	cmu       sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]bool // true while an operation runs
	closing   bool
	wg        sync.WaitGroup
}

// SetKeys replaces every key the server holds with keys (a key server's
// reload); operations in progress finish with the key they started with.
func (s *KeyServer) SetKeys(keys []*sm2.PrivateKey) error {
	m := make(map[[32]byte]*sm2.PrivateKey, len(keys))
	for _, k := range keys {
		id, err := KeyID(k.Public())
		if err != nil {
			return err
		}
		m[id] = k
	}
	s.mu.Lock()
	s.keys = m
	s.mu.Unlock()
	return nil
}

// Len returns the number of keys the server holds.
func (s *KeyServer) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.keys)
}

// Shutdown stops accepting, lets the operations in progress finish and
// closes every connection; when ctx ends first, the remaining connections
// are closed at once and ctx's error is returned.
func (s *KeyServer) Shutdown(ctx context.Context) error {
	s.cmu.Lock()
	s.closing = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c, busy := range s.conns {
		if !busy {
			// Wakes the connection's read: it ends without a request.
			c.SetReadDeadline(time.Unix(1, 0))
		}
	}
	s.cmu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.cmu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.cmu.Unlock()
		<-done
		return ctx.Err()
	}
}

// track registers c (add) or forgets it; it reports false when the
// server is shutting down.
func (s *KeyServer) track(c net.Conn, add bool) bool {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.closing {
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]bool{}
	}
	s.conns[c] = false
	s.wg.Add(1)
	return true
}

// setBusy marks c as running an operation; it reports false when the
// server is shutting down and c should close instead.
func (s *KeyServer) setBusy(c net.Conn, busy bool) bool {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.closing && !busy {
		return false
	}
	s.conns[c] = busy
	return true
}

// AddKey registers an SM2 private key and returns its ID.
func (s *KeyServer) AddKey(k *sm2.PrivateKey) ([32]byte, error) {
	id, err := KeyID(k.Public())
	if err != nil {
		return id, err
	}
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[[32]byte]*sm2.PrivateKey{}
	}
	s.keys[id] = k
	s.mu.Unlock()
	return id, nil
}

// Serve accepts connections on ln until it is closed (or Shutdown).
func (s *KeyServer) Serve(ln net.Listener) error {
	s.cmu.Lock()
	if s.closing {
		s.cmu.Unlock()
		ln.Close()
		return nil
	}
	if s.listeners == nil {
		s.listeners = map[net.Listener]struct{}{}
	}
	s.listeners[ln] = struct{}{}
	s.cmu.Unlock()
	defer func() {
		s.cmu.Lock()
		delete(s.listeners, ln)
		s.cmu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		if !s.track(c, true) {
			c.Close()
			continue
		}
		go func() {
			defer s.wg.Done()
			defer s.track(c, false)
			s.serveConn(c)
		}()
	}
}

func (s *KeyServer) serveConn(c net.Conn) {
	defer c.Close()
	idle := s.IdleTimeout
	if idle <= 0 {
		idle = 5 * time.Minute
	}
	for {
		c.SetReadDeadline(time.Now().Add(idle))
		s.cmu.Lock()
		closing := s.closing
		s.cmu.Unlock()
		if closing {
			return
		}
		req, err := readFrame(c)
		if err != nil {
			if !errors.Is(err, io.EOF) && s.Logger != nil {
				s.Logger.Debug("key server connection", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		if !s.setBusy(c, true) {
			return
		}
		out, err := s.handle(req)
		var resp []byte
		if err != nil && s.Logger != nil {
			s.Logger.Debug("key server operation failed", "remote", c.RemoteAddr().String(), "err", err)
		}
		if err != nil {
			resp = append([]byte{1}, err.Error()...)
		} else {
			resp = append([]byte{0}, out...)
		}
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if err := writeFrame(c, resp); err != nil {
			return
		}
		if !s.setBusy(c, false) {
			return
		}
	}
}

func (s *KeyServer) handle(req []byte) ([]byte, error) {
	if len(req) < 33 {
		return nil, errors.New("short request")
	}
	op := req[0]
	var id [32]byte
	copy(id[:], req[1:33])
	p := req[33:]
	s.mu.RLock()
	k := s.keys[id]
	s.mu.RUnlock()
	if k == nil {
		return nil, errors.New("unknown key")
	}
	ctx := context.Background()
	switch op {
	case keyOpSign:
		if len(p) != sm3.Size {
			return nil, errors.New("sign: digest must be 32 bytes")
		}
		// Not SM2SignerOption: gmsm signs p as the digest e.
		return k.Sign(nil, p, crypto.Hash(0))
	case keyOpDecrypt:
		return k.Decrypt(nil, p, nil)
	case keyOpKeyAgreement:
		a, err := parseKeyAgreement(p)
		if err != nil {
			return nil, err
		}
		return smkey.LocalKeyAgreement{Key: k}.SM2KeyAgree(ctx, a.eph, a.peerStatic, a.peerEph, a.responder, a.keyLen, a.uid, a.peerUID)
	}
	return nil, fmt.Errorf("unknown operation %d", op)
}

type keyAgreementArgs struct {
	eph          *ecdh.PrivateKey
	peerStatic   *ecdh.PublicKey
	peerEph      *ecdh.PublicKey
	responder    bool
	keyLen       int
	uid, peerUID []byte
}

func parseKeyAgreement(p []byte) (*keyAgreementArgs, error) {
	bad := errors.New("key_agreement: malformed request")
	if len(p) < 32+65+65+1+2+2 {
		return nil, bad
	}
	var a keyAgreementArgs
	var err error
	curve := ecdh.P256()
	if a.eph, err = curve.NewPrivateKey(p[:32]); err != nil {
		return nil, bad
	}
	if a.peerStatic, err = curve.NewPublicKey(p[32:97]); err != nil {
		return nil, bad
	}
	if a.peerEph, err = curve.NewPublicKey(p[97:162]); err != nil {
		return nil, bad
	}
	a.responder = p[162] == 1
	a.keyLen = int(binary.BigEndian.Uint16(p[163:165]))
	if a.keyLen == 0 || a.keyLen > 1024 {
		return nil, bad
	}
	rest := p[165:]
	for _, dst := range []*[]byte{&a.uid, &a.peerUID} {
		if len(rest) < 2 {
			return nil, bad
		}
		n := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+n {
			return nil, bad
		}
		if n > 0 {
			*dst = rest[2 : 2+n]
		}
		rest = rest[2+n:]
	}
	if len(rest) != 0 {
		return nil, bad
	}
	return &a, nil
}

func readFrame(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > keyServerMaxFrame {
		return nil, fmt.Errorf("frame of %d bytes exceeds %d", n, keyServerMaxFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func writeFrame(w io.Writer, b []byte) error {
	if len(b) > keyServerMaxFrame {
		return errors.New("frame too large")
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err := w.Write(buf)
	return err
}

// KeyClient sends operations to a key server over a small pool of
// connections opened with Dial.
type KeyClient struct {
	// Dial opens a connection to the key server (for example a tls.Dialer
	// with a client certificate, or net.Dialer on a Unix socket).
	Dial func(ctx context.Context) (net.Conn, error)
	// MaxIdle bounds pooled idle connections (default 8; negative: none,
	// every connection closes after its operation).
	MaxIdle int
	// MaxConns bounds the operations in flight to the key server, so the
	// busy connections (idle ones are bounded by MaxIdle); an operation
	// beyond it waits, bounded by its context and Timeout. 0 means
	// unbounded.
	MaxConns int
	// Timeout bounds one operation (connecting included), within the
	// caller's context. 0 means only the caller's context (30 s when it has
	// no deadline).
	Timeout time.Duration

	once  sync.Once
	idle  chan net.Conn
	slots chan struct{} // nil when MaxConns is 0
}

func (c *KeyClient) pool() chan net.Conn {
	c.once.Do(func() {
		n := c.MaxIdle
		switch {
		case n == 0:
			n = 8
		case n < 0:
			n = 0
		}
		if c.MaxConns > 0 {
			n = min(n, c.MaxConns)
			c.slots = make(chan struct{}, c.MaxConns)
		}
		c.idle = make(chan net.Conn, n)
	})
	return c.idle
}

// ErrKeyServerTimeout is returned (wrapped) when an operation exceeds
// KeyClient.Timeout.
var ErrKeyServerTimeout = errors.New("key server: operation timed out")

// Close closes the pooled connections.
func (c *KeyClient) Close() {
	p := c.pool()
	for {
		select {
		case conn := <-p:
			conn.Close()
		default:
			return
		}
	}
}

// call runs one request, bounded by ctx and c.Timeout. Operations are
// idempotent, so one that fails on a pooled connection (the key server
// may have closed it) is retried once on a new connection.
func (c *KeyClient) call(ctx context.Context, op byte, id [32]byte, payload []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	parent := ctx
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, ErrKeyServerTimeout)
		defer cancel()
	}
	pool := c.pool()
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, c.ctxErr(parent, ctx, "waiting for a connection")
		}
		defer func() { <-c.slots }()
	}
	for attempt := 0; ; attempt++ {
		var conn net.Conn
		pooled := false
		if attempt == 0 {
			select {
			case conn = <-pool:
				pooled = true
			default:
			}
		}
		if conn == nil {
			var err error
			if conn, err = c.Dial(ctx); err != nil {
				if expired(ctx, err) {
					return nil, c.ctxErr(parent, ctx, "connecting")
				}
				return nil, fmt.Errorf("key server: %w", err)
			}
		}
		out, err := c.roundTrip(ctx, conn, op, id, payload)
		if err != nil && expired(ctx, err) {
			return nil, c.ctxErr(parent, ctx, "waiting for the answer")
		}
		if err == nil || !pooled || errors.Is(err, errKeyServerAnswer) {
			return out, err
		}
	}
}

// expired reports whether err comes from ctx ending: ctx is done, or its
// deadline (also set on the connection) passed just before ctx noticed.
func expired(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	_, ok := ctx.Deadline()
	return ok && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded))
}

// ctxErr is the error of an operation whose context ended: the caller's
// own error when its context ended (or its deadline came first), else
// ErrKeyServerTimeout.
func (c *KeyClient) ctxErr(parent, ctx context.Context, what string) error {
	if err := parent.Err(); err != nil {
		return err
	}
	if c.Timeout <= 0 {
		return context.DeadlineExceeded
	}
	if pd, ok := parent.Deadline(); ok {
		if d, _ := ctx.Deadline(); !pd.After(d) {
			return context.DeadlineExceeded
		}
	}
	return fmt.Errorf("%w after %s (%s)", ErrKeyServerTimeout, c.Timeout, what)
}

// errKeyServerAnswer marks an error the key server answered with (the
// connection is fine; retrying would not help).
var errKeyServerAnswer = errors.New("key server")

// roundTrip sends one request on conn and reads the answer; conn goes back
// to the pool after a complete exchange and is closed otherwise.
func (c *KeyClient) roundTrip(ctx context.Context, conn net.Conn, op byte, id [32]byte, payload []byte) ([]byte, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(30 * time.Second)
	}
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	req := make([]byte, 0, 33+len(payload))
	req = append(req, op)
	req = append(req, id[:]...)
	req = append(req, payload...)
	err := writeFrame(conn, req)
	var resp []byte
	if err == nil {
		resp, err = readFrame(conn)
	}
	if !stop() || err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("key server: %w", err)
	}
	conn.SetDeadline(time.Time{})
	select {
	case c.pool() <- conn:
	default:
		conn.Close()
	}
	if len(resp) == 0 {
		return nil, fmt.Errorf("%w: empty response", errKeyServerAnswer)
	}
	if resp[0] != 0 {
		msg := resp[1:]
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return nil, fmt.Errorf("%w: %q", errKeyServerAnswer, msg)
	}
	return resp[1:], nil
}

// RemoteKey is an SM2 private key held by a key server.
type RemoteKey struct {
	client *KeyClient
	id     [32]byte
	pub    *ecdsa.PublicKey
}

// NewRemoteKey returns the key of the key server whose public key is pub
// (typically taken from the certificate).
func NewRemoteKey(c *KeyClient, pub *ecdsa.PublicKey) (*RemoteKey, error) {
	id, err := KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &RemoteKey{client: c, id: id, pub: pub}, nil
}

var (
	_ smkey.ContextSigner    = (*RemoteKey)(nil)
	_ smkey.ContextDecrypter = (*RemoteKey)(nil)
	_ smkey.KeyAgreement     = (*RemoteKey)(nil)
)

// Public implements crypto.Signer.
func (k *RemoteKey) Public() crypto.PublicKey { return k.pub }

// KeyLocation implements KeyLocator: KeyRemote.
func (k *RemoteKey) KeyLocation() string { return KeyRemote }

// ID returns the key's identifier in the key-server protocol.
func (k *RemoteKey) ID() [32]byte { return k.id }

// Sign implements crypto.Signer.
func (k *RemoteKey) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return k.SignContext(context.Background(), rand, digest, opts)
}

// SignContext implements smkey.ContextSigner. With an SM2SignerOption that
// asks for GM signing (as TLCP and TLS 1.3-SM use), the digest
// e = SM3(Z_A || msg) is computed here with the option's ID; otherwise
// digest must already be the 32-byte e.
func (k *RemoteKey) SignContext(ctx context.Context, _ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	e := digest
	if o, ok := opts.(*sm2.SM2SignerOption); ok {
		uid, force, err := sm2OptionFields(o)
		if err != nil {
			return nil, err
		}
		if force {
			if e, err = sm2.CalculateSM2Hash(k.pub, digest, uid); err != nil {
				return nil, err
			}
		}
	}
	return k.client.call(ctx, keyOpSign, k.id, e)
}

// sm2OptionFields reads the ID and mode of an SM2SignerOption, whose fields
// gmsm does not export.
func sm2OptionFields(o *sm2.SM2SignerOption) (uid []byte, force bool, err error) {
	v := reflect.ValueOf(o).Elem()
	u, f := v.FieldByName("uid"), v.FieldByName("forceGMSign")
	if !u.IsValid() || u.Kind() != reflect.Slice || !f.IsValid() || f.Kind() != reflect.Bool {
		return nil, false, errors.New("key server: unsupported sm2.SM2SignerOption layout")
	}
	return append([]byte(nil), u.Bytes()...), f.Bool(), nil
}

// Decrypt implements crypto.Decrypter.
func (k *RemoteKey) Decrypt(rand io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	return k.DecryptContext(context.Background(), rand, msg, opts)
}

// DecryptContext implements smkey.ContextDecrypter (ASN.1 ciphertexts,
// the TLCP encoding; opts must be nil).
func (k *RemoteKey) DecryptContext(ctx context.Context, _ io.Reader, msg []byte, opts crypto.DecrypterOpts) ([]byte, error) {
	if opts != nil {
		return nil, errors.New("key server: only default SM2 decryption options are supported")
	}
	return k.client.call(ctx, keyOpDecrypt, k.id, msg)
}

// SM2KeyAgree implements smkey.KeyAgreement.
func (k *RemoteKey) SM2KeyAgree(ctx context.Context, ephemeral *ecdh.PrivateKey, peerStatic, peerEphemeral *ecdh.PublicKey, responder bool, keyLen int, uid, peerUID []byte) ([]byte, error) {
	if ephemeral == nil || peerStatic == nil || peerEphemeral == nil || keyLen <= 0 || keyLen > 1024 || len(uid) > 1024 || len(peerUID) > 1024 {
		return nil, errors.New("key server: bad key agreement arguments")
	}
	p := make([]byte, 0, 32+65+65+1+2+4+len(uid)+len(peerUID))
	p = append(p, ephemeral.Bytes()...)
	p = append(p, peerStatic.Bytes()...)
	p = append(p, peerEphemeral.Bytes()...)
	if responder {
		p = append(p, 1)
	} else {
		p = append(p, 0)
	}
	p = binary.BigEndian.AppendUint16(p, uint16(keyLen))
	p = binary.BigEndian.AppendUint16(p, uint16(len(uid)))
	p = append(p, uid...)
	p = binary.BigEndian.AppendUint16(p, uint16(len(peerUID)))
	p = append(p, peerUID...)
	return k.client.call(ctx, keyOpKeyAgreement, k.id, p)
}
