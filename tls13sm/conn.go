package tls13sm

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/record"
)

// Record content types (RFC 8446 §5.1), the record core's.
const (
	recordTypeChangeCipherSpec uint8 = record.TypeChangeCipherSpec
	recordTypeAlert            uint8 = record.TypeAlert
	recordTypeHandshake        uint8 = record.TypeHandshake
	recordTypeApplicationData  uint8 = record.TypeApplicationData
)

// halfConn is one direction of the record layer: the AEAD, its static IV
// and the sequence number (RFC 8446 §5.3).
type halfConn struct {
	sync.Mutex
	err    error
	aead   cipher.AEAD
	suite  *cipherSuite
	seq    uint64
	key    [keyLen]byte // scratch while the AEAD is made; zeroed after
	iv     [ivLen]byte
	nonce  [ivLen]byte
	secret trafficSecret
}

// setTrafficSecret installs keys derived from secret (RFC 8446 §7.3) and
// resets the sequence number.
func (hc *halfConn) setTrafficSecret(ks *keySchedule, suite *cipherSuite, secret *trafficSecret) error {
	key := hc.key[:]
	ks.trafficKeys(key, hc.iv[:], secret)
	aead, err := suite.aead(key)
	clear(key)
	if err != nil {
		return err
	}
	hc.secret = *secret
	hc.aead, hc.suite, hc.seq = aead, suite, 0
	return nil
}

// setKeys installs a precomputed key and IV for secret.
func (hc *halfConn) setKeys(suite *cipherSuite, secret *trafficSecret, key, iv []byte) error {
	aead, err := suite.aead(key[:keyLen])
	if err != nil {
		return err
	}
	copy(hc.iv[:], iv[:ivLen])
	hc.secret = *secret
	hc.aead, hc.suite, hc.seq = aead, suite, 0
	return nil
}

// setAEAD installs an AEAD already made for secret, with its IV.
func (hc *halfConn) setAEAD(suite *cipherSuite, secret *trafficSecret, aead cipher.AEAD, iv []byte) {
	copy(hc.iv[:], iv[:ivLen])
	hc.secret = *secret
	hc.aead, hc.suite, hc.seq = aead, suite, 0
}

// makeNonce computes iv XOR (0^32 || seq) into hc.nonce.
func (hc *halfConn) makeNonce() []byte {
	hc.nonce = hc.iv
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], hc.seq)
	for i := 0; i < 8; i++ {
		hc.nonce[4+i] ^= s[i]
	}
	return hc.nonce[:]
}

// keyUpdateAfterRecords is how many records a write key encrypts before
// this side moves to the next one with KeyUpdate (§4.6.3). RFC 8446 §5.5
// bounds the records one AES-GCM key may protect at 2^24.5; the analysis
// depends on the 128-bit block and so holds for SM4-GCM (RFC 8998 §3), and
// the CCM suite's bound is lower (2^23.5 in RFC 9147 §4.5.3 and the CFRG's
// AEAD limits). 2^23 stays under both for either suite. A variable for the
// tests.
var keyUpdateAfterRecords uint64 = 1 << 23

func (hc *halfConn) incSeq() error {
	hc.seq++
	if hc.seq == 0 {
		return errors.New("tls13sm: sequence number wrapped")
	}
	return nil
}

// Conn is a TLS 1.3-SM connection.
type Conn struct {
	core     record.Conn // connection, buffers, flight, close and handshake-once state
	isClient bool
	config   *Config

	// state reported by ConnectionState; written during the handshake.
	cipherSuite      uint16
	group            uint16
	didResume        bool
	didHRR           bool
	serverName       string
	alpn             string
	peerCertificates []*smx509.Certificate
	verifiedChains   [][]*smx509.Certificate
	// serverTrust is what a client verified verifiedChains for.
	serverTrust serverTrust
	client      clientIdentity // server: the client certificate, from the handshake or the ticket

	// client: resumption master secret and cache key for NewSessionTicket.
	resumptionSecret resumptionMasterSecret
	sessionCacheKey  string

	in, out halfConn

	outBuf    []byte
	buffering bool // handshake records go to core.Flight

	// ks is the key schedule scratch of post-handshake key updates.
	ks *keySchedule

	earlyDataSkip      int  // bytes of undecryptable early data still to skip
	skipAppData        bool // after HRR: skip plaintext-type 23 records (rejected early data)
	ccsSeen            bool
	helloRead          bool // a server read the first ClientHello
	useless            int
	postHandshakeNoApp int

	sentHello bool // the first ClientHello record went out; guarded by out

	lastAlert     Alert
	lastAlertSet  bool
	lastAlertPeer bool

	hsStart time.Time // when the handshake started, for OnHandshake
}

