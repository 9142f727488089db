package tls13sm

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// A passed read deadline (net/http aborts its background read this way) must
// return a timeout without failing the connection: once the deadline is
// cleared, the next record is read normally.
func TestReadTimeoutIsNotSticky(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	a, b := tcpPair(t)
	srv, cli := Server(a, srvCfg), Client(b, cliCfg)
	defer srv.Close()
	defer cli.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	srv.SetReadDeadline(time.Unix(1, 0))
	var ne net.Error
	if _, err := srv.Read(make([]byte, 8)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read with a passed deadline: %v, want a timeout", err)
	}
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := cli.Write([]byte("after timeout")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("after timeout"))
	if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "after timeout" {
		t.Fatalf("read after the timeout: %q, %v", buf, err)
	}
}
