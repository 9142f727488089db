package tlcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/record"
)

// Conn is a TLCP connection, client or server side. It is a net.Conn.
type Conn struct {
	core     record.Conn // connection, buffers, flight, close and handshake-once state
	isClient bool
	config   *Config

	// State after the handshake.
	vers      uint16
	suite     *cipherSuite
	didResume bool
	// storedID[:storedIDLen] is the server's SessionStore key of the
	// connection's session (none when storedIDLen is 0), deleted on a
	// fatal alert; under storedMu (the reader and the writer may both
	// end the connection).
	storedMu         sync.Mutex
	storedID         [32]byte
	storedIDLen      int
	serverName       string
	alpn             string
	peerCertificates []*smx509.Certificate
	verifiedChains   [][]*smx509.Certificate

	// Input side.
	in                    halfConn
	useless               int  // empty records and warning alerts in a row
	ccsRead               bool // readRecord processed a ChangeCipherSpec
	renegotiationRefusals int  // ClientHellos answered with no_renegotiation
	firstH                bool // the first record has been read

	// Output side.
	out     halfConn
	outMu   sync.Mutex
	hsStart time.Time // when the handshake started, for OnHandshake

	// tlsRecordHello: the first ClientHello came in a 03 0x record.
	tlsRecordHello bool
}

var (
	smallOutPool = sync.Pool{New: func() any { b := make([]byte, 0, recordHeaderLen+maxCiphertext); return &b }}
	bigOutPool   = sync.Pool{New: func() any { b := make([]byte, 0, bigOutSize); return &b }}
)

// maxWriteChunk is how much of a Write is protected and sent at once
// (GCM: 4 records of 16 KiB; CBC: 16 records of 4 KiB side by side).
const maxWriteChunk = 64 << 10

// bigOutSize holds the records of one chunk (or a 64 KiB handshake message)
// with the worst per-record overhead.
const bigOutSize = maxWriteChunk + maxBatchRecords*(recordHeaderLen+cbcIVLen+macLen+blockLen) + 4*(recordHeaderLen+maxCiphertext-maxPlaintext)

// The net.Conn pass-through methods and Stats are the core's (record.Conn
// says why they are declared here).

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.core.LocalAddr() }

// RemoteAddr returns the remote network address.
func (c *Conn) RemoteAddr() net.Addr { return c.core.RemoteAddr() }

// SetDeadline sets the read and write deadlines of the underlying connection.
func (c *Conn) SetDeadline(t time.Time) error { return c.core.SetDeadline(t) }

// SetReadDeadline sets the read deadline of the underlying connection.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.core.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline; a timed-out Write leaves the
// connection unusable.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.core.SetWriteDeadline(t) }

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.core.Raw }

// Buffered is the number of bytes received that Read has not returned yet
// (decrypted, or not yet decrypted): a client that pools idle connections
// drops one with any (its server sent what nobody asked for), which a peek
// at the socket alone does not see.
func (c *Conn) Buffered() int { return c.core.Buffered() }

// Stats returns application-data counters.
func (c *Conn) Stats() Stats { return c.core.Stats() }