// ---- net.Conn plumbing ----

// The pass-through methods and Stats are the core's (record.Conn says why
// they are declared here).

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.core.LocalAddr() }

// RemoteAddr returns the remote network address.
func (c *Conn) RemoteAddr() net.Addr { return c.core.RemoteAddr() }

// SetDeadline sets the read and write deadlines of the underlying connection.
func (c *Conn) SetDeadline(t time.Time) error { return c.core.SetDeadline(t) }

// SetReadDeadline sets the read deadline of the underlying connection.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.core.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline of the underlying connection.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.core.SetWriteDeadline(t) }

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.core.Raw }

// Buffered is the number of bytes received that Read has not returned yet
// (decrypted, or not yet decrypted): a client that pools idle connections
// drops one with any (its server sent what nobody asked for), which a peek
// at the socket alone does not see.
func (c *Conn) Buffered() int { return c.core.Buffered() }

// Stats returns the connection's traffic counters.
func (c *Conn) Stats() Stats { return c.core.Stats() }

// ---- errors and alerts ----

// localAlert records that this side is sending alert a because of err.
func (c *Conn) sendAlertLocked(a Alert) error {
	// The alert joins a flight being built, which goes out with it.
	err := c.core.SendAlert(a, record.FlushFlight, c.writeAlertLocked)
	c.buffering = false
	if err != nil {
		c.out.setErrorLocked(err) // a failed flight write (a failed record write is latched already)
	}
	if a == AlertCloseNotify {
		return err
	}
	if !c.lastAlertSet {
		c.lastAlert, c.lastAlertSet, c.lastAlertPeer = a, true, false
	}
	return c.out.setErrorLocked(&AlertError{Alert: a})
}

func (hc *halfConn) setErrorLocked(err error) error {
	if hc.err == nil {
		hc.err = err
	}
	return hc.err
}

// sendAlert sends a fatal alert and returns an *AlertError with cause err.
func (c *Conn) sendAlert(a Alert, err error) error {
	c.out.Lock()
	c.sendAlertLocked(a)
	c.out.Unlock()
	if err == nil {
		return &AlertError{Alert: a}
	}
	return &AlertError{Alert: a, Err: fmt.Errorf("tls13sm: %w", err)}
}

// fail is the handshake's way to abort: it sends a and returns an error.
func (c *Conn) fail(a Alert, format string, args ...any) error {
	return c.sendAlert(a, fmt.Errorf(format, args...))
}

// ---- reading ----

// readFailed records a transport read error. A timeout (a passed read
// deadline, which net/http uses to abort its background read) is not sticky:
// the bytes read so far stay buffered and the connection stays usable, as
// with crypto/tls. Every other error is permanent.
func (c *Conn) readFailed(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return c.in.setErrorLocked(err)
}

