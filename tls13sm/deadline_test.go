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
	srv, cli := handshakenPair(t)

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

// Stats count application data only: the handshake flights, the
// NewSessionTicket and the middlebox ChangeCipherSpec records are not records
// of application data, so one 4-byte write is one record on each side.
func TestStatsCountApplicationDataOnly(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	a, b := tcpPair(t)
	srv, cli := Server(a, srvCfg), Client(b, cliCfg)
	defer srv.Close()
	defer cli.Close()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4)
		_, err := io.ReadFull(srv, buf)
		if err == nil {
			_, err = srv.Write(buf)
		}
		done <- err
	}()
	if _, err := cli.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cli, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := Stats{BytesIn: 4, BytesOut: 4, RecordsIn: 1, RecordsOut: 1}
	if got := cli.Stats(); got != want {
		t.Errorf("client stats %+v, want %+v", got, want)
	}
	if got := srv.Stats(); got != want {
		t.Errorf("server stats %+v, want %+v", got, want)
	}
}
