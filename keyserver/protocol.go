package keyserver

import (
	"bufio"
	"crypto"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
)

// Version is the protocol version this package speaks (see the package
// documentation); the unversioned framing of earlier gmproxy releases is
// version 1. Version 3 signs messages, not digests: its sign operation
// takes the handshake message, where version 2's took e.
const Version = 3

// MaxFrame bounds the bytes after a frame's length field.
const MaxFrame = 16 << 10

const (
	helloMagic = "GMKS"
	helloLen   = 8 // magic (4) || version (2) || reserved (2)
	headerLen  = 4 + 4 + 1
	// maxErrorText bounds the detail text of an error response.
	maxErrorText = 256
)

// Op is an operation type of the protocol.
type Op uint8

// Operations (the type byte of a request).
const (
	OpSign         Op = 1
	OpDecrypt      Op = 2
	OpKeyAgreement Op = 3
	OpPing         Op = 4
)

// String returns the name of op used in metrics and logs.
func (op Op) String() string {
	switch op {
	case OpSign:
		return "sign"
	case OpDecrypt:
		return "decrypt"
	case OpKeyAgreement:
		return "key_agreement"
	case OpPing:
		return "ping"
	}
	return "unknown"
}

// Code is the type byte of a response: CodeOK or an error code.
type Code uint8

// Response codes. The client sees an error code as an *Error.
const (
	CodeOK          Code = 0
	CodeMalformed   Code = 1  // the request does not parse
	CodeUnknownOp   Code = 2  // the operation type is unknown
	CodeUnknownKey  Code = 3  // no key with this ID
	CodeForbidden   Code = 4  // the client may not use this key (allow-list)
	CodeWrongRole   Code = 5  // the key's role excludes this operation
	CodeRateLimited Code = 6  // the client exceeds its rate limit
	CodeBusy        Code = 7  // the client has too many operations in flight
	CodeFailed      Code = 8  // the operation itself failed (say, a bad ciphertext)
	CodeUnavailable Code = 9  // the key server is shutting down
	CodeVersion     Code = 10 // the peer speaks another protocol version
	CodeInternal    Code = 11 // anything else
	// CodeNotHandshake refuses to sign a message that is not a handshake
	// message the key server signs, or to run a key agreement that is not
	// a TLCP ECDHE server's (see the package documentation).
	CodeNotHandshake Code = 12
)

var codeNames = [...]string{
	CodeOK: "ok", CodeMalformed: "malformed", CodeUnknownOp: "unknown_op", CodeUnknownKey: "unknown_key",
	CodeForbidden: "forbidden", CodeWrongRole: "wrong_role", CodeRateLimited: "rate_limited", CodeBusy: "busy",
	CodeFailed: "failed", CodeUnavailable: "unavailable", CodeVersion: "version", CodeInternal: "internal",
	CodeNotHandshake: "not_handshake",
}

// String returns the name of c used in metrics and logs (the result label).
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "internal"
}

// Results lists every Code name, the bounded set of result labels.
func Results() []string { return codeNames[:] }

// Error is an error answered by the key server (or, for CodeVersion, found
// while greeting it).
type Error struct {
	Code Code
	// Detail is the key server's explanation, for logs.
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "key server: " + e.Code.String()
	}
	return "key server: " + e.Code.String() + ": " + e.Detail
}

// Is makes errors.Is(err, &Error{Code: c}) (and the Err* values) match
// any error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrUnknownKey  = &Error{Code: CodeUnknownKey}
	ErrForbidden   = &Error{Code: CodeForbidden}
	ErrWrongRole   = &Error{Code: CodeWrongRole}
	ErrRateLimited = &Error{Code: CodeRateLimited}
	ErrBusy        = &Error{Code: CodeBusy}
	ErrVersion     = &Error{Code: CodeVersion}
	// ErrNotHandshake: the key server refused to sign a message that is
	// not a handshake message.
	ErrNotHandshake = &Error{Code: CodeNotHandshake}
)

// KeyID returns the identifier of a public key in the protocol: SM3 of its
// PKIX SubjectPublicKeyInfo.
func KeyID(pub crypto.PublicKey) ([32]byte, error) {
	der, err := smx509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return [32]byte{}, err
	}
	return sm3.Sum(der), nil
}

// appendHello appends a hello message for version v.
func appendHello(b []byte, v uint16) []byte {
	b = binary.BigEndian.AppendUint32(b, helloLen)
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint16(b, v)
	return append(b, 0, 0)
}

