package proxy

import (
	"bytes"
	"net"
	"sync/atomic"
)

// A request with both Content-Length and Transfer-Encoding is framed by
// Transfer-Encoding, but a peer that trusted Content-Length would see
// another request boundary: RFC 9112 §6.1 has a server that forwards it
// close the connection after responding, so that nothing read after it
// on that connection (a smuggled request) is served. net/http drops the
// Content-Length before the handler sees the request, so ambiguityGuard
// watches the raw bytes of an HTTP/1.1 connection for a header block
// holding both fields.
//
// It does not follow message framing: it looks at every block of lines
// between empty lines, bodies included. A body that happens to contain
// such a block only closes its own connection after the current request
// (harmless); a real header block is never missed, and it is always read
// before its request reaches the handler, which then closes the
// connection after its response (Connection: close).
type ambiguityGuard struct {
	net.Conn
	prefix  [len("transfer-encoding:")]byte // start of the current line
	n       int                             // bytes of the current line so far
	cl, te  bool                            // fields seen in the current block
	flagged atomic.Bool                     // a block had both
}

var (
	prefixCL = []byte("content-length:")
	prefixTE = []byte("transfer-encoding:")
)

func (g *ambiguityGuard) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if !g.flagged.Load() {
		g.scan(p[:n])
	}
	return n, err
}

func (g *ambiguityGuard) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if g.n < len(g.prefix) {
			copy(g.prefix[g.n:], seg)
		}
		g.n += len(seg)
		if i < 0 {
			return
		}
		g.endLine()
		b = b[i+1:]
	}
}

func (g *ambiguityGuard) endLine() {
	n := g.n
	g.n = 0
	if n > 0 && n <= len(g.prefix) && g.prefix[n-1] == '\r' {
		n--
	}
	if n == 0 { // an empty line ends a block
		if g.cl && g.te {
			g.flagged.Store(true)
		}
		g.cl, g.te = false, false
		return
	}
	line := g.prefix[:min(n, len(g.prefix))]
	switch {
	case hasPrefixFold(line, prefixCL):
		g.cl = true
	case hasPrefixFold(line, prefixTE):
		g.te = true
	}
}

func hasPrefixFold(b, prefix []byte) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], prefix)
}

// ambiguous reports whether the connection carried a header block with
// both Content-Length and Transfer-Encoding.
func (g *ambiguityGuard) ambiguous() bool { return g != nil && g.flagged.Load() }

// NetConn returns the connection underneath (for half-closing tunnels).
func (g *ambiguityGuard) NetConn() net.Conn { return g.Conn }
