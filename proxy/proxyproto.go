package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// PROXY protocol (HAProxy, "The PROXY protocol", versions 1 and 2) lets
// gmproxy sit behind an L4 balancer and still see the client address.
// Headers are accepted only from trusted sources; the address then becomes
// the connection's RemoteAddr, so it reaches X-Forwarded-For, the access
// log and ip_hash.

// ProxyHeader is a parsed PROXY protocol header.
type ProxyHeader struct {
	Version int // 1 or 2
	// Local is true for v2 LOCAL commands and v1 "UNKNOWN": the connection
	// was made by the balancer itself; the real addresses stay in effect.
	Local       bool
	Source      *net.TCPAddr
	Destination *net.TCPAddr
}

var (
	// ErrNoProxyHeader means the stream does not start with a PROXY header.
	ErrNoProxyHeader = errors.New("proxyproto: no PROXY protocol header")
	errProxyShort    = errors.New("proxyproto: header incomplete")
)

var proxyV2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")

const (
	proxyV1MaxLen = 107  // §2.1: at most 107 bytes including CRLF
	proxyV2MaxLen = 2048 // we accept up to this much address+TLV data
)

// ParseProxyHeader parses a PROXY header at the start of b. It returns the
// header and its length, ErrNoProxyHeader if b does not start with one,
// errProxyShort (unexported) if more bytes are needed, or another error
// for a malformed header.
func ParseProxyHeader(b []byte) (*ProxyHeader, int, error) {
	if len(b) == 0 {
		return nil, 0, errProxyShort
	}
	switch b[0] {
	case 'P':
		return parseProxyV1(b)
	case '\r':
		return parseProxyV2(b)
	}
	return nil, 0, ErrNoProxyHeader
}

func parseProxyV1(b []byte) (*ProxyHeader, int, error) {
	const prefix = "PROXY "
	if n := min(len(b), len(prefix)); string(b[:n]) != prefix[:n] {
		return nil, 0, ErrNoProxyHeader
	}
	end := bytes.IndexByte(b[:min(len(b), proxyV1MaxLen)], '\n')
	if end < 0 {
		if len(b) < proxyV1MaxLen {
			return nil, 0, errProxyShort
		}
		return nil, 0, errors.New("proxyproto: v1 header longer than 107 bytes")
	}
	if end == 0 || b[end-1] != '\r' {
		return nil, 0, errors.New("proxyproto: v1 header not ended by CRLF")
	}
	line := string(b[len(prefix) : end-1])
	n := end + 1
	fields := splitSpaces(line)
	if len(fields) >= 1 && fields[0] == "UNKNOWN" {
		return &ProxyHeader{Version: 1, Local: true}, n, nil
	}
	if len(fields) != 5 {
		return nil, 0, fmt.Errorf("proxyproto: v1 header has %d fields, want 5", len(fields))
	}
	var want4 bool
	switch fields[0] {
	case "TCP4":
		want4 = true
	case "TCP6":
	default:
		return nil, 0, fmt.Errorf("proxyproto: v1 protocol %q", fields[0])
	}
	src, err := parseV1Addr(fields[1], fields[3], want4)
	if err != nil {
		return nil, 0, err
	}
	dst, err := parseV1Addr(fields[2], fields[4], want4)
	if err != nil {
		return nil, 0, err
	}
	return &ProxyHeader{Version: 1, Source: src, Destination: dst}, n, nil
}

// splitSpaces splits on single spaces (the v1 grammar allows exactly one).
func splitSpaces(s string) []string {
	var out []string
	for len(out) < 6 {
		i := 0
		for i < len(s) && s[i] != ' ' {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return out
}

func parseV1Addr(ip, port string, want4 bool) (*net.TCPAddr, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Zone() != "" || a.Is4() != want4 {
		return nil, fmt.Errorf("proxyproto: v1 bad address %q", ip)
	}
	if len(port) == 0 || len(port) > 5 || (len(port) > 1 && port[0] == '0') {
		return nil, fmt.Errorf("proxyproto: v1 bad port %q", port)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("proxyproto: v1 bad port %q", port)
	}
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(pn))), nil
}

