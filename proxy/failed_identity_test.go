package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestRouteIdentityMatchNeedsVerifiedCert: under client_auth
// optional_no_ca a client's certificate that FAILED verification (a
// self-signed one naming whoever the client likes) is forwarded with its
// subject, issuer and serial, as nginx does, but a route that matches
// those headers (X-Ssl-Client-S-Dn: "CN=admin…", a serial, a present
// X-Ssl-Client-Cert) must not take it for the identity it claims: such a
// route matches a verified certificate only, as it did before the mode
// existed. The backend still sees the FAILED certificate's headers.
func TestRouteIdentityMatchNeedsVerifiedCert(t *testing.T) {
	e := echoBackend(t)
	cert := testClientCert(t)
	for _, verified := range []bool{false, true} {
		st := frontdoor.ConnState{
			Site: "s", Family: frontdoor.FamilyTLCP, Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3",
			SNI: "example.test", PeerCertificates: []*smx509.Certificate{cert},
		}
		if verified {
			st.ClientAuth = true
		} else {
			st.ClientVerifyError = frontdoor.VerifyUnknownIssuer
		}
		sdn := dnString(encodedDN(cert.RawSubject, &cert.Subject))
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
			Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, Routes: []RouteConfig{
				{PathPrefix: "/sdn/", Headers: []HeaderMatch{{Name: HeaderClientSDN, Value: sdn}}, Upstream: "e", ClientCertHeaders: true},
				{PathPrefix: "/idn/", Headers: []HeaderMatch{{Name: HeaderClientIDN}}, Upstream: "e", ClientCertHeaders: true},
				{PathPrefix: "/serial/", Headers: []HeaderMatch{{Name: HeaderClientSerial, Value: serialHex(cert.SerialNumber)}}, Upstream: "e", ClientCertHeaders: true},
				{PathPrefix: "/pem/", Headers: []HeaderMatch{{Name: HeaderClientCert}}, Upstream: "e", ClientCertHeaders: true},
				{PathPrefix: "/open/", Upstream: "e", ClientCertHeaders: true},
				{PathPrefix: "/", Respond: &RespondConfig{Status: 403}},
			}}},
		}
		f := newFront(t, cfg, frontOpts{state: &st})
		c := testClient(t)
		for _, path := range []string{"/sdn/x", "/idn/x", "/serial/x", "/pem/x"} {
			code, body, _ := get(t, c, f.url+path, "Host", "example.test")
			want := 403
			if verified {
				want = 200
			}
			if code != want {
				t.Errorf("verified %v, %s: status %d, want %d (a route matching the client's identity)", verified, path, code, want)
			}
			if code == 200 {
				if h := decodeSeen(t, body).Header; h.Get(HeaderClientSDN) != sdn || h.Get(HeaderClientVerify) != "SUCCESS" {
					t.Errorf("verified %v, %s: backend saw %q %q", verified, path, h.Get(HeaderClientSDN), h.Get(HeaderClientVerify))
				}
			}
		}
		// A route that does not match on them forwards them as nginx does,
		// with the verification result the backend must check.
		wantVerify := "FAILED:" + frontdoor.VerifyUnknownIssuer
		if verified {
			wantVerify = "SUCCESS"
		}
		code, body, _ := get(t, c, f.url+"/open/x", "Host", "example.test")
		if h := decodeSeen(t, body).Header; code != 200 || h.Get(HeaderClientSDN) != sdn || h.Get(HeaderClientVerify) != wantVerify {
			t.Errorf("verified %v, /open/x: %d, backend saw %q %q, want %q %q", verified, code, h.Get(HeaderClientSDN), h.Get(HeaderClientVerify), sdn, wantVerify)
		}
	}
}

// TestAccessLogSubjectNeedsVerifiedCert: the access log's client_s_dn
// names a client whose certificate verified; under client_auth
// optional_no_ca a certificate that FAILED (any self-signed one, naming
// whom it likes) leaves it empty, as no certificate does: the log has no
// field saying the name was never checked, and an audit reading
// "CN=admin" there would take it for that client.
func TestAccessLogSubjectNeedsVerifiedCert(t *testing.T) {
	b := nameBackend(t, "b")
	cert := testClientCert(t)
	for _, verified := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "access.log")
		st := frontdoor.ConnState{Site: "s", Protocol: frontdoor.ProtoTLCP, Cipher: "ECC-SM2-SM4-GCM-SM3", SNI: "example.test",
			PeerCertificates: []*smx509.Certificate{cert}, ClientAuth: verified}
		if !verified {
			st.ClientVerifyError = frontdoor.VerifyUnknownIssuer
		}
		cfg := Config{
			Upstreams: []UpstreamConfig{upstream("u", addrOf(b))},
			Sites:     oneSite(RouteConfig{Name: "all", Upstream: "u"}),
			AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{uri} dn={client_s_dn}"},
		}
		f := newFront(t, cfg, frontOpts{state: &st})
		get(t, testClient(t), f.url+"/x")
		f.p.AccessLog().Flush()
		data, _ := os.ReadFile(path)
		want := "/x dn=-"
		if verified {
			want = "/x dn=" + strings.ReplaceAll(cert.Subject.String(), " ", `\x20`)
		}
		if got := strings.TrimSpace(string(data)); got != want {
			t.Errorf("verified %v: access log %q, want %q", verified, got, want)
		}
	}
}
