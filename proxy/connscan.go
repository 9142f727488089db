package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"

	"github.com/gmproxy/gmproxy/internal/h1head"
)

// scanConn is an HTTP/1.1 connection of net/http's Transport that keeps
// the Connection fields of the response heads read on it. The Transport
// reads heads with http.ReadResponse, which drops a Connection field that
// says "close", and with it the names of the other fields it makes
// hop-by-hop (RFC 9110 §7.6.1): the proxy would pass those on. A request
// marks the start of its exchange (begin, from the GotConn trace hook:
// the previous response was read whole, and the Transport does not
// pipeline); the bytes read from then on are scanned up to the end of
// the final (not 1xx, or 101) head, whose Connection values the proxy
// takes back once RoundTrip returns (check), refusing the head if it
// had both Content-Length and Transfer-Encoding; a 204 head with either
// closes the connection. Bodies are not scanned.
type scanConn struct {
	net.Conn
	mu     sync.Mutex
	active bool // scanning a head of the current exchange
	scan   h1head.HeadScan
	final  []string // the Connection values of the exchange's final head
	both   bool     // that head had Content-Length and Transfer-Encoding
}

// NetConn returns the connection scanned (for closeWrite and alive).
func (c *scanConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection underneath: net/http's upgraded
// body calls it, and a tunnel passes a client's half-close on so.
func (c *scanConn) CloseWrite() error { return closeWriteOf(c.Conn) }

// Write holds back for earlyAnswerWait the error of a write the target
// reset or closed: a target that answers a request before reading its
// body (a 413) and closes the connection resets it, and net/http's
// Transport fails the exchange on the write's error unless its reader
// has returned the answer first, which the wait lets it do.
func (c *scanConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		time.Sleep(earlyAnswerWait)
	}
	return n, err
}

func (c *scanConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		for b := p[:n]; c.active && len(b) > 0; {
			b = b[c.scan.Write(b):]
			if !c.scan.Done() {
				break
			}
			if code := c.scan.StatusCode(); code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
				c.scan.Reset() // an informational head; the final one follows
				continue
			}
			c.final, c.both, c.active = c.scan.Connection(), c.scan.LengthAndCoding(), false
			if c.scan.StatusCode() == http.StatusNoContent && c.scan.Framed() {
				// A 204 that announces a body (RFC 9110 §8.6): the
				// Transport would pool the connection at once, and
				// what the target writes next would be read as the
				// next exchange's response. The bytes read are
				// returned; the next read fails.
				c.Conn.Close()
			}
		}
		c.mu.Unlock()
	}
	return n, err
}

// begin starts the scan of an exchange's response.
func (c *scanConn) begin() {
	c.mu.Lock()
	c.scan.Reset()
	c.active, c.final, c.both = true, nil, false
	c.mu.Unlock()
}

// finalHead returns the Connection values of the exchange's final head
// and whether it had both Content-Length and Transfer-Encoding.
func (c *scanConn) finalHead() (connection []string, both bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.final, c.both
}

// scanning makes dial's connections scanConns, except a *tls.Conn that
// negotiated h2 (a tls or h2 hook's), which net/http's Transport must see
// as it is to speak HTTP/2 on it.
func scanning(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
			return c, nil
		}
		return &scanConn{Conn: c}, nil
	}
}

// exchangeConn records the connection a Transport request went out on.
// watch, when set, is the request's HTTP/2 write_timeout watch: a
// scanConn speaks HTTP/1.1, whose writes sendTimed bounds instead.
type exchangeConn struct {
	c     *scanConn
	watch *sendWatch
}

// traceConn returns req under a context whose trace begins the scan of
// the connection the Transport gives it; the connection is in x after
// RoundTrip.
func traceConn(req *http.Request, x *exchangeConn) *http.Request {
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			if c, ok := i.Conn.(*scanConn); ok {
				c.begin()
				x.c = c
				if x.watch != nil {
					x.watch.stop()
				}
			}
		},
	})
	return req.WithContext(ctx)
}

// check gives res back the Connection field http.ReadResponse dropped,
// and refuses a head that had both Content-Length and Transfer-Encoding
// (errLengthAndCoding), from the connection's scan, or a field name that
// is no token (errFieldName).
func (x *exchangeConn) check(res *http.Response) error {
	// A head read on a scanConn is an HTTP/1.x one whatever version its
	// status line claims: http.ReadResponse takes "HTTP/2.0 200" there
	// (ProtoMajor 2) and frames it as HTTP/1.1, so the version alone
	// does not tell it from a real HTTP/2 response.
	if (res.ProtoMajor == 1 || x.c != nil) && !fieldNamesValid(res.Header) {
		return errFieldName
	}
	if x.c == nil {
		return nil
	}
	v, both := x.c.finalHead()
	if both && res.ProtoAtLeast(1, 1) {
		return errLengthAndCoding
	}
	if len(v) > 0 && len(res.Header["Connection"]) == 0 {
		res.Header["Connection"] = v
	}
	return nil
}