func parseProxyV2(b []byte) (*ProxyHeader, int, error) {
	if n := min(len(b), len(proxyV2Sig)); !bytes.Equal(b[:n], proxyV2Sig[:n]) {
		return nil, 0, ErrNoProxyHeader
	}
	if len(b) < 16 {
		return nil, 0, errProxyShort
	}
	verCmd, famProto := b[12], b[13]
	l := int(binary.BigEndian.Uint16(b[14:16]))
	if verCmd>>4 != 2 {
		return nil, 0, fmt.Errorf("proxyproto: v2 version %d", verCmd>>4)
	}
	if l > proxyV2MaxLen {
		return nil, 0, fmt.Errorf("proxyproto: v2 header length %d over %d", l, proxyV2MaxLen)
	}
	if len(b) < 16+l {
		return nil, 0, errProxyShort
	}
	n := 16 + l
	body := b[16:n]
	h := &ProxyHeader{Version: 2}
	switch verCmd & 0xf {
	case 0: // LOCAL
		h.Local = true
		return h, n, nil
	case 1: // PROXY
	default:
		return nil, 0, fmt.Errorf("proxyproto: v2 command %d", verCmd&0xf)
	}
	switch famProto {
	case 0x11: // TCP over IPv4
		if l < 12 {
			return nil, 0, errors.New("proxyproto: v2 IPv4 addresses truncated")
		}
		h.Source = &net.TCPAddr{IP: net.IP(bytes.Clone(body[0:4])), Port: int(binary.BigEndian.Uint16(body[8:10]))}
		h.Destination = &net.TCPAddr{IP: net.IP(bytes.Clone(body[4:8])), Port: int(binary.BigEndian.Uint16(body[10:12]))}
	case 0x21: // TCP over IPv6
		if l < 36 {
			return nil, 0, errors.New("proxyproto: v2 IPv6 addresses truncated")
		}
		h.Source = &net.TCPAddr{IP: net.IP(bytes.Clone(body[0:16])), Port: int(binary.BigEndian.Uint16(body[32:34]))}
		h.Destination = &net.TCPAddr{IP: net.IP(bytes.Clone(body[16:32])), Port: int(binary.BigEndian.Uint16(body[34:36]))}
	default:
		// UNSPEC, UDP or UNIX: accepted, addresses not used (§2.2).
		h.Local = true
	}
	return h, n, nil
}

// ReadProxyHeader reads a PROXY header from br without consuming anything
// after it. It returns ErrNoProxyHeader (having consumed nothing) when the
// stream does not start with one.
func ReadProxyHeader(br *bufio.Reader) (*ProxyHeader, error) {
	const maxLen = 16 + proxyV2MaxLen // br needs at least this much buffer (4096 is fine)
	need := 1
	for {
		need = min(max(need, br.Buffered()), maxLen)
		b, perr := br.Peek(need)
		h, n, err := ParseProxyHeader(b)
		switch {
		case err == nil:
			br.Discard(n)
			return h, nil
		case err != errProxyShort:
			return nil, err
		case len(b) >= maxLen:
			return nil, errors.New("proxyproto: header too long")
		case perr != nil:
			if perr == io.EOF && len(b) > 0 {
				perr = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("proxyproto: %w", perr)
		}
		need = len(b) + 1
	}
}

// ProxyProtocolListener wraps a listener: connections from trusted
// sources have their PROXY header read (lazily, on the first Read or
// RemoteAddr, so a slow client cannot stall Accept) and their RemoteAddr
// replaced by the header's source. Connections from other sources are
// returned untouched (a header they send is then just bad input to the
// handshake).
type ProxyProtocolListener struct {
	net.Listener
	// Trusted sources; empty trusts nobody.
	Trusted []netip.Prefix
	// Timeout for reading the header. Default 5s.
	Timeout time.Duration
	// Required makes a trusted source's connection fail without a header.
	Required bool
}

// NewProxyProtocolListener wraps ln trusting the given CIDRs/addresses.
func NewProxyProtocolListener(ln net.Listener, trusted []string, timeout time.Duration, required bool) (*ProxyProtocolListener, error) {
	l := &ProxyProtocolListener{Listener: ln, Timeout: timeout, Required: required}
	for _, s := range trusted {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("proxy_protocol trusted source: %w", err)
		}
		l.Trusted = append(l.Trusted, p)
	}
	return l, nil
}