// readRecord reads, decrypts and dispatches one record. Handshake data goes
// to c.core.Hand, application data to c.core.Input. It returns an error once the
// connection failed.
func (c *Conn) readRecord() error {
	if c.in.err != nil {
		return c.in.err
	}
	if len(c.core.Input) != 0 {
		return errors.New("tls13sm: internal error: readRecord with pending input")
	}
	typ, vers, n, err := c.core.Rd.Header(c.core.Raw)
	if err != nil {
		if err == io.EOF && (!c.core.HandshakeComplete() || c.isClient) {
			// Before the handshake ends, or on a client (RFC 8446 §6.1,
			// RFC 9112 §9.8: a response delimited by the close is
			// complete only after close_notify), the stream's end without
			// close_notify is a truncation.
			err = io.ErrUnexpectedEOF
		}
		return c.readFailed(err)
	}
	// legacy_record_version: 0x0301 is allowed on the first ClientHello,
	// 0x0303 everywhere (§5.1). The major byte must be 3.
	if vers>>8 != 3 {
		return c.in.setErrorLocked(c.fail(AlertProtocolVersion, "record version %#04x", vers))
	}
	// Under no keys a record is plaintext (2^14 bytes at most, §5.1), but
	// for the 0-RTT records a server skips after a HelloRetryRequest
	// (§4.2.10), which are protected (2^14 + 256, §5.2).
	protected := c.in.aead != nil || typ == recordTypeApplicationData && c.skipAppData
	if n > maxCiphertext || (!protected && n > maxPlaintext) {
		return c.in.setErrorLocked(c.fail(AlertRecordOverflow, "record of %d bytes", n))
	}
	rec, err := c.core.Rd.Record(c.core.Raw, n)
	if err != nil {
		return c.readFailed(err)
	}
	payload := rec[recordHeaderLen:]

	// §5: a ChangeCipherSpec of one byte 0x01 may appear during the
	// handshake, after the first ClientHello, and is dropped; anything
	// else is unexpected, one between the records of a handshake message
	// too (§5.1).
	if typ == recordTypeChangeCipherSpec {
		if c.core.HandshakeComplete() || n != 1 || payload[0] != 1 || c.ccsSeen && c.isClient ||
			len(c.core.Hand) != 0 || !c.isClient && !c.helloRead {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "unexpected ChangeCipherSpec"))
		}
		c.ccsSeen = true
		return c.useless1()
	}

	// A plaintext alert is accepted under keys only by a server during the
	// handshake before any protected record came (a client that failed on
	// the ServerHello sends one before deriving keys); a client's peer
	// protects everything after its ServerHello (§5.2, §6).
	plainAlertOK := typ == recordTypeAlert && !c.isClient && !c.core.HandshakeComplete() && c.in.seq == 0
	if c.in.aead != nil && !plainAlertOK {
		if typ != recordTypeApplicationData {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "plaintext record of type %d after keys were set", typ))
		}
		if n < aeadOver+1 {
			return c.in.setErrorLocked(c.fail(AlertBadRecordMAC, "record too short"))
		}
		plain, err := c.in.aead.Open(payload[:0], c.in.makeNonce(), payload, rec[:recordHeaderLen])
		if err != nil {
			// §4.2.10: a server that rejected early data skips what it cannot decrypt.
			if c.earlyDataSkip >= n {
				c.earlyDataSkip -= n
				return nil
			}
			return c.in.setErrorLocked(c.fail(AlertBadRecordMAC, "record authentication failed"))
		}
		c.earlyDataSkip = 0
		if err := c.in.incSeq(); err != nil {
			return c.in.setErrorLocked(c.sendAlert(AlertInternalError, err))
		}
		// §5.4: the whole TLSInnerPlaintext, padding included, is at
		// most 2^14 + 1 bytes.
		if len(plain) > maxPlaintext+1 {
			return c.in.setErrorLocked(c.fail(AlertRecordOverflow, "inner plaintext of %d bytes", len(plain)))
		}
		// Strip padding: the content type is the last non-zero byte (§5.4).
		i := len(plain) - 1
		for i >= 0 && plain[i] == 0 {
			i--
		}
		if i < 0 {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "record with no content type"))
		}
		typ, payload = plain[i], plain[:i]
	} else if typ == recordTypeApplicationData && c.skipAppData && n > aeadOver && c.earlyDataSkip >= n {
		// Early data sent before a HelloRetryRequest's second ClientHello
		// (protected: a shorter record is not early data).
		c.earlyDataSkip -= n
		return nil
	}

	switch typ {
	case recordTypeAlert:
		// §5.1: no record of another type between the records of a
		// handshake message.
		if len(c.core.Hand) != 0 {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "alert inside a handshake message"))
		}
		if len(payload) != 2 {
			return c.in.setErrorLocked(c.fail(AlertDecodeError, "alert of %d bytes", len(payload)))
		}
		a := Alert(payload[1])
		if a == AlertCloseNotify {
			c.in.setErrorLocked(io.EOF)
			return io.EOF
		}
		if a == AlertUserCanceled && payload[0] == 1 {
			return c.useless1()
		}
		if !c.lastAlertSet {
			c.lastAlert, c.lastAlertSet, c.lastAlertPeer = a, true, true
		}
		return c.in.setErrorLocked(&AlertError{Alert: a, Remote: true})
	case recordTypeHandshake:
		if len(payload) == 0 {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "empty handshake record"))
		}
		if len(c.core.Hand)+len(payload) > maxHandshakeMsg+4 {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "handshake data too large"))
		}
		c.core.Hand = append(c.core.Hand, payload...)
		c.useless = 0
		return nil
	case recordTypeApplicationData:
		if !c.core.HandshakeComplete() {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "application data before the handshake completed"))
		}
		if len(c.core.Hand) != 0 {
			return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "application data inside a handshake message"))
		}
		if len(payload) == 0 {
			return c.useless1()
		}
		c.useless = 0
		c.postHandshakeNoApp = 0
		c.core.Counters.RecordIn()
		c.core.Input = payload
		return nil
	default:
		return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "record of unknown type %d", typ))
	}
}

