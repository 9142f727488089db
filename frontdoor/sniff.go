package frontdoor

import (
	"errors"
	"fmt"
	"io"
	"net"
)

// Kind is what the sniffer found at the start of a connection.
type Kind int

const (
	KindUnknown Kind = iota // unrecognised bytes: closed
	KindTLCP                // record version 01 01
	KindTLS                 // record version 03 xx
	KindHTTP                // looks like a plain-text HTTP request line
	KindSSLv2               // SSLv2-format hello (high bit set): closed
)

func (k Kind) String() string {
	switch k {
	case KindTLCP:
		return "tlcp"
	case KindTLS:
		return "tls"
	case KindHTTP:
		return "http"
	case KindSSLv2:
		return "sslv2"
	}
	return "unknown"
}

// maxHelloBytes bounds how much the sniffer buffers to reassemble a
// ClientHello split across records (protocol-notes §10.3 rule 5), record
// headers included. Real hellos are a few hundred bytes; post-quantum key
// shares push them past 1 KiB.
const maxHelloBytes = 64 << 10

// growStep is how far past the bytes it already holds the sniffer's buffer
// is grown to the exact length a record claims; a claim further away only
// doubles the buffer: a client pays for the memory it makes the listener
// hold with bytes it actually sent (at most about twice them).
const growStep = 4 << 10

// firstRead is the size of the sniffer's first buffer: one read of a
// typical TLCP or TLS 1.3-SM ClientHello (70 to 300 bytes, record header
// included) takes it whole, where reading the record header and then its
// body cost two system calls per connection. Bytes read past the hello are
// kept and replayed like the rest.
const firstRead = 512

// sniffed is the result of reading a connection's first flight.
type sniffed struct {
	kind  Kind
	hello *ClientHello // set for KindTLCP and KindTLS
	// buf holds every byte read so far, replayed to the chosen stack. It is
	// the only copy of the first flight kept while the hello is pending; its
	// capacity never exceeds maxHelloBytes.
	buf []byte
	// budget accounts buf's capacity against the listener's bound on the
	// bytes held by pending handshakes (nil: unbounded).
	budget *byteBudget
}

// errors with a bounded classification.
var (
	errHelloTooLarge  = errors.New("ClientHello larger than the sniffer's limit")
	errNotHello       = errors.New("first handshake message is not a ClientHello")
	errBadRecord      = errors.New("malformed record in first flight")
	errHandshakeBytes = errors.New("listener's bound on bytes held by pending handshakes reached")
)

// sniff reads the first flight of a connection from r: enough to classify
// it and, for TLS/TLCP, the whole ClientHello (reassembled across records);
// its first read asks for firstRead bytes. Nothing is lost: every byte read
// is in the result's buf. The
// buffer's growth is charged to budget (nil: unbounded); the caller releases
// it when the buffer is no longer needed.
func sniff(r io.Reader, budget *byteBudget) (*sniffed, error) {
	return sniffInto(&sniffed{}, r, budget)
}

// sniffInto is sniff into s (a zero sniffed).
func sniffInto(s *sniffed, r io.Reader, budget *byteBudget) (*sniffed, error) {
	s.budget = budget
	if err := s.fill(r, 1); err != nil {
		return s, err
	}
	b0 := s.buf[0]
	switch {
	case b0 == recordTypeHandshake:
	case b0 >= 'A' && b0 <= 'Z':
		s.kind = KindHTTP
		return s, nil
	case b0&0x80 != 0:
		s.kind = KindSSLv2
		return s, nil
	default:
		return s, nil
	}
	if err := s.fill(r, recordHeaderLen); err != nil {
		return s, err
	}
	vers := uint16(s.buf[1])<<8 | uint16(s.buf[2])
	switch {
	case vers == versionTLCP:
		s.kind = KindTLCP
	case s.buf[1] == 3:
		s.kind = KindTLS
	default:
		return s, nil
	}
	// Read the records that carry the ClientHello (RFC 8446 §5.1: handshake
	// messages may be split across records). The fragments stay in buf; the
	// message is assembled only once it is complete.
	off, payload, msgLen := 0, 0, -1
	for {
		if off+recordHeaderLen >= maxHelloBytes {
			return s, errHelloTooLarge // no room for another record
		}
		if err := s.fill(r, off+recordHeaderLen); err != nil {
			return s, err
		}
		h := s.buf[off : off+recordHeaderLen]
		if h[0] != recordTypeHandshake || (s.kind == KindTLCP && (h[1] != 1 || h[2] != 1)) || (s.kind == KindTLS && h[1] != 3) {
			return s, errBadRecord
		}
		n := int(h[3])<<8 | int(h[4])
		if n == 0 || n > maxRecordPayload {
			return s, errBadRecord
		}
		if off+recordHeaderLen+n > maxHelloBytes {
			return s, errHelloTooLarge
		}
		if err := s.fill(r, off+recordHeaderLen+n); err != nil {
			return s, err
		}
		off += recordHeaderLen + n
		payload += n
		if payload < 4 {
			continue
		}
		if msgLen < 0 {
			hdr := s.message(off, 4)
			if hdr[0] != typeClientHello {
				return s, errNotHello
			}
			l := int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
			if l > maxHelloBytes {
				return s, errHelloTooLarge
			}
			msgLen = 4 + l
		}
		if payload < msgLen {
			continue
		}
		hello, err := parseClientHello(s.message(off, msgLen)[4:])
		if err != nil {
			return s, err
		}
		hello.RecordVersion = vers
		s.hello = hello
		return s, nil
	}
}