// readRecord reads and processes one record. expectCCS says a
// ChangeCipherSpec is acceptable now. It must not be called while
// application data is pending: that data is a slice of the record reader's
// buffer, which reading the next record reuses.
func (c *Conn) readRecord(expectCCS bool) error {
	if c.in.err != nil {
		return c.in.err
	}
	if len(c.core.Input) != 0 {
		return c.in.setErr(errors.New("tlcp: internal error: readRecord with pending application data"))
	}
	t, vers, n, err := c.core.Rd.Header(c.core.Raw)
	if err != nil {
		if e, ok := err.(net.Error); ok && e.Timeout() {
			return err
		}
		if err == io.ErrUnexpectedEOF {
			c.sendAlert(AlertDecodeError)
		}
		if err == io.EOF && c.isClient {
			// The stream ended without close_notify (RFC 5246 §7.2.1): a
			// truncation, which a client must not take for the end of what
			// the server sent (RFC 9112 §9.8: a response delimited by the
			// close is complete only after close_notify). A server keeps
			// io.EOF: its clients' requests delimit themselves.
			err = io.ErrUnexpectedEOF
		}
		return c.in.setErr(err)
	}
	typ := recordType(t)
	first := !c.firstH
	c.firstH = true
	if vers != VersionTLCP {
		okTLS := first && !c.isClient && c.config.AllowTLSRecordHello && typ == recordTypeHandshake && (vers == 0x0301 || vers == 0x0303)
		if !okTLS {
			c.sendAlert(AlertProtocolVersion)
			return c.in.setErr(errorf(AlertProtocolVersion, "record version %04x", vers))
		}
		c.tlsRecordHello = true
	}
	switch typ {
	case recordTypeChangeCipherSpec, recordTypeAlert, recordTypeHandshake, recordTypeApplicationData:
	default:
		c.sendAlert(AlertUnexpectedMessage)
		return c.in.setErr(errorf(AlertUnexpectedMessage, "unknown record type %d", typ))
	}
	if n > maxCiphertext || (c.in.cipher == nil && n > maxPlaintext) {
		c.sendAlert(AlertRecordOverflow)
		return c.in.setErr(errorf(AlertRecordOverflow, "record of %d bytes", n))
	}
	rec, err := c.core.Rd.Record(c.core.Raw, n)
	if err != nil {
		if e, ok := err.(net.Error); ok && e.Timeout() {
			return err
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			c.sendAlert(AlertDecodeError)
			err = io.ErrUnexpectedEOF
		}
		return c.in.setErr(err)
	}
	data, err := c.in.decrypt(rec)
	if err != nil {
		c.sendAlert(AlertBadRecordMAC)
		return c.in.setErr(errorf(AlertBadRecordMAC, "record authentication failed"))
	}
	if len(data) > maxPlaintext {
		c.sendAlert(AlertRecordOverflow)
		return c.in.setErr(errorf(AlertRecordOverflow, "plaintext of %d bytes", len(data)))
	}
	// Records that carry nothing (empty application data, warning alerts)
	// are bounded together, MaxEmptyRecords in a row, so that a peer
	// cannot keep a read going on them forever.
	if typ != recordTypeAlert && (typ != recordTypeApplicationData || len(data) > 0) {
		c.useless = 0
	}

	switch typ {
	case recordTypeAlert:
		if len(data) != 2 {
			c.sendAlert(AlertDecodeError)
			return c.in.setErr(errorf(AlertDecodeError, "malformed alert"))
		}
		a := Alert(data[1])
		if a == AlertCloseNotify {
			return c.in.setErr(io.EOF)
		}
		if data[0] == record.AlertLevelWarning {
			if a == AlertNoRenegotiation && c.isClient {
				return c.in.setErr(&AlertError{Alert: a, Remote: true})
			}
			// Other warnings are ignored (TLS 1.2 practice), up to the
			// bound on records that carry nothing.
			return c.uselessRecord("warning alerts and empty records")
		}
		if data[0] != record.AlertLevelFatal {
			// RFC 5246 §7.2 has two levels; OpenSSL, and so Tongsuo's
			// NTLS, answers any other with illegal_parameter rather than
			// take it for the peer's fatal alert.
			c.sendAlert(AlertIllegalParameter)
			return c.in.setErr(errorf(AlertIllegalParameter, "alert of unknown level %d", data[0]))
		}
		c.forgetSession()
		return c.in.setErr(&AlertError{Alert: a, Remote: true})

	case recordTypeChangeCipherSpec:
		if !expectCCS || len(data) != 1 || data[0] != 1 || len(c.core.Hand) > 0 {
			c.sendAlert(AlertUnexpectedMessage)
			return c.in.setErr(errorf(AlertUnexpectedMessage, "unexpected ChangeCipherSpec"))
		}
		if err := c.in.changeCipherSpec(); err != nil {
			c.sendAlert(AlertUnexpectedMessage)
			return c.in.setErr(err)
		}
		c.ccsRead = true

	case recordTypeApplicationData:
		if !c.core.HandshakeComplete() || expectCCS {
			c.sendAlert(AlertUnexpectedMessage)
			return c.in.setErr(errorf(AlertUnexpectedMessage, "application data before the handshake ended"))
		}
		c.core.Counters.RecordIn()
		if len(data) == 0 {
			return c.uselessRecord("empty records")
		}
		c.core.Input = data

	case recordTypeHandshake:
		if expectCCS && c.isClient && len(c.core.Hand) == 0 && bytes.Equal(data, helloRequestMsg) {
			// A HelloRequest in a record of its own before the server's
			// ChangeCipherSpec, ignored as anywhere in the handshake
			// (ignoreHelloRequest).
			return c.ignoreHelloRequest()
		}
		if len(data) == 0 || expectCCS {
			c.sendAlert(AlertUnexpectedMessage)
			return c.in.setErr(errorf(AlertUnexpectedMessage, "unexpected handshake record"))
		}
		if len(c.core.Hand)+len(data) > maxHandshake+4 {
			c.sendAlert(AlertUnexpectedMessage)
			return c.in.setErr(errorf(AlertUnexpectedMessage, "handshake data too large"))
		}
		c.core.Hand = appendHandshake(c.core.Hand, data)
	}
	return nil
}