func (c *Conn) useless1() error {
	c.useless++
	if c.useless > maxUselessRecords {
		return c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "too many records without content"))
	}
	return nil
}

// readHandshakeBytes returns the next complete handshake message (a copy).
func (c *Conn) readHandshakeBytes() ([]byte, error) { return c.readHandshakeBytesInto(nil) }

// readHandshakeBytesInto returns the next complete handshake message,
// copied into dst's storage when it has room.
func (c *Conn) readHandshakeBytesInto(dst []byte) ([]byte, error) {
	for len(c.core.Hand) < 4 {
		if err := c.readRecord(); err != nil {
			return nil, err
		}
		if len(c.core.Input) != 0 {
			return nil, c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "application data during handshake"))
		}
	}
	n := int(c.core.Hand[1])<<16 | int(c.core.Hand[2])<<8 | int(c.core.Hand[3])
	if n > maxHandshakeMsg {
		return nil, c.in.setErrorLocked(c.fail(AlertIllegalParameter, "handshake message of %d bytes", n))
	}
	for len(c.core.Hand) < 4+n {
		if err := c.readRecord(); err != nil {
			return nil, err
		}
		if len(c.core.Input) != 0 {
			return nil, c.in.setErrorLocked(c.fail(AlertUnexpectedMessage, "application data inside a handshake message"))
		}
	}
	msg := append(dst[:0], c.core.Hand[:4+n]...)
	c.core.Hand = c.core.Hand[:copy(c.core.Hand, c.core.Hand[4+n:])]
	return msg, nil
}

// checkKeyChangeBoundary enforces §5.1: no handshake message may straddle a
// key change.
func (c *Conn) checkKeyChangeBoundary() error {
	if len(c.core.Hand) != 0 {
		return c.fail(AlertUnexpectedMessage, "handshake data left over at a key change")
	}
	return nil
}

// ---- writing ----

// writeRecordLocked writes data as records of type typ, encrypted when keys
// are set. c.out must be held.
func (c *Conn) writeRecordLocked(typ uint8, data []byte) error {
	if c.out.err != nil {
		return c.out.err
	}
	for first := true; first || len(data) > 0; first = false {
		if typ == recordTypeApplicationData && c.out.seq >= keyUpdateAfterRecords && c.core.HandshakeComplete() {
			// §5.5: the key has protected as many records as it safely
			// can; the next ones go under the next key. The KeyUpdate
			// is written (or added to the flight) before this record.
			if err := c.updateWriteKeyLocked(false); err != nil {
				return err
			}
		}
		m := len(data)
		if m > maxPlaintext {
			m = maxPlaintext
		}
		need := recordHeaderLen + m + 1 + aeadOver
		var rec, fb []byte
		if c.buffering {
			// Build the record in place at the end of the flight.
			fb = c.core.Flight.Room(need)
			rec = fb[len(fb) : len(fb)+recordHeaderLen]
		} else {
			if cap(c.outBuf) < need {
				switch {
				case m == maxPlaintext || need > 4096:
					need = recordHeaderLen + maxPlaintext + 1 + aeadOver
				case need > 1024:
					need = 4096
				default:
					need = 1024
				}
				c.outBuf = make([]byte, 0, need)
			}
			rec = c.outBuf[:recordHeaderLen]
		}
		if c.out.aead == nil || typ == recordTypeChangeCipherSpec {
			v := uint16(0x0303)
			if typ == recordTypeHandshake && c.isClient && !c.sentHello {
				v = 0x0301
				c.sentHello = true
			}
			rec[0], rec[1], rec[2] = typ, byte(v>>8), byte(v)
			rec[3], rec[4] = byte(m>>8), byte(m)
			rec = append(rec, data[:m]...)
		} else {
			l := m + 1 + aeadOver
			rec[0], rec[1], rec[2] = recordTypeApplicationData, 3, 3
			rec[3], rec[4] = byte(l>>8), byte(l)
			rec = append(rec, data[:m]...)
			rec = append(rec, typ)
			rec = c.out.aead.Seal(rec[:recordHeaderLen], c.out.makeNonce(), rec[recordHeaderLen:], rec[:recordHeaderLen])
			if err := c.out.incSeq(); err != nil {
				return c.out.setErrorLocked(err)
			}
		}
		data = data[m:]
		if typ == recordTypeApplicationData {
			c.core.Counters.Out(1, 0)
		}
		if c.buffering {
			c.core.Flight.Set(fb[:len(fb)+len(rec)])
			continue
		}
		if _, err := c.core.Raw.Write(rec); err != nil {
			return c.out.setErrorLocked(err)
		}
	}
	return nil
}

