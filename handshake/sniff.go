package handshake

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
// ClientHello split across records (protocol-notes §10.3 rule 5). Real hellos are a
// few hundred bytes; post-quantum key shares push them past 1 KiB.
const maxHelloBytes = 64 << 10

// sniffed is the result of reading a connection's first flight.
type sniffed struct {
	kind  Kind
	hello *ClientHello // set for KindTLCP and KindTLS
	buf   []byte       // every byte read so far, replayed to the chosen stack
}

// errors with a bounded classification.
var (
	errHelloTooLarge = errors.New("ClientHello larger than the sniffer's limit")
	errNotHello      = errors.New("first handshake message is not a ClientHello")
	errBadRecord     = errors.New("malformed record in first flight")
)

// sniff reads the first flight of a connection from r: exactly enough to
// classify it and, for TLS/TLCP, the whole ClientHello (reassembled across
// records). Nothing is lost: every byte read is in the result's buf.
func sniff(r io.Reader) (*sniffed, error) {
	s := &sniffed{buf: make([]byte, 0, 1024)}
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
	// Reassemble the ClientHello from the fragments of consecutive handshake
	// records (RFC 8446 §5.1: handshake messages may be split across records).
	var msg []byte
	off := 0
	for {
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
		msg = append(msg, s.buf[off+recordHeaderLen:off+recordHeaderLen+n]...)
		off += recordHeaderLen + n
		if len(msg) < 4 {
			continue
		}
		if msg[0] != typeClientHello {
			return s, errNotHello
		}
		l := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if l > maxHelloBytes {
			return s, errHelloTooLarge
		}
		if len(msg) < 4+l {
			continue
		}
		hello, err := parseClientHello(msg[4 : 4+l])
		if err != nil {
			return s, err
		}
		hello.RecordVersion = vers
		s.hello = hello
		return s, nil
	}
}

// fill reads from r until buf holds at least n bytes.
func (s *sniffed) fill(r io.Reader, n int) error {
	for len(s.buf) < n {
		if cap(s.buf)-len(s.buf) < 512 {
			nb := make([]byte, len(s.buf), 2*cap(s.buf)+n)
			copy(nb, s.buf)
			s.buf = nb
		}
		// Never read past what the bound allows.
		room := cap(s.buf)
		if room > maxHelloBytes+recordHeaderLen {
			room = maxHelloBytes + recordHeaderLen
		}
		if room <= len(s.buf) {
			return errHelloTooLarge
		}
		m, err := r.Read(s.buf[len(s.buf):room])
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

// alertRecord builds a fatal alert record with the given record version.
func alertRecord(vers uint16, desc byte) []byte {
	return []byte{recordTypeAlert, byte(vers >> 8), byte(vers), 0, 2, 2, desc}
}

const (
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
