package frontdoor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/gmproxy/gmproxy/internal/record"
)

func TestSMReason(t *testing.T) {
	cause := errors.New("tlcp: no cipher suite supported by both client and server")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&record.AlertError{Alert: record.AlertBadCertificate, Remote: true}, ReasonPeerAlert},
		{fmt.Errorf("handshake: %w", &record.AlertError{Alert: record.AlertUnknownCA}), ReasonBadCertificate},
		{&record.AlertError{Alert: record.AlertHandshakeFailure, Err: cause}, ReasonNoSharedCipher},
		{&record.AlertError{Alert: record.AlertInternalError}, ReasonInternal},
		{&record.AlertError{Alert: record.AlertDecodeError}, ReasonProtocolError},
		{&record.AlertError{Alert: record.AlertDecodeError, Err: io.ErrUnexpectedEOF}, ReasonEOF},
		{fmt.Errorf("read: %w", os.ErrDeadlineExceeded), ReasonTimeout},
		{io.EOF, ReasonEOF},
	} {
		if got := smReason(tc.err); got != tc.want {
			t.Errorf("smReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