// writeAlertLocked writes (or adds to the flight) an alert record with body.
func (c *Conn) writeAlertLocked(body []byte) error {
	return c.writeRecordLocked(recordTypeAlert, body)
}

// flush writes the coalesced flight and returns its buffer to the pool.
func (c *Conn) flush() error {
	if err := c.core.Flight.Flush(c.core.Raw); err != nil {
		return c.out.setErrorLocked(err)
	}
	return nil
}

// writeHandshake sends a handshake message and adds it to the transcript.
// Each message gets its own record(s): packing several messages into one
// record (allowed by RFC 8446 §5.1) breaks GmSSL 3.x's tls13_client, which
// reads exactly one handshake message per record (measured: it fails in
// tls13_recv_encrypted_extensions); records of one flight are still
// written to the socket together (buffering).
func (c *Conn) writeHandshake(msg []byte, transcript interface{ Write([]byte) (int, error) }) error {
	c.out.Lock()
	defer c.out.Unlock()
	if h := c.config.testHandshakeOut; h != nil {
		return c.writeRewrittenLocked(msg, transcript, h)
	}
	if transcript != nil {
		transcript.Write(msg)
	}
	return c.writeRecordLocked(recordTypeHandshake, msg)
}

// writeRewrittenLocked is writeHandshake for a misbehaving endpoint (tests).
func (c *Conn) writeRewrittenLocked(msg []byte, transcript interface{ Write([]byte) (int, error) }, rewrite func([]byte) []byte) error {
	before := c.config.testRewriteBeforeHash
	if before {
		msg = rewrite(slices.Clone(msg))
	}
	if transcript != nil {
		transcript.Write(msg)
	}
	if !before {
		msg = rewrite(slices.Clone(msg))
	}
	if len(msg) == 0 {
		return nil
	}
	return c.writeRecordLocked(recordTypeHandshake, msg)
}

// writeCCS sends the middlebox-compatibility ChangeCipherSpec (§D.4).
func (c *Conn) writeCCS() error {
	c.out.Lock()
	defer c.out.Unlock()
	return c.writeRecordLocked(recordTypeChangeCipherSpec, []byte{1})
}

// Write writes application data, handshaking first if needed.
func (c *Conn) Write(b []byte) (int, error) {
	return c.writing(func() (int, error) {
		if len(b) == 0 {
			return 0, c.out.err
		}
		if err := c.writeRecordLocked(recordTypeApplicationData, b); err != nil {
			return 0, err
		}
		c.core.Counters.Out(0, len(b))
		return len(b), nil
	})
}

// writing runs write with the output lock held, after the checks every
// write makes: the interlock with Close, the handshake, and no
// close_notify sent.
func (c *Conn) writing(write func() (int, error)) (int, error) {
	if !c.core.BeginWrite() {
		return 0, net.ErrClosed
	}
	defer c.core.EndWrite()
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	c.out.Lock()
	defer c.out.Unlock()
	if c.core.CloseNotifySent() {
		return 0, errors.New("tls13sm: write after CloseWrite")
	}
	return write()
}

// WriteLast writes b and then close_notify in one write to the underlying
// connection: a server's last response before it closes costs one system
// call (and one wake-up of the peer) instead of two. The records are built
// in the core's flight, which the close_notify alert flushes. Afterwards
// the connection refuses writes, as after CloseWrite, and reads go on
// (the underlying connection is not half-closed); Close must still be
// called, and sends no second close_notify. A b longer than 64 KiB is
// written as Write writes it, then close_notify.
func (c *Conn) WriteLast(b []byte) (int, error) {
	if len(b) > 64<<10 {
		n, err := c.Write(b)
		if err != nil {
			return n, err
		}
		return n, c.closeNotify()
	}
	return c.writing(func() (int, error) {
		if c.out.err != nil {
			return 0, c.out.err
		}
		c.buffering = true // sendAlertLocked ends it
		if err := c.writeRecordLocked(recordTypeApplicationData, b); err != nil {
			c.buffering = false
			c.core.Flight.Drop()
			return 0, err
		}
		if err := c.core.LastNotify(func() error { return c.sendAlertLocked(AlertCloseNotify) }); err != nil {
			return 0, err
		}
		c.core.Counters.Out(0, len(b))
		return len(b), nil
	})
}

