package tlcp

import (
	"testing"
	"time"
)

// TestCloseBreaksBlockedWrite: Close during a Write blocked on a peer that
// reads nothing closes the connection at once, without close_notify (the
// Write holds the output side), so the Write fails, as with crypto/tls.
// Waiting for the Write to end would wait forever.
func TestCloseBreaksBlockedWrite(t *testing.T) {
	p := loadPKI(t)
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, p.clientConfig()), Server(c2, p.serverConfig())
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
	wrote := make(chan error, 1)
	go func() {
		_, err := srv.Write(make([]byte, 64<<20))
		wrote <- err
	}()
	// Close only once the Write is under way (its first chunk went out).
	for i := 0; srv.Stats().BytesOut == 0; i++ {
		if i == 1000 {
			t.Fatal("the Write sent nothing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		c2.Close() // let the test end
		<-closed
		t.Fatal("Close waited for a Write blocked on a peer that reads nothing")
	}
	if err := <-wrote; err == nil {
		t.Fatal("the Write broken by Close succeeded")
	}
}