// uselessRecord counts a record that carried nothing and fails the
// connection when there were more than MaxEmptyRecords in a row.
func (c *Conn) uselessRecord(what string) error {
	c.useless++
	if c.useless > c.config.maxEmpty() {
		c.sendAlert(AlertUnexpectedMessage)
		return c.in.setErr(errorf(AlertUnexpectedMessage, "too many %s in a row", what))
	}
	return nil
}

// appendHandshake appends a record's handshake bytes to hand. Messages
// already returned by readHandshake keep pointing into hand's array, so
// bytes are only ever written past them: when the array is full a new one
// is started with some room to spare, so that a resumed handshake's two
// client messages, or the small messages after a client Certificate
// (ClientKeyExchange, CertificateVerify, Finished), share one allocation.
// The new array also holds at least twice the bytes pending (up to the
// largest message), so that a message cut into many small records is
// copied a few times over in all, not once per record.
func appendHandshake(hand, data []byte) []byte {
	if cap(hand)-len(hand) >= len(data) {
		return append(hand, data...)
	}
	size := max(len(hand)+len(data)+handshakeSlack, min(2*len(hand)+len(data), maxHandshake+4))
	nb := make([]byte, len(hand), size)
	copy(nb, hand)
	return append(nb, data...)
}

// handshakeSlack is the room appendHandshake leaves for later messages.
const handshakeSlack = 256

// readHandshake returns the next complete handshake message (header included).
func (c *Conn) readHandshake() ([]byte, error) {
	for {
		msg, err := c.readOneHandshake()
		if err != nil || !c.isClient || c.core.HandshakeComplete() || !bytes.Equal(msg, helloRequestMsg) {
			return msg, err
		}
		if err := c.ignoreHelloRequest(); err != nil {
			return nil, err
		}
	}
}

// ignoreHelloRequest counts a HelloRequest a client got while negotiating.
// GB/T 38636-2020 takes HelloRequest from TLS 1.1, which (as RFC 5246
// §7.4.1.1) has the client ignore one that comes while it is negotiating
// a session, and leaves it out of the handshake's hash; the server may
// send it at any time, so it may come between any two of its messages.
// Only a server that keeps asking is given up on, as after the handshake
// (handlePostHandshake, whose count it shares).
func (c *Conn) ignoreHelloRequest() error {
	if c.renegotiationRefusals++; c.renegotiationRefusals > maxRenegotiationRefusals {
		c.sendAlert(AlertUnexpectedMessage)
		return c.in.setErr(errorf(AlertUnexpectedMessage, "server sent %d HelloRequests during the handshake", c.renegotiationRefusals))
	}
	return nil
}

// readOneHandshake reads the next handshake message, whatever it is.
func (c *Conn) readOneHandshake() ([]byte, error) {
	for len(c.core.Hand) < 4 {
		if err := c.readHandshakeRecord(); err != nil {
			return nil, err
		}
	}
	n := int(c.core.Hand[1])<<16 | int(c.core.Hand[2])<<8 | int(c.core.Hand[3])
	if n > maxHandshake {
		c.sendAlert(AlertIllegalParameter)
		return nil, c.in.setErr(errorf(AlertIllegalParameter, "handshake message of %d bytes exceeds %d", n, maxHandshake))
	}
	for len(c.core.Hand) < 4+n {
		if err := c.readHandshakeRecord(); err != nil {
			return nil, err
		}
	}
	// The message keeps its bytes: later appends only write past them
	// (appendHandshake), into the rest of the array.
	msg := c.core.Hand[: 4+n : 4+n]
	c.core.Hand = c.core.Hand[4+n:]
	return msg, nil
}

