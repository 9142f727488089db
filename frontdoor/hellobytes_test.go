package frontdoor

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestHandshakeBytesPerHelloBound: a pending hello holds no more of
// max_handshake_bytes than 512 bytes or about twice what its client sent
// (conf.Listener.MaxHandshakeBytes): one that sends 512 bytes of a hello
// claiming 16 KiB held 4608 bytes (nine times), not about 1 KiB.
func TestHandshakeBytesPerHelloBound(t *testing.T) {
	sites, _ := tlsSites(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	s := NewServer(&ListenerConfig{Name: "l", TLS: true, HandshakeTimeout: 20 * time.Second, MaxHandshakeBytes: 1 << 30, Sites: sites}, nil, func(c *Conn) { c.Close() })
	go s.Serve(countingListener{ln, &read})
	defer s.Close()

	const sent = firstRead // one read of the sniffer's first buffer
	part := partialHello(0x3ffc, []int{0x4000}, sent)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(part); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to read the bytes sent", func() bool { return read.Load() == int64(sent) && s.HandshakeBytes() > 0 })
	time.Sleep(50 * time.Millisecond) // let the sniffer grow its buffer for the next read
	held := s.HandshakeBytes()
	if limit := int64(max(512, 2*sent) + recordHeaderLen); held > limit {
		t.Fatalf("a pending hello that sent %d bytes holds %d bytes of max_handshake_bytes (%.1f× what it sent); documented bound: no more than 512 bytes or about twice what was sent (~%d)", sent, held, float64(held)/sent, 2*sent)
	}
}
