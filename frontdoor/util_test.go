package frontdoor

import (
	"io"
	"net"
	"time"
)

// readerConn is a net.Conn that reads from r and discards writes.
type readerConn struct{ r io.Reader }

func (c *readerConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *readerConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *readerConn) Close() error                     { return nil }
func (c *readerConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *readerConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *readerConn) SetDeadline(time.Time) error      { return nil }
func (c *readerConn) SetReadDeadline(time.Time) error  { return nil }
func (c *readerConn) SetWriteDeadline(time.Time) error { return nil }