// readHandshakeRecord reads one more record of a handshake message. A
// handshake message after the handshake (a ClientHello asking for
// renegotiation) may not have application data inside it: the data would
// stay pending while the rest of the message is read, and the next record
// reuses the buffer it is in. crypto/tls and tls13sm refuse it too.
func (c *Conn) readHandshakeRecord() error {
	if err := c.readRecord(false); err != nil {
		return err
	}
	if len(c.core.Input) != 0 {
		c.sendAlert(AlertUnexpectedMessage)
		return c.in.setErr(errorf(AlertUnexpectedMessage, "application data inside a handshake message"))
	}
	return nil
}

// readChangeCipherSpec reads records until a ChangeCipherSpec was
// processed. Only warning alerts (bounded) may come before it: Finished
// must follow the ChangeCipherSpec, under the new keys (GB/T 38636-2020
// 6.4.5.10; RFC 5246 §7.1), so any other record is unexpected.
func (c *Conn) readChangeCipherSpec() error {
	// A HelloRequest the client ignores may come before it too (a resumed
	// handshake's ServerHello and ChangeCipherSpec have nothing between).
	for c.isClient && bytes.HasPrefix(c.core.Hand, helloRequestMsg) {
		c.core.Hand = c.core.Hand[len(helloRequestMsg):]
		if err := c.ignoreHelloRequest(); err != nil {
			return err
		}
	}
	if len(c.core.Hand) > 0 {
		c.sendAlert(AlertUnexpectedMessage)
		return c.in.setErr(errorf(AlertUnexpectedMessage, "handshake data before ChangeCipherSpec"))
	}
	c.ccsRead = false
	for !c.ccsRead {
		if err := c.readRecord(true); err != nil {
			return err
		}
	}
	return nil
}

// ---- output ----

// sendAlert sends an alert and records it as the write side's error.
func (c *Conn) sendAlert(a Alert) error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return c.sendAlertLocked(a)
}

// sendWarning sends a warning alert that leaves the connection usable.
func (c *Conn) sendWarning(a Alert) error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.out.err != nil {
		return c.out.err
	}
	return c.writeRecordLocked(recordTypeAlert, []byte{record.AlertLevelWarning, byte(a)})
}

func (c *Conn) sendAlertLocked(a Alert) error {
	if c.out.err != nil {
		return c.out.err
	}
	// A pending flight is dropped in favour of the alert.
	err := c.core.SendAlert(a, record.DropFlight, c.writeAlertLocked)
	if a == AlertCloseNotify {
		return err
	}
	c.forgetSession()
	return c.out.setErr(&AlertError{Alert: a})
}

// rememberSessionID records, on the server, the session ID under which
// the connection's session is in the SessionStore (stored or resumed).
func (c *Conn) rememberSessionID(id []byte) {
	c.storedMu.Lock()
	c.storedIDLen = copy(c.storedID[:], id)
	c.storedMu.Unlock()
}

// forgetSession deletes the connection's session from the SessionStore:
// a connection that ends with a fatal alert, sent or received, must not
// be resumed (RFC 5246 §7.2 and §7.2.2, which TLCP follows: "the session
// identifier MUST be invalidated"). A ticket cannot be taken back; its
// session ends with its lifetime.
func (c *Conn) forgetSession() {
	c.storedMu.Lock()
	id := string(c.storedID[:c.storedIDLen])
	c.storedIDLen = 0
	c.storedMu.Unlock()
	if id == "" {
		return
	}
	if store := c.config.sessionStore(); store != nil {
		store.Delete(id)
	}
}

// writeAlertLocked writes an alert record with body.
func (c *Conn) writeAlertLocked(body []byte) error {
	return c.writeRecordLocked(recordTypeAlert, body)
}