// message returns the first n bytes of the handshake payload carried by the
// records in buf[:end]: a slice of buf when the first record holds them,
// else one copy of exactly n bytes (parseClientHello keeps no reference to
// it).
func (s *sniffed) message(end, n int) []byte {
	first := int(s.buf[3])<<8 | int(s.buf[4])
	if first >= n {
		return s.buf[recordHeaderLen : recordHeaderLen+n]
	}
	msg := make([]byte, 0, n)
	for off := 0; off < end && len(msg) < n; {
		l := int(s.buf[off+3])<<8 | int(s.buf[off+4])
		frag := s.buf[off+recordHeaderLen : off+recordHeaderLen+l]
		msg = append(msg, frag[:min(len(frag), n-len(msg))]...)
		off += recordHeaderLen + l
	}
	return msg
}

// fill reads from r until buf holds at least n bytes (n is at most
// maxHelloBytes).
func (s *sniffed) fill(r io.Reader, n int) error {
	for len(s.buf) < n {
		if len(s.buf) == cap(s.buf) {
			if err := s.grow(n); err != nil {
				return err
			}
		}
		m, err := r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+m]
		if err != nil {
			if len(s.buf) >= n {
				return nil
			}
			if errors.Is(err, io.EOF) {
				if len(s.buf) == 0 {
					return io.EOF
				}
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// grow makes room toward need bytes. Small steps double the buffer (a hello
// in 1-byte records costs amortised linear time); a claimed record within
// growStep of the bytes held gets an exact-size buffer (an honest hello);
// one further away only doubles it, so a client that claims 16 KiB and
// sends 512 bytes holds 1 KiB, not 4.5. The first buffer holds firstRead
// bytes.
func (s *sniffed) grow(need int) error {
	have := len(s.buf)
	c := max(need, 2*have)
	if need-have > growStep {
		c = 2 * have
	}
	c = min(max(c, firstRead), maxHelloBytes)
	if c <= have {
		return errHelloTooLarge
	}
	if !s.budget.take(c - cap(s.buf)) {
		return errHandshakeBytes
	}
	nb := make([]byte, have, c)
	copy(nb, s.buf)
	s.buf = nb
	return nil
}

// replayConn gives the chosen stack the sniffed bytes first, then the rest of
// the connection.
type replayConn struct {
	net.Conn
	buf []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		if len(c.buf) == 0 {
			c.buf = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// alertVersion is the record version of the front door's alerts to a
// first flight of kind (TLS or TLCP).
func alertVersion(kind Kind) uint16 {
	if kind == KindTLCP {
		return versionTLCP
	}
	return 0x0303
}

// alertRecord builds a fatal alert record with the given record version.
func alertRecord(vers uint16, desc byte) []byte {
	return []byte{recordTypeAlert, byte(vers >> 8), byte(vers), 0, 2, 2, desc}
}

// sniffAlert is the fatal alert that answers a first flight the sniffer
// refused with err, as the stacks behind it answer such a message (RFC
// 8446 §6.2, GB/T 38636 §6.4.2): false for errors that are not the
// peer's message (a read that failed, the listener's byte bound).
func sniffAlert(err error) (byte, bool) {
	switch {
	case errors.Is(err, errBadHello):
		return alertDecodeError, true
	case errors.Is(err, errNotHello), errors.Is(err, errBadRecord):
		return alertUnexpectedMessage, true
	case errors.Is(err, errBadServerName):
		return alertUnrecognizedName, true // RFC 6066 §3, as OpenSSL answers it
	case errors.Is(err, errHelloTooLarge):
		return alertIllegalParameter, true // as OpenSSL and Tongsuo answer an excessive message
	}
	return 0, false
}

const (
	alertUnexpectedMessage  = 10
	alertDecodeError        = 50
	alertHandshakeFailure   = 40
	alertProtocolVersion    = 70
	alertUnrecognizedName   = 112
	alertInternalError      = 80
	alertIllegalParameter   = 47
	alertInappropriateFback = 86
)

func (s *sniffed) String() string {
	if s.hello == nil {
		return s.kind.String()
	}
	return fmt.Sprintf("%s sni=%q suites=%d", s.kind, s.hello.ServerName, len(s.hello.CipherSuites))
}
