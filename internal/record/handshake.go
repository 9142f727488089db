package record

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
)

// ConnDeadline is implemented by a context that ends only at its deadline
// when that deadline is already set on the connection being handshaken
// (frontdoor's handshake context): the connection's reads and writes fail
// in time by themselves, so Conn.Handshake does not watch the context,
// which saves a context.AfterFunc registration per handshake. Its Err
// still reports the deadline, so a handshake that failed after it passed
// returns the context's error as with any other context.
type ConnDeadline interface {
	context.Context
	ConnDeadline()
}

// closeOnDone watches ctx while a handshake runs: if ctx ends first, conn
// is closed, which makes the handshake's blocked reads and writes fail.
// stop ends the watch and returns ctx's error if it closed conn (once the
// close has returned), nil otherwise. A ctx that can never end starts
// nothing. The watch is a context.AfterFunc: no goroutine runs unless ctx
// ends, so a handshake that finishes in time costs no goroutine switch.
func closeOnDone(ctx context.Context, conn io.Closer) (stop func() error) {
	if ctx.Done() == nil {
		return stopNothing
	}
	w := &closeWatch{ctx: ctx, conn: conn, closed: make(chan struct{})}
	w.cancel = context.AfterFunc(ctx, w.fire)
	return w.stop
}

// closeWatch is one closeOnDone watch.
type closeWatch struct {
	ctx    context.Context
	conn   io.Closer
	cancel func() bool
	closed chan struct{} // closed by fire once conn is closed
}

func (w *closeWatch) fire() {
	w.conn.Close()
	close(w.closed)
}

func (w *closeWatch) stop() error {
	if w.cancel() {
		return nil // ctx did not end in time: fire will never run
	}
	<-w.closed // fire runs or ran
	return w.ctx.Err()
}

func stopNothing() error { return nil }

// IsTimeout reports whether a handshake failed because time ran out: a
// passed connection deadline, a context deadline or a network timeout.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}