// writeRecordLocked protects data as records and writes them at once.
func (c *Conn) writeRecordLocked(typ recordType, data []byte) error {
	if c.out.err != nil {
		return c.out.err
	}
	pb := smallOutPool.Get().(*[]byte)
	if len(data) > maxPlaintext {
		smallOutPool.Put(pb)
		pb = bigOutPool.Get().(*[]byte)
	}
	buf, _, err := c.out.appendRecords((*pb)[:0], typ, data, maxPlaintext, c.config.rand())
	if err == nil {
		_, err = c.core.Raw.Write(buf)
	}
	if cap(buf) == cap(*pb) {
		*pb = buf[:0]
	}
	putOut(pb)
	if err != nil {
		return c.out.setErr(err)
	}
	return nil
}

func putOut(pb *[]byte) {
	if cap(*pb) >= bigOutSize {
		bigOutPool.Put(pb)
	} else if cap(*pb) >= recordHeaderLen+maxCiphertext {
		smallOutPool.Put(pb)
	}
}

// sendHandshake adds a handshake message to the transcript tr and to the
// pending flight.
func (c *Conn) sendHandshake(tr *transcript, msg []byte) error {
	if h := c.config.testHandshakeOut; h != nil {
		return c.sendRewritten(tr, msg, h)
	}
	tr.write(msg)
	return c.queueHandshake(msg)
}

// sendRewritten is sendHandshake for a misbehaving endpoint (tests).
func (c *Conn) sendRewritten(tr *transcript, msg []byte, rewrite func([]byte) []byte) error {
	if c.config.testRewriteBeforeHash {
		msg = rewrite(slices.Clone(msg))
		tr.write(msg)
	} else {
		tr.write(msg)
		msg = rewrite(slices.Clone(msg))
	}
	if len(msg) == 0 {
		return nil
	}
	return c.queueHandshake(msg)
}

// queueHandshake appends a handshake message to the pending flight.
func (c *Conn) queueHandshake(msg []byte) error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return c.queueRecordsLocked(recordTypeHandshake, msg)
}

// queueRecordsLocked appends data as records of type typ to the pending
// flight, starting one if needed. c.outMu is held.
func (c *Conn) queueRecordsLocked(typ recordType, data []byte) error {
	if c.out.err != nil {
		return c.out.err
	}
	room := len(data) + (len(data)/maxPlaintext+1)*(recordHeaderLen+cbcIVLen+macLen+blockLen)
	buf, _, err := c.out.appendRecords(c.core.Flight.Room(room), typ, data, maxPlaintext, c.config.rand())
	c.core.Flight.Set(buf)
	return err
}

// queueChangeCipherSpec appends CCS to the flight and switches the write cipher.
func (c *Conn) queueChangeCipherSpec() error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if err := c.queueRecordsLocked(recordTypeChangeCipherSpec, ccsBody); err != nil {
		return err
	}
	return c.out.changeCipherSpec()
}

// flush writes the pending flight in one write.
func (c *Conn) flush() error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.core.Flight.Len() == 0 {
		return c.out.err
	}
	if err := c.core.Flight.Flush(c.core.Raw); err != nil {
		return c.out.setErr(err)
	}
	return nil
}

// ---- application API ----

// Write writes application data, running the handshake first if needed.
// Writes of several records are protected and sent together.
func (c *Conn) Write(b []byte) (int, error) {
	return c.writing(func() (int, error) {
		total := 0
		for len(b) > 0 {
			chunk := b
			if len(chunk) > maxWriteChunk {
				chunk = chunk[:maxWriteChunk]
			}
			recs, err := c.writeAppLocked(chunk, nil)
			if err != nil {
				return total, err
			}
			c.core.Counters.Out(recs, len(chunk))
			total += len(chunk)
			b = b[len(chunk):]
		}
		return total, nil
	})
}

// writing runs write with the output lock held, after the checks every
// write makes: the interlock with Close (like crypto/tls, a closed Conn
// refuses writes), the handshake, no error latched on the output side and
// no close_notify sent.
func (c *Conn) writing(write func() (int, error)) (int, error) {
	if !c.core.BeginWrite() {
		return 0, net.ErrClosed
	}
	defer c.core.EndWrite()
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.out.err != nil {
		return 0, c.out.err
	}
	if c.core.CloseNotifySent() {
		return 0, errShutdown
	}
	return write()
}

