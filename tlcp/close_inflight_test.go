package tlcp

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// writeWatch is a connection that reports, once armed, the first write
// that reaches it.
type writeWatch struct {
	net.Conn
	armed   atomic.Bool
	once    sync.Once
	writing chan struct{}
}

func (c *writeWatch) Write(p []byte) (int, error) {
	if c.armed.Load() {
		c.once.Do(func() { close(c.writing) })
	}
	return c.Conn.Write(p)
}

// TestCloseBreaksBlockedWrite: Close during a Write blocked on a peer that
// reads nothing closes the connection at once, without close_notify (the
// Write holds the output side), so the Write fails, as with crypto/tls.
// Waiting for the Write to end would wait forever.
func TestCloseBreaksBlockedWrite(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	// Small socket buffers (as a kernel under memory pressure gives) so
	// that the Write blocks at once; the test must not depend on how much
	// they hold: the Write's first 64 KiB chunk may never fit.
	c1.(*net.TCPConn).SetReadBuffer(16 << 10)
	c2.(*net.TCPConn).SetWriteBuffer(16 << 10)
	w := &writeWatch{Conn: c2, writing: make(chan struct{})}
	cli, srv := Client(c1, p.clientConfig()), Server(w, p.serverConfig())
	defer cli.Close()
	hs := make(chan error, 1)
	go func() { hs <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	// The client reads nothing: 64 MiB cannot fit in the socket buffers,
	// so the server's Write blocks once they are full.
	w.armed.Store(true)
	wrote := make(chan error, 1)
	go func() {
		_, err := srv.Write(make([]byte, 64<<20))
		wrote <- err
	}()
	// Close only once the Write is under way: it holds the output side
	// and writes to the connection. (Not once Stats counts bytes out: a
	// chunk is counted when written whole, and with small socket buffers
	// the first never is.)
	select {
	case <-w.writing:
	case err := <-wrote:
		t.Fatalf("the Write ended (%v) while the peer read nothing", err)
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the Write wrote nothing to the connection")
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(testwait.Bound(10 * time.Second)):
		c2.Close() // let the test end
		<-closed
		t.Fatal("Close waited for a Write blocked on a peer that reads nothing")
	}
	// The Write ends with Close, not with the connection's deadline.
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the Write broken by Close succeeded")
		}
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("the Write went on blocking after Close")
	}
}
