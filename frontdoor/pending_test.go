package frontdoor

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// countingListener counts the bytes the server read from its connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// waitFor polls cond every 10 ms for up to 20 s (testwait).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); time.Now().Before(deadline); {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

// partialHello returns the first sent bytes of a ClientHello flight of
// records claiming recs lengths, the message claiming msgLen bytes.
func partialHello(msgLen int, recs []int, sent int) []byte {
	var b []byte
	for i, n := range recs {
		b = append(b, recordTypeHandshake, 3, 1, byte(n>>8), byte(n))
		frag := make([]byte, n)
		if i == 0 {
			frag[0], frag[1], frag[2], frag[3] = typeClientHello, byte(msgLen>>16), byte(msgLen>>8), byte(msgLen)
		}
		b = append(b, frag...)
	}
	return b[:sent]
}

// TestPendingHelloMemory measures the heap held per pending ClientHello
// with 1,000 connections that stop mid-hello, and holds it to the
// documented bound: the sniffer keeps one buffer of at most maxHelloBytes,
// sized from the bytes received rather than the lengths claimed. Before this bound a 60 KB partial hello held about
// 121 KB (the buffer grown by doubling past the limit plus a second copy of
// the message), and a 1 KB partial hello claiming a 16 KiB record 19.5 KB.
func TestPendingHelloMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 connections per case")
	}
	const n = 1000
	big := maxHelloBytes - 4*recordHeaderLen // the largest flight of four records
	for _, tc := range []struct {
		name    string
		send    []byte
		maxHeap int64 // bytes per connection, generous
	}{
		{"idle", nil, 4 << 10},
		{"claim16k-send1k", partialHello(0x3ffc, []int{0x4000}, 1009), 8 << 10},
		{"claim64k-send60k", partialHello(big-4, []int{0x4000, 0x4000, 0x4000, big - 3*0x4000}, 60<<10), maxHelloBytes + 8<<10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sites, _ := tlsSites(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var read atomic.Int64
			s := NewServer(&ListenerConfig{Name: "l", TLS: true, HandshakeTimeout: time.Minute, MaxHandshakes: 2 * n, MaxHandshakeBytes: 1 << 30, Sites: sites}, nil, func(c *Conn) { c.Close() })
			go s.Serve(countingListener{ln, &read})
			defer s.Close()

			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			conns := make([]net.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range n {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				if _, err := c.Write(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the server to read every byte sent", func() bool {
				return s.Handshaking() == n && read.Load() == int64(n*len(tc.send))
			})
			runtime.GC()
			runtime.ReadMemStats(&m1)
			heap := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / n
			t.Logf("%s: %d bytes of heap per pending hello (%d held in first-flight buffers), %d bytes of stack",
				tc.name, heap, s.HandshakeBytes()/n, (int64(m1.StackInuse)-int64(m0.StackInuse))/n)
			if heap > tc.maxHeap {
				t.Errorf("%d bytes of heap per pending hello, want at most %d", heap, tc.maxHeap)
			}
		})
	}
}