// writeAppLocked protects b (at most maxWriteChunk bytes) as
// application-data records, followed by an alert record with body alert
// when alert is not nil, and writes them in one write. It returns the
// number of records b took. The output lock is held.
func (c *Conn) writeAppLocked(b, alert []byte) (int, error) {
	pool := &smallOutPool
	if len(b) > maxPlaintext {
		pool = &bigOutPool
	}
	pb := pool.Get().(*[]byte)
	recSize := maxPlaintext
	if rc := c.out.cipher; rc != nil && rc.aead == nil {
		recSize = cbcRecordSize(len(b))
	}
	buf, recs, err := c.out.appendRecords((*pb)[:0], recordTypeApplicationData, b, recSize, c.config.rand())
	if err == nil && alert != nil {
		buf, _, err = c.out.appendRecords(buf, recordTypeAlert, alert, maxPlaintext, c.config.rand())
	}
	if err == nil {
		_, err = c.core.Raw.Write(buf)
	}
	if cap(buf) == cap(*pb) {
		*pb = buf[:0]
	}
	pool.Put(pb)
	if err != nil {
		return 0, c.out.setErr(err)
	}
	return recs, nil
}

var errShutdown = errors.New("tlcp: protocol is shutdown")

// WriteLast writes b and then close_notify in one write to the underlying
// connection: a server's last response before it closes costs one system
// call (and one wake-up of the peer) instead of two. Afterwards the
// connection refuses writes, as after CloseWrite, and reads go on; Close
// must still be called, and sends no second close_notify. A b longer than
// one Write chunk is written as Write writes it, then close_notify.
func (c *Conn) WriteLast(b []byte) (int, error) {
	if len(b) > maxWriteChunk {
		n, err := c.Write(b)
		if err != nil {
			return n, err
		}
		return n, c.closeNotify()
	}
	return c.writing(func() (int, error) {
		recs := 0
		err := c.core.LastNotify(func() error {
			closeNotify := [2]byte{AlertCloseNotify.Level(), byte(AlertCloseNotify)}
			var err error
			recs, err = c.writeAppLocked(b, closeNotify[:])
			return err
		})
		if err != nil {
			return 0, err
		}
		c.core.Counters.Out(recs, len(b))
		return len(b), nil
	})
}

var ccsBody = []byte{1}

// Read reads application data, running the handshake first if needed.
func (c *Conn) Read(b []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	return c.core.Read(b, c.readAnyRecord, c.handlePostHandshake)
}

// readAnyRecord is readRecord with no ChangeCipherSpec expected.
func (c *Conn) readAnyRecord() error { return c.readRecord(false) }

// maxRenegotiationRefusals bounds how many ClientHellos a server refuses
// with a warning on one connection before it gives up on the client.
const maxRenegotiationRefusals = 3

// handlePostHandshake handles a handshake message after the handshake. A
// server answers a ClientHello, and a client an empty HelloRequest, with a
// no_renegotiation warning and goes on with the connection (RFC 5246
// §7.2.2 and §7.4.1.1: the peer may continue; OpenSSL and Tongsuo NTLS do
// the same), up to maxRenegotiationRefusals times; anything else is
// unexpected.
func (c *Conn) handlePostHandshake() error {
	msg, err := c.readHandshake()
	if err != nil {
		return err
	}
	if len(c.core.Hand) == 0 {
		// An empty slice of the array the message was gathered in (up to
		// 64 KiB) would keep that array for the connection's life.
		c.core.Hand = nil
	}
	if !c.isClient && msg[0] == typeClientHello || c.isClient && msg[0] == typeHelloRequest && len(msg) == 4 {
		c.renegotiationRefusals++
		if c.renegotiationRefusals > maxRenegotiationRefusals {
			c.sendAlert(AlertUnexpectedMessage)
			return c.in.setErr(errorf(AlertUnexpectedMessage, "peer kept asking for renegotiation (%d times)", c.renegotiationRefusals))
		}
		return c.sendWarning(AlertNoRenegotiation)
	}
	c.sendAlert(AlertUnexpectedMessage)
	return c.in.setErr(errorf(AlertUnexpectedMessage, "unexpected handshake message type %d after the handshake", msg[0]))
}

// Close sends close_notify (if the handshake completed) and closes the connection.
func (c *Conn) Close() error {
	return c.core.Close(c.closeNotify)
}

