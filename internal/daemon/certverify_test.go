package daemon

import (
	"errors"
	"testing"

	"github.com/gmproxy/gmproxy/tlcp"
)

// TestTLCPClientCertificateVerifyForms: by default a TLCP site accepts the
// client CertificateVerify signed over SM3 of the handshake messages
// (Tongsuo, GmSSL 3.1.1) and the one signed over the raw messages (GmSSL's
// current code); with accept_raw_certificate_verify false the raw form is
// refused with decrypt_error. ECDHE suites always authenticate the client.
func TestTLCPClientCertificateVerifyForms(t *testing.T) {
	p := testPKI(t)
	b := newBackend(t)
	for _, accept := range []bool{true, false} {
		cfg := testConfig(t, b.Listener.Addr().String())
		if !cfg.Sites[0].TLCP.AcceptRawCertificateVerify {
			t.Fatal("the default site does not accept the raw CertificateVerify")
		}
		cfg.Sites[0].TLCP.AcceptRawCertificateVerify = accept
		td := startDaemon(t, cfg)
		for _, raw := range []bool{false, true} {
			c := dialTLCP(t, td.addr, &tlcp.Config{ServerName: "localhost", CipherSuites: []uint16{tlcp.ECDHE_SM4_GCM_SM3},
				ClientRawCertificateVerify: raw,
				Certificates: []tlcp.Certificate{{
					SignCertificate: [][]byte{p.ClientSign.Cert.Raw}, SignKey: p.ClientSign.Key,
					EncCertificate: p.ClientEnc.Cert.Raw, EncKey: p.ClientEnc.Key,
				}}})
			err := c.Handshake()
			c.Close()
			if want := !raw || accept; (err == nil) != want {
				t.Errorf("accept=%v raw=%v: handshake error %v", accept, raw, err)
				continue
			}
			if err != nil {
				var ae *tlcp.AlertError
				if !errors.As(err, &ae) || !ae.Remote || ae.Alert != tlcp.AlertDecryptError {
					t.Errorf("accept=%v raw=%v: error %v, want the server's decrypt_error", accept, raw, err)
				}
			}
		}
	}
}