// Read reads application data, handshaking first if needed.
func (c *Conn) Read(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	return c.core.Read(b, c.readRecord, c.postHandshakeLatched)
}

// postHandshakeLatched is handlePostHandshake whose failure ends the input
// side for good.
func (c *Conn) postHandshakeLatched() error {
	if err := c.handlePostHandshake(); err != nil {
		return c.in.setErrorLocked(err)
	}
	return nil
}

// handlePostHandshake processes one post-handshake message (§4.6).
func (c *Conn) handlePostHandshake() error {
	msg, err := c.readHandshakeBytes()
	if err != nil {
		return err
	}
	// Each message costs a key derivation (and for a client a store in
	// a session cache other connections share) for a few bytes of the
	// peer's: a run of them without application data is bounded.
	c.postHandshakeNoApp++
	if c.postHandshakeNoApp > maxPostHandshakeNoApp {
		return c.fail(AlertUnexpectedMessage, "too many post-handshake messages without data")
	}
	switch msg[0] {
	case typeNewSessionTicket:
		if !c.isClient {
			return c.fail(AlertUnexpectedMessage, "NewSessionTicket from a client")
		}
		var m newSessionTicketMsg
		if !m.unmarshal(msg) {
			return c.fail(AlertDecodeError, "malformed NewSessionTicket")
		}
		return c.handleNewSessionTicket(&m)
	case typeKeyUpdate:
		var m keyUpdateMsg
		if !m.unmarshal(msg) {
			if len(msg) == 5 {
				return c.fail(AlertIllegalParameter, "KeyUpdate with request_update %d", msg[4])
			}
			return c.fail(AlertDecodeError, "malformed KeyUpdate")
		}
		return c.handleKeyUpdate(&m)
	default:
		return c.fail(AlertUnexpectedMessage, "unexpected post-handshake message type %d", msg[0])
	}
}

// handleKeyUpdate implements §4.6.3: switch the read key, and answer a
// request with our own KeyUpdate.
func (c *Conn) handleKeyUpdate(m *keyUpdateMsg) error {
	if err := c.checkKeyChangeBoundary(); err != nil {
		return err
	}
	if c.ks == nil {
		c.ks = new(keySchedule)
	}
	var next trafficSecret
	c.ks.nextTrafficSecret(&next, &c.in.secret)
	if err := c.in.setTrafficSecret(c.ks, c.in.suite, &next); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	if m.updateRequested {
		c.out.Lock()
		defer c.out.Unlock()
		if c.core.CloseNotifySent() {
			return nil
		}
		return c.updateWriteKeyLocked(false)
	}
	return nil
}

// updateWriteKeyLocked sends KeyUpdate and switches the write key.
func (c *Conn) updateWriteKeyLocked(requestPeer bool) error {
	m := keyUpdateMsg{updateRequested: requestPeer}
	raw, _ := m.marshal()
	if err := c.writeRecordLocked(recordTypeHandshake, raw); err != nil {
		return err
	}
	ks := new(keySchedule)
	var next trafficSecret
	ks.nextTrafficSecret(&next, &c.out.secret)
	if err := c.out.setTrafficSecret(ks, c.out.suite, &next); err != nil {
		return c.out.setErrorLocked(err)
	}
	return nil
}

// SendKeyUpdate updates this side's write key; with requestPeer the peer is
// asked to update its own (it does so when it next reads).
func (c *Conn) SendKeyUpdate(requestPeer bool) error {
	if err := c.Handshake(); err != nil {
		return err
	}
	c.out.Lock()
	defer c.out.Unlock()
	if c.core.CloseNotifySent() {
		return errors.New("tls13sm: KeyUpdate after CloseWrite")
	}
	return c.updateWriteKeyLocked(requestPeer)
}

// ---- closing ----

// Close sends close_notify (if the handshake completed) and closes the connection.
func (c *Conn) Close() error {
	return c.core.Close(c.closeNotify)
}

// CloseWrite sends close_notify and half-closes the underlying connection
// when it supports CloseWrite.
func (c *Conn) CloseWrite() error {
	if !c.core.HandshakeComplete() {
		return errors.New("tls13sm: CloseWrite before the handshake completed")
	}
	if err := c.closeNotify(); err != nil {
		return err
	}
	if cw, ok := c.core.Raw.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *Conn) closeNotify() error {
	c.out.Lock()
	defer c.out.Unlock()
	return c.core.CloseNotify(func() error { return c.sendAlertLocked(AlertCloseNotify) })
}
