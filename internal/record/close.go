package record

import (
	"fmt"
	"net"
	"time"

	"github.com/gmproxy/gmproxy/internal/callgate"
)

// closeNotifyTimeout bounds the write of close_notify, so that closing
// does not block on a peer that stopped reading.
const closeNotifyTimeout = 5 * time.Second

// SendCloseNotify runs send (which writes close_notify) under a write
// deadline of closeNotifyTimeout on conn, then clears the deadline.
func SendCloseNotify(conn net.Conn, send func() error) error {
	conn.SetWriteDeadline(time.Now().Add(closeNotifyTimeout))
	err := send()
	conn.SetWriteDeadline(time.Time{})
	return err
}

// Close is the close sequence of both stacks' Conn.Close, interlocked with
// Writes as crypto/tls does: a second Close fails with net.ErrClosed (gate);
// when the handshake completed, notify sends close_notify; then conn is
// closed, and a failure to send close_notify is returned (with the stack's
// name) although the connection was closed anyway.
func Close(gate *callgate.Gate, conn net.Conn, complete bool, notify func() error, stack string) error {
	if !gate.Close() {
		return net.ErrClosed
	}
	var alertErr error
	if complete {
		if err := notify(); err != nil {
			alertErr = fmt.Errorf("%s: failed to send closeNotify alert (but connection was closed anyway): %w", stack, err)
		}
	}
	if err := conn.Close(); err != nil {
		return err
	}
	return alertErr
}
