package redisstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"syscall"
	"time"
)

// Every reply is checked as it is read, before go-redis sees it. go-redis
// allocates what a reply announces before reading it (a bulk string's
// length, an array's element count) and follows nested arrays by
// recursion: a rogue server, or anyone on a plain-TCP link to the store,
// could make one lookup allocate gigabytes (or ask for more memory than
// the machine has, a fatal error that no recover catches, ending the
// process) with a header of a few bytes. No reply gmproxy asks for comes
// near these bounds: a value is read with GETRANGE up to MaxValue, and the
// largest replies are go-redis's own COMMAND (about 200 KiB announced,
// nested 9 deep, in Redis 7) and a Cluster's CLUSTER SLOTS.
const (
	// maxReply bounds what one reply announces: the bytes of its bulk
	// strings plus 16 per array element (go-redis's slot for it).
	maxReply = 16 << 20
	// maxDepth bounds the nesting of arrays.
	maxDepth = 32
	// maxLine bounds a status, error or integer line.
	maxLine = 64 << 10
)

// replyGuard follows a RESP stream byte by byte: where each reply starts,
// and what it announces. The store's own connections speak RESP2, those
// to Sentinels RESP3 (go-redis asks for it there); RESP3's attributes,
// which no server sends unasked, are refused.
type replyGuard struct {
	err    error
	bulk   int64 // bytes of a bulk string (and its CRLF) still to come
	inLine bool  // within a line whose type byte is kind
	kind   byte
	n      int64 // the number of a counted line (blobCount) so far
	neg    bool  // it began with '-'
	line   int   // bytes of the line so far
	open   []int64
	budget int64 // what the reply being read may still announce
}

func (g *replyGuard) fail(format string, a ...any) error {
	g.err = fmt.Errorf("%w: "+format, append([]any{errMalformed}, a...)...)
	return g.err
}

// scan follows p, the next bytes of the stream.
func (g *replyGuard) scan(p []byte) error {
	if g.err != nil {
		return g.err
	}
	for i := 0; i < len(p); {
		switch {
		case g.bulk > 0:
			k := min(g.bulk, int64(len(p)-i))
			g.bulk -= k
			i += int(k)
			if g.bulk == 0 {
				g.element()
			}
		case !g.inLine:
			if kindOf(p[i]) == 0 {
				return g.fail("reply type %q", p[i])
			}
			if len(g.open) == 0 {
				g.budget = maxReply // a new reply
			}
			g.inLine, g.kind, g.n, g.neg, g.line = true, p[i], 0, false, 0
			i++
		default:
			c := p[i]
			i++
			if g.line++; g.line > maxLine {
				return g.fail("line longer than %d bytes", maxLine)
			}
			if c == '\n' {
				if err := g.endLine(); err != nil {
					return err
				}
				continue
			}
			if kindOf(g.kind) == lineKind {
				continue
			}
			switch {
			case c >= '0' && c <= '9':
				if g.n = g.n*10 + int64(c-'0'); g.n > maxReply {
					return g.fail("%c%d... announces more than %d", g.kind, g.n, maxReply)
				}
			case c == '-' && g.line == 1:
				g.neg = true
			case c == '\r':
			default:
				return g.fail("length with %q", c)
			}
		}
	}
	return nil
}

// endLine acts on the line just read.
func (g *replyGuard) endLine() error {
	g.inLine = false
	k := kindOf(g.kind)
	if g.neg || k == lineKind {
		// A status, error, number, or a null ("$-1", "*-1").
		g.element()
		return nil
	}
	n, cost := g.n, g.n
	switch k {
	case mapKind:
		n *= 2 // a key and a value per entry
		fallthrough
	case arrayKind:
		cost = 16 * n
	}
	if g.budget -= cost; g.budget < 0 {
		return g.fail("a reply announcing more than %d bytes", maxReply)
	}
	switch {
	case k == blobKind:
		g.bulk = n + 2 // and CRLF
	case g.n == 0:
		g.element()
	default:
		if len(g.open) == maxDepth {
			return g.fail("arrays nested over %d deep", maxDepth)
		}
		g.open = append(g.open, n)
	}
	return nil
}

// Kinds of reply types.
const (
	lineKind  = 1 + iota // the line is the whole value
	blobKind             // the line gives the length of the bytes after it
	arrayKind            // the line gives a number of elements after it
	mapKind              // the line gives a number of pairs of elements
)

// kindOf returns the kind of a reply type, 0 for an unknown one.
func kindOf(t byte) int {
	switch t {
	case '+', '-', ':', '_', ',', '#', '(':
		return lineKind
	case '$', '!', '=':
		return blobKind
	case '*', '~', '>':
		return arrayKind
	case '%':
		return mapKind
	}
	return 0
}

// element counts one element read whole, and so every array it ends.
func (g *replyGuard) element() {
	for len(g.open) > 0 {
		top := len(g.open) - 1
		if g.open[top]--; g.open[top] > 0 {
			return
		}
		g.open = g.open[:top]
	}
}

// guardedConn is a connection to Redis whose replies pass a replyGuard.
// Once a reply was refused every read fails: go-redis drops the
// connection.
type guardedConn struct {
	net.Conn
	g replyGuard
}

func (c *guardedConn) Read(p []byte) (int, error) {
	if c.g.err != nil {
		return 0, c.g.err
	}
	n, err := c.Conn.Read(p)
	if gerr := c.g.scan(p[:n]); gerr != nil {
		return 0, gerr
	}
	return n, err
}

// guardedSysConn is a guardedConn of a TCP connection: go-redis's check
// of an idle connection peeks at its socket (syscall.Conn), consuming
// nothing.
type guardedSysConn struct {
	*guardedConn
	sc syscall.Conn
}

func (c guardedSysConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

// dialer connects as go-redis's own dialer does (TCP keepalives, TLS with
// tc when not nil) and guards the replies.
func dialer(timeout time.Duration, tc *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{
		Timeout:         timeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3},
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var (
			c   net.Conn
			err error
		)
		if tc == nil {
			c, err = nd.DialContext(ctx, network, addr)
		} else {
			c, err = (&tls.Dialer{NetDialer: nd, Config: tc}).DialContext(ctx, network, addr)
		}
		if err != nil {
			return nil, err
		}
		gc := &guardedConn{Conn: c}
		if sc, ok := c.(syscall.Conn); ok {
			return guardedSysConn{gc, sc}, nil
		}
		return gc, nil
	}
}