// CloseWrite sends close_notify; the connection stays open for reading.
func (c *Conn) CloseWrite() error {
	if !c.core.HandshakeComplete() {
		return errors.New("tlcp: CloseWrite called before handshake complete")
	}
	return c.closeNotify()
}

func (c *Conn) closeNotify() error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.core.CloseNotifySent() {
		return nil // tlcp reports a failed close_notify once
	}
	return c.core.CloseNotify(func() error { return c.sendAlertLocked(AlertCloseNotify) })
}

// Handshake runs the handshake if it has not run yet.
func (c *Conn) Handshake() error { return c.HandshakeContext(context.Background()) }

// HandshakeContext runs the handshake; ctx bounds it and is passed to every
// private-key operation. Cancelling ctx closes the connection and the call
// returns ctx's error (record.Conn.Handshake has the rule).
func (c *Conn) HandshakeContext(ctx context.Context) error {
	if c.core.HandshakeComplete() {
		return nil
	}
	return c.core.Handshake(ctx, c.runHandshake, c.endHandshake)
}

// runHandshake runs the handshake (record.Conn.Handshake holds the locks).
func (c *Conn) runHandshake(ctx context.Context) error {
	// The duration is only for OnHandshake (which GetConfigForClient's
	// config may bring).
	if c.config.OnHandshake != nil || c.config.GetConfigForClient != nil {
		c.hsStart = time.Now()
	}
	if c.isClient {
		return c.clientHandshake(ctx)
	}
	return c.serverHandshake(ctx)
}

// endHandshake turns the handshake's result into the error latched.
func (c *Conn) endHandshake(err error) error {
	if err == nil && !c.core.HandshakeComplete() {
		err = errors.New("tlcp: internal error: handshake should have had a result")
	}
	if err != nil {
		// Send the alert if the failure was local and none was sent yet.
		var ae *AlertError
		if errors.As(err, &ae) && !ae.Remote {
			c.sendAlert(ae.Alert)
		}
		c.outMu.Lock()
		c.core.Flight.Drop() // never send half a flight
		c.outMu.Unlock()
	}
	c.core.Hand = nil
	c.core.Rd.ReleaseIdle(c.core.Input, c.core.Hand) // give the big input buffer back unless data is pending
	if cb := c.config.OnHandshake; cb != nil {
		cb(c.handshakeResult(err, time.Since(c.hsStart)))
	}
	return err
}

func (c *Conn) handshakeResult(err error, d time.Duration) HandshakeResult {
	r := HandshakeResult{IsClient: c.isClient, State: c.connectionStateLocked(), Err: err, Duration: d}
	if err == nil {
		return r
	}
	var ae *AlertError
	isAlert := errors.As(err, &ae)
	switch {
	case isAlert && ae.Remote:
		r.Alert, r.PeerAlert, r.Reason = ae.Alert, true, record.ReasonPeerAlert
	case record.IsTimeout(err):
		r.Reason = record.ReasonTimeout
	case isAlert:
		a := ae.Alert
		r.Alert = a
		switch {
		case a.IsCertificate():
			r.Reason = record.ReasonBadCertificate
		case a == AlertInternalError:
			r.Reason = record.ReasonInternal
		default:
			r.Reason = record.ReasonProtocolError
		}
		if errors.Is(err, errNoSharedCipher) {
			r.Reason = record.ReasonNoSharedCipher
		}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		r.Reason = record.ReasonEOF
	default:
		r.Reason = record.ReasonInternal
	}
	return r
}

var errNoSharedCipher = errors.New("no cipher suite supported by both client and server")

// ConnectionState returns the connection's negotiated parameters.
func (c *Conn) ConnectionState() ConnectionState {
	c.core.LockHandshake()
	defer c.core.UnlockHandshake()
	return c.connectionStateLocked()
}

func (c *Conn) connectionStateLocked() ConnectionState {
	s := ConnectionState{
		Version:            c.vers,
		HandshakeComplete:  c.core.HandshakeComplete(),
		DidResume:          c.didResume,
		NegotiatedProtocol: c.alpn,
		ServerName:         c.serverName,
		PeerCertificates:   c.peerCertificates,
		VerifiedChains:     c.verifiedChains,
	}
	if c.suite != nil {
		s.CipherSuite = c.suite.id
	}
	return s
}
