package tlsutil

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

// IsCertificateAlert reports whether an alert description says a
// certificate was refused: bad_certificate, unsupported_certificate,
// certificate_revoked, certificate_expired, certificate_unknown,
// unknown_ca (RFC 5246 §7.2, GB/T 38636 §6.4.4.3) or TLS 1.3's
// certificate_required (RFC 8446 §6.2).
func IsCertificateAlert(desc uint8) bool {
	switch desc {
	case 42, 43, 44, 45, 46, 48, 116:
		return true
	}
	return false
}
