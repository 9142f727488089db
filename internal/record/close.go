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

// closeSequence is Conn.Close: gate refuses a second Close, complete says
// whether to notify, stack names the stack in the error.
//
// A Close while a Write is under way only closes conn, as crypto/tls's
// does: io.Writer and io.Closer are not meant to be used concurrently, so
// such a Close is there to break the Write (a peer that reads nothing, a
// shutdown). notify would wait for the stack's output lock, which the
// Write holds until it ends, which may be never.
func closeSequence(gate *callgate.Gate, conn net.Conn, complete bool, notify func() error, stack string) error {
	first, writing := gate.Close()
	if !first {
		return net.ErrClosed
	}
	if writing {
		return conn.Close()
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