// errV1 marks a peer speaking the unversioned framing of version 1.
var errV1 = errors.New("unversioned framing (protocol version 1)")

// readHello reads the peer's hello and returns its version. A version-1
// message (a request to a server, an answer to a client) gives errV1;
// its body is at most MaxFrame bytes and is returned too.
func readHello(r io.Reader) (uint16, []byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("greeting of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	if n != helloLen || string(body[:4]) != helloMagic {
		return 0, body, errV1
	}
	return binary.BigEndian.Uint16(body[4:]), body, nil
}

// appendV1Error appends a version-1 error answer with text, which a
// version-1 client shows to its user.
func appendV1Error(b []byte, text string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(1+len(text)))
	b = append(b, 1)
	return append(b, text...)
}

// errFrameLength is the error of a frame whose length field is out of
// range: the stream cannot be read on (the next frame's start is
// unknown).
var errFrameLength = errors.New("frame length out of range")

// frameReader reads frames from a connection.
type frameReader struct {
	br  *bufio.Reader
	hdr [headerLen]byte
}

// next reads one frame; body is newly allocated (the caller keeps it).
func (r *frameReader) next() (id uint32, typ byte, body []byte, err error) {
	if _, err = io.ReadFull(r.br, r.hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(r.hdr[:4])
	if n < headerLen-4 || n > MaxFrame {
		return 0, 0, nil, fmt.Errorf("%w: %d", errFrameLength, n)
	}
	id, typ = binary.BigEndian.Uint32(r.hdr[4:8]), r.hdr[8]
	body = make([]byte, n-(headerLen-4))
	if _, err = io.ReadFull(r.br, body); err != nil {
		return 0, 0, nil, err
	}
	return id, typ, body, nil
}

// frameWriter writes frames from many goroutines: each frame is written
// whole into a buffer, and the last writer of a burst flushes it, so
// pipelined frames share TLS records and system calls. A write returns
// when the flush carrying its frame has ended, not when its frame is
// buffered: a caller that holds something until its frame is sent (the
// server's in-flight slot) holds it while another writer's flush of that
// frame is blocked.
type frameWriter struct {
	c       net.Conn
	timeout time.Duration // per flush
	waiting atomic.Int32
	mu      sync.Mutex
	flushed sync.Cond // broadcast, under mu, when a flush ends
	gen     uint64    // flushes ended; the buffer holds frames of flush gen+1
	bw      *bufio.Writer
	err     error
}

func newFrameWriter(c net.Conn, timeout time.Duration) *frameWriter {
	w := &frameWriter{c: c, timeout: timeout, bw: bufio.NewWriterSize(c, 16<<10)}
	w.flushed.L = &w.mu
	return w
}

// frameSize is the length field of a frame whose body is a || b.
func frameSize(a, b []byte) int { return headerLen - 4 + len(a) + len(b) }

// write sends the frame id, typ, a || b within the writer's timeout.
func (w *frameWriter) write(id uint32, typ byte, a, b []byte) error {
	return w.writeBy(time.Now().Add(w.timeout), id, typ, a, b)
}

// errFrameLate is writeBy's error for a frame whose deadline had passed
// when its turn came: it was not sent, and the writer is still usable.
var errFrameLate = errors.New("deadline passed before the frame was sent")

// writeBy sends the frame id, typ, a || b, by deadline at the latest.
// A writer waiting behind a blocked one waits as long as that one's
// deadline at most: then the writer has failed for all. A frame whose
// deadline has already passed is not sent (errFrameLate): a flush under
// it would fail at once and fail the writer, and with it the other
// requests of a shared connection, for one caller that ran out of time.
func (w *frameWriter) writeBy(deadline time.Time, id uint32, typ byte, a, b []byte) error {
	n := frameSize(a, b)
	if n > MaxFrame {
		return errors.New("frame too large")
	}
	var h [headerLen]byte
	binary.BigEndian.PutUint32(h[:4], uint32(n))
	binary.BigEndian.PutUint32(h[4:8], id)
	h[8] = typ
	w.waiting.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	gen := w.gen
	late := !time.Now().Before(deadline)
	if w.err == nil && !late {
		// The deadline is set before the frame is buffered: a frame that
		// overflows the buffer is written then, not at the flush, and must
		// not go out under an old deadline or none (a new connection's).
		w.c.SetWriteDeadline(deadline)
		w.bw.Write(h[:])
		w.bw.Write(a)
		w.bw.Write(b)
	}
	if w.waiting.Add(-1) == 0 && w.err == nil {
		// The last writer of the burst: it flushes for all of them (a
		// late one under the deadline of the last frame buffered).
		w.err = w.bw.Flush()
		w.gen++
		w.flushed.Broadcast()
		if late && w.err == nil {
			return errFrameLate
		}
		return w.err
	}
	if late && w.err == nil {
		// Not buffered: the frames of the burst are another writer's
		// to flush, and their fate is not this one's.
		return errFrameLate
	}
	// A writer that took the lock after this one is to flush this frame
	// (waiting counted it before this one buffered), or a flush failed.
	for w.gen == gen && w.err == nil {
		w.flushed.Wait()
	}
	return w.err
}

// Payloads.

// appendKeyAgreement encodes the key_agreement payload.
func appendKeyAgreement(p []byte, a *keyAgreementArgs) []byte {
	p = append(p, a.eph.Bytes()...)
	p = append(p, a.peerStatic.Bytes()...)
	p = append(p, a.peerEph.Bytes()...)
	if a.responder {
		p = append(p, 1)
	} else {
		p = append(p, 0)
	}
	p = binary.BigEndian.AppendUint16(p, uint16(a.keyLen))
	p = binary.BigEndian.AppendUint16(p, uint16(len(a.uid)))
	p = append(p, a.uid...)
	p = binary.BigEndian.AppendUint16(p, uint16(len(a.peerUID)))
	return append(p, a.peerUID...)
}

type keyAgreementArgs struct {
	eph          *ecdh.PrivateKey
	peerStatic   *ecdh.PublicKey
	peerEph      *ecdh.PublicKey
	responder    bool
	keyLen       int
	uid, peerUID []byte
}

// maxKeyAgreementLen bounds the key length and the IDs of key_agreement.
const maxKeyAgreementLen = 1024

var errMalformedKA = errors.New("key_agreement: malformed request")

// errNotTLCPAgreement is the failure of a key_agreement that is not a
// TLCP ECDHE server's (CodeNotHandshake).
var errNotTLCPAgreement = errors.New("key_agreement: not the agreement of a TLCP ECDHE server (initiator, default IDs, 48 bytes)")

// isTLCPServer reports whether a is the SM2 key agreement a TLCP ECDHE
// server runs (GB/T 38636-2020 §6.4.5.3, as the tlcp package calls it):
// as initiator, with the default ID on both sides (sent empty), for the
// 48-byte pre-master secret. It is all gmproxy asks; the key_agreement
// role runs nothing else, so that an edge allowed the encryption key
// cannot run SM2 key exchange (GB/T 32918.3) as the site with the IDs,
// key length or role of another system using the same key.
func (a *keyAgreementArgs) isTLCPServer() bool {
	return !a.responder && a.keyLen == 48 && len(a.uid) == 0 && len(a.peerUID) == 0
}

func parseKeyAgreement(p []byte) (*keyAgreementArgs, error) {
	if len(p) < 32+65+65+1+2+2+2 {
		return nil, errMalformedKA
	}
	var a keyAgreementArgs
	var err error
	curve := ecdh.P256()
	if a.eph, err = curve.NewPrivateKey(p[:32]); err != nil {
		return nil, errMalformedKA
	}
	if a.peerStatic, err = curve.NewPublicKey(p[32:97]); err != nil {
		return nil, errMalformedKA
	}
	if a.peerEph, err = curve.NewPublicKey(p[97:162]); err != nil {
		return nil, errMalformedKA
	}
	switch p[162] {
	case 0:
	case 1:
		a.responder = true
	default:
		return nil, errMalformedKA
	}
	a.keyLen = int(binary.BigEndian.Uint16(p[163:165]))
	if a.keyLen == 0 || a.keyLen > maxKeyAgreementLen {
		return nil, errMalformedKA
	}
	rest := p[165:]
	for _, dst := range []*[]byte{&a.uid, &a.peerUID} {
		if len(rest) < 2 {
			return nil, errMalformedKA
		}
		n := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+n || n > maxKeyAgreementLen {
			return nil, errMalformedKA
		}
		if n > 0 {
			*dst = rest[2 : 2+n]
		}
		rest = rest[2+n:]
	}
	if len(rest) != 0 {
		return nil, errMalformedKA
	}
	return &a, nil
}
