package record

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
)

// CloseOnDone watches ctx while a handshake runs: if ctx ends first, conn
// is closed, which makes the handshake's blocked reads and writes fail.
// stop ends the watch and returns ctx's error if it closed conn, nil
// otherwise. A ctx that can never end starts nothing.
func CloseOnDone(ctx context.Context, conn io.Closer) (stop func() error) {
	if ctx.Done() == nil {
		return stopNothing
	}
	done := make(chan struct{})
	interrupted := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
			conn.Close()
			interrupted <- ctx.Err()
		case <-done:
			interrupted <- nil
		}
	}()
	return func() error {
		close(done)
		return <-interrupted
	}
}

func stopNothing() error { return nil }

// IsTimeout reports whether a handshake failed because time ran out: a
// passed connection deadline, a context deadline or a network timeout.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}