// Accept returns the next connection.
func (l *ProxyProtocolListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if !l.trusted(c.RemoteAddr()) {
		return c, nil
	}
	return &ProxyConn{Conn: c, timeout: durOr(l.Timeout, 5*time.Second), required: l.Required}, nil
}

func (l *ProxyProtocolListener) trusted(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ok && inPrefixes(l.Trusted, ip)
}

// inPrefixes reports whether a (IPv4-mapped IPv6 taken as IPv4, without
// its zone) is in one of nets. A prefix holds no zone (parsePrefix drops a
// configured address's) and contains no zoned address, so a link-local
// peer ("fe80::1%eth0") would match no list at all.
func inPrefixes(nets []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// WrapProxyConn reads the PROXY header of c now (for accept paths that
// already run per connection) and returns a conn whose RemoteAddr is the
// header's source.
func WrapProxyConn(c net.Conn, timeout time.Duration, required bool) (*ProxyConn, error) {
	pc := &ProxyConn{Conn: c, timeout: durOr(timeout, 5*time.Second), required: required}
	pc.once.Do(pc.readHeader)
	if pc.err != nil {
		return nil, pc.err
	}
	return pc, nil
}

// ProxyConn is a connection whose PROXY header is read before any data.
type ProxyConn struct {
	net.Conn
	timeout  time.Duration
	required bool
	once     sync.Once
	br       *bufio.Reader
	hdr      *ProxyHeader
	err      error

	dlMu         sync.Mutex
	readDeadline time.Time // the caller's, restored after the header
}

// SetDeadline remembers the read deadline so that reading the header
// does not lose it (e.g. the daemon's handshake deadline).
func (c *ProxyConn) SetDeadline(t time.Time) error {
	c.dlMu.Lock()
	c.readDeadline = t
	c.dlMu.Unlock()
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline remembers the read deadline (see SetDeadline).
func (c *ProxyConn) SetReadDeadline(t time.Time) error {
	c.dlMu.Lock()
	c.readDeadline = t
	c.dlMu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *ProxyConn) readHeader() {
	c.br = bufio.NewReaderSize(c.Conn, 4096)
	c.dlMu.Lock()
	caller := c.readDeadline
	c.dlMu.Unlock()
	dl := time.Now().Add(c.timeout)
	if !caller.IsZero() && caller.Before(dl) {
		dl = caller
	}
	c.Conn.SetReadDeadline(dl)
	h, err := ReadProxyHeader(c.br)
	c.dlMu.Lock()
	c.Conn.SetReadDeadline(c.readDeadline)
	c.dlMu.Unlock()
	switch {
	case err == nil:
		c.hdr = h
	case err == ErrNoProxyHeader && !c.required:
	default:
		c.err = fmt.Errorf("proxy protocol from %s: %w", c.Conn.RemoteAddr(), err)
	}
}

// Read reads after the header.
func (c *ProxyConn) Read(p []byte) (int, error) {
	c.once.Do(c.readHeader)
	if c.err != nil {
		return 0, c.err
	}
	if c.br != nil {
		if c.br.Buffered() > 0 {
			return c.br.Read(p)
		}
		c.br = nil // drained: read the socket directly from now on
	}
	return c.Conn.Read(p)
}

// RemoteAddr is the client address from the header when there was one.
func (c *ProxyConn) RemoteAddr() net.Addr {
	c.once.Do(c.readHeader)
	if c.hdr != nil && !c.hdr.Local && c.hdr.Source != nil {
		return c.hdr.Source
	}
	return c.Conn.RemoteAddr()
}

// LocalAddr is the address the client connected to, from the header when
// there was one (the load balancer's, not this socket's): a TCP stream's
// PROXY header towards its target names it as the destination.
func (c *ProxyConn) LocalAddr() net.Addr {
	c.once.Do(c.readHeader)
	if c.hdr != nil && !c.hdr.Local && c.hdr.Destination != nil {
		return c.hdr.Destination
	}
	return c.Conn.LocalAddr()
}

// ReadPeerHeader reads the header if that was not done yet and returns the
// error reading it failed with (frontdoor.Server reads it this way before
// applying per-client limits to the address it names).
func (c *ProxyConn) ReadPeerHeader() error {
	c.once.Do(c.readHeader)
	return c.err
}

// ProxyHeader returns the parsed header (nil without one), reading it if
// needed, and the error if reading it failed.
func (c *ProxyConn) ProxyHeader() (*ProxyHeader, error) {
	c.once.Do(c.readHeader)
	return c.hdr, c.err
}

// AppendProxyHeaderV1 appends a v1 header for src→dst (UNKNOWN when they
// are not both TCP addresses; TCP6 when one of them is IPv6).
func AppendProxyHeaderV1(b []byte, src, dst net.Addr) []byte {
	s, d, ok := tcpPair(src, dst)
	if !ok {
		return append(b, "PROXY UNKNOWN\r\n"...)
	}
	fam := "TCP6 "
	if s.Addr().Is4() {
		fam = "TCP4 "
	}
	b = append(b, "PROXY "...)
	b = append(b, fam...)
	b = s.Addr().AppendTo(b)
	b = append(b, ' ')
	b = d.Addr().AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(s.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(d.Port()), 10)
	return append(b, "\r\n"...)
}

// AppendProxyHeaderV2 appends a v2 PROXY header for src→dst (LOCAL when
// they are not both TCP addresses; IPv6 when one of them is).
func AppendProxyHeaderV2(b []byte, src, dst net.Addr) []byte {
	b = append(b, proxyV2Sig...)
	s, d, ok := tcpPair(src, dst)
	if !ok {
		return append(b, 0x20, 0x00, 0, 0)
	}
	if s.Addr().Is4() {
		b = append(b, 0x21, 0x11, 0, 12)
		a4, d4 := s.Addr().As4(), d.Addr().As4()
		b = append(b, a4[:]...)
		b = append(b, d4[:]...)
	} else {
		b = append(b, 0x21, 0x21, 0, 36)
		a16, d16 := s.Addr().As16(), d.Addr().As16()
		b = append(b, a16[:]...)
		b = append(b, d16[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, s.Port())
	return binary.BigEndian.AppendUint16(b, d.Port())
}

func tcpPair(src, dst net.Addr) (netip.AddrPort, netip.AddrPort, bool) {
	st, ok1 := src.(*net.TCPAddr)
	dt, ok2 := dst.(*net.TCPAddr)
	if !ok1 || !ok2 || st == nil || dt == nil {
		return netip.AddrPort{}, netip.AddrPort{}, false
	}
	s, d := st.AddrPort(), dt.AddrPort()
	s = netip.AddrPortFrom(s.Addr().Unmap().WithZone(""), s.Port())
	d = netip.AddrPortFrom(d.Addr().Unmap().WithZone(""), d.Port())
	if !s.Addr().IsValid() || !d.Addr().IsValid() {
		return netip.AddrPort{}, netip.AddrPort{}, false
	}
	if s.Addr().Is4() != d.Addr().Is4() {
		// One IPv4 and one IPv6 address (a v2 header of family AF_INET6
		// may carry an IPv4-mapped one): both go as IPv6, the IPv4 one
		// mapped, so that the client's address is not lost to LOCAL.
		s = netip.AddrPortFrom(netip.AddrFrom16(s.Addr().As16()), s.Port())
		d = netip.AddrPortFrom(netip.AddrFrom16(d.Addr().As16()), d.Port())
	}
	return s, d, true
}
