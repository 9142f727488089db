package record

import (
	"errors"
	"fmt"
	"testing"
)

func TestAlertString(t *testing.T) {
	for a, want := range map[Alert]string{
		0:   "close notify",
		21:  "decryption failed", // TLS 1.2 / TLCP; RESERVED in TLS 1.3
		42:  "bad certificate",
		48:  "unknown certificate authority",
		86:  "inappropriate fallback",
		116: "certificate required",
		120: "no application protocol",
		200: "unsupported site2site", // GB/T 38636 §6.3.4.2
		205: "identity needed",
		1:   "alert(1)",
		121: "alert(121)",
		206: "alert(206)",
		255: "alert(255)",
	} {
		if got := a.String(); got != want {
			t.Errorf("Alert(%d).String() = %q, want %q", uint8(a), got, want)
		}
	}
}

func TestAlertLevel(t *testing.T) {
	for a := range 256 {
		want := uint8(AlertLevelFatal)
		switch Alert(a) {
		case AlertCloseNotify, AlertUserCanceled, AlertNoRenegotiation:
			want = AlertLevelWarning
		}
		if got := Alert(a).Level(); got != want {
			t.Errorf("Alert(%d).Level() = %d, want %d", a, got, want)
		}
	}
}

func TestAlertIsCertificate(t *testing.T) {
	for a := range 256 {
		want := false
		switch a {
		case 42, 43, 44, 45, 46, 48, 116:
			want = true
		}
		if got := Alert(a).IsCertificate(); got != want {
			t.Errorf("Alert(%d).IsCertificate() = %v", a, got)
		}
	}
}

func TestAlertError(t *testing.T) {
	cause := errors.New("tlcp: bad Finished")
	local := fmt.Errorf("handshake: %w", &AlertError{Alert: AlertDecryptError, Err: cause})
	var ae *AlertError
	if !errors.As(local, &ae) || ae.Remote || ae.Alert != AlertDecryptError || !errors.Is(local, cause) {
		t.Fatalf("local alert not classified: %v", local)
	}
	for _, tc := range []struct {
		err  *AlertError
		want string
	}{
		{&AlertError{Alert: AlertBadCertificate, Remote: true}, "remote error: bad certificate"},
		{&AlertError{Alert: AlertDecryptError, Err: cause}, "tlcp: bad Finished (sent alert: error decrypting message)"},
		{&AlertError{Alert: AlertInternalError}, "sent alert: internal error"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
