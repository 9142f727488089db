package testpeer

import (
	"net"
	"sync/atomic"
)

// WriteCounter is a net.Conn that counts the Writes made on it (a flight
// of records must go out in one).
type WriteCounter struct {
	net.Conn
	n atomic.Int32
}

func (w *WriteCounter) Write(b []byte) (int, error) {
	w.n.Add(1)
	return w.Conn.Write(b)
}

// Writes returns the number of Writes so far.
func (w *WriteCounter) Writes() int { return int(w.n.Load()) }

// Handshaker is a connection of either SM stack.
type Handshaker interface {
	Handshake() error
	Close() error
}

// HandshakeBoth runs the server's handshake in a goroutine and the
// client's in this one; a client that fails is closed so that the server
// stops waiting for it.
func HandshakeBoth(cli, srv Handshaker) (cerr, serr error) {
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	if cerr = cli.Handshake(); cerr != nil {
		cli.Close()
	}
	return cerr, <-done
}
