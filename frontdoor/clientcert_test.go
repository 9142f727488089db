package frontdoor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/revocation"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// selfSigned makes a certificate valid from notBefore to notAfter with
// client-auth usage when client is set, else server-auth usage.
func selfSigned(t *testing.T, notBefore, notAfter time.Time, client bool) *smx509.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	eku := x509.ExtKeyUsageServerAuth
	if client {
		eku = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{eku},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func verifyErr(t *testing.T, c *smx509.Certificate, roots *smx509.CertPool) error {
	t.Helper()
	_, err := c.Verify(smx509.VerifyOptions{Roots: roots, KeyUsages: []smx509.ExtKeyUsage{smx509.ExtKeyUsageClientAuth}})
	if err == nil {
		t.Fatal("certificate verified")
	}
	return err
}

func crlErr(reason string) error {
	return &revocation.Error{Reason: reason, Serial: big.NewInt(1), Issuer: "CN=CA"}
}

func TestClientCertReason(t *testing.T) {
	now := time.Now()
	good := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour), true)
	expired := selfSigned(t, now.Add(-2*time.Hour), now.Add(-time.Hour), true)
	serverOnly := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour), false)
	pool := func(c *smx509.Certificate) *smx509.CertPool {
		p := smx509.NewCertPool()
		p.AddCert(c)
		return p
	}
	other := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour), true)

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown CA (smx509, wrapped)", fmt.Errorf("client certificate: %w", verifyErr(t, good, pool(other))), ClientCertUnknownCA},
		{"expired (smx509)", verifyErr(t, expired, pool(expired)), ClientCertExpired},
		{"key usage (smx509)", verifyErr(t, serverOnly, pool(serverOnly)), ClientCertKeyUsage},
		{"unknown CA (crypto/x509)", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, ClientCertUnknownCA},
		{"expired (crypto/x509)", x509.CertificateInvalidError{Reason: x509.Expired}, ClientCertExpired},
		{"crypto/tls without certificate", errors.New("tls: client didn't provide a certificate"), ClientCertNone},
		{"crypto/tls bad signature", errors.New("tls: invalid signature by the client certificate: crypto/ecdsa: verification error"), ClientCertBadSignature},
		{"tls13sm certificate_required", &tls13sm.AlertError{Alert: tls13sm.AlertCertificateRequired, Err: errors.New("client sent no certificate")}, ClientCertNone},
		{"tls13sm bad CertificateVerify", &tls13sm.AlertError{Alert: tls13sm.AlertDecryptError, Err: errors.New("client CertificateVerify: bad signature")}, ClientCertBadSignature},
		{"tlcp bad_certificate", fmt.Errorf("handshake: %w", &tlcp.AlertError{Alert: tlcp.AlertBadCertificate}), ClientCertOther},
		{"tlcp certificate_expired", &tlcp.AlertError{Alert: tlcp.AlertCertificateExpired}, ClientCertExpired},
		{"tlcp unknown_ca", &tlcp.AlertError{Alert: tlcp.AlertUnknownCA}, ClientCertUnknownCA},
		// client_auth.crl's refusals, as the daemon's hooks return them.
		{"revoked (tlcp)", &tlcp.AlertError{Alert: tlcp.AlertCertificateRevoked, Err: fmt.Errorf("tlcp: VerifyPeerCertificate: %w", crlErr(revocation.ReasonRevoked))}, ClientCertRevoked},
		{"CRL expired (tls13sm)", &tls13sm.AlertError{Alert: tls13sm.AlertBadCertificate, Err: fmt.Errorf("tls13sm: %w", crlErr(revocation.ReasonCRLExpired))}, ClientCertCRLExpired},
		{"no CRL (crypto/tls)", crlErr(revocation.ReasonNoCRL), ClientCertNoCRL},
		// Not about the client certificate.
		{"peer's bad_certificate alert", &tls13sm.AlertError{Alert: tls13sm.AlertBadCertificate, Remote: true}, ""},
		{"timeout", errors.New("i/o timeout"), ""},
		{"bad Finished", &tls13sm.AlertError{Alert: tls13sm.AlertDecryptError, Err: errors.New("client Finished does not verify")}, ""},
		{"nil", nil, ""},
	} {
		if got := ClientCertReason(tc.err); got != tc.want {
			t.Errorf("%s: ClientCertReason(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestClientCertReasonTLSUnusableCertificate: crypto/tls refusing a client
// certificate it cannot use (an SM2 one, which crypto/x509 does not parse,
// sent by a TLS client) is a client certificate refused, counted as
// "other" as TLCP counts a bad or unsupported certificate; it was not
// counted at all.
func TestClientCertReasonTLSUnusableCertificate(t *testing.T) {
	pki, err := devpki.Generate(devpki.Options{Hosts: []string{"a.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(pki.ECDSACA.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	srv := tls.Certificate{Certificate: [][]byte{pki.ECDSAServer.Cert.Raw}, PrivateKey: pki.ECDSAServer.Key}
	sm2Client := &tls.Certificate{Certificate: [][]byte{pki.ClientSign.Cert.Raw}, PrivateKey: pki.ClientSign.Key}
	for _, mode := range []tls.ClientAuthType{tls.VerifyClientCertIfGiven, tls.RequireAndVerifyClientCert} {
		t.Run(mode.String(), func(t *testing.T) {
			hs := TLSHandshaker(&tls.Config{Certificates: []tls.Certificate{srv}, ClientAuth: mode, ClientCAs: roots})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
				tls.Client(c, &tls.Config{ServerName: "a.example.cn", RootCAs: roots,
					GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return sm2Client, nil },
				}).Handshake()
			}()
			raw, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
			_, serr := hs.Handshake(context.Background(), raw, nil)
			if serr == nil {
				t.Fatal("handshake succeeded")
			}
			if got := ClientCertReason(serr); got != ClientCertOther {
				t.Errorf("ClientCertReason(%q) = %q, want %q", serr, got, ClientCertOther)
			}
		})
	}
	for _, msg := range []string{
		"tls: client certificate contains an unsupported public key of type *dsa.PublicKey",
		"tls: client sent certificate containing RSA key larger than 8192 bits",
	} {
		if got := ClientCertReason(errors.New(msg)); got != ClientCertOther {
			t.Errorf("ClientCertReason(%q) = %q, want %q", msg, got, ClientCertOther)
		}
	}
}

// TestClientVerifyErrorsOpenSSLWords: the reasons of ClientVerifyErrors
// are X509_verify_cert_error_string's texts in OpenSSL 3 and Tongsuo
// (crypto/x509/x509_txt.c), which nginx's $ssl_client_verify gives after
// "FAILED:"; OpenSSL 1.1's other spellings map to them.
func TestClientVerifyErrorsOpenSSLWords(t *testing.T) {
	want := []string{
		"unable to get local issuer certificate",       // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
		"self-signed certificate",                      // X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
		"self-signed certificate in certificate chain", // X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
		"certificate has expired",                      // X509_V_ERR_CERT_HAS_EXPIRED
		"certificate is not yet valid",                 // X509_V_ERR_CERT_NOT_YET_VALID
		"certificate revoked",                          // X509_V_ERR_CERT_REVOKED
		"unable to get certificate CRL",                // X509_V_ERR_UNABLE_TO_GET_CRL
		"CRL has expired",                              // X509_V_ERR_CRL_HAS_EXPIRED
		"certificate chain too long",                   // X509_V_ERR_CERT_CHAIN_TOO_LONG
		"unsuitable certificate purpose",               // X509_V_ERR_INVALID_PURPOSE
		"invalid CA certificate",                       // X509_V_ERR_INVALID_CA
		"path length constraint exceeded",              // X509_V_ERR_PATH_LENGTH_EXCEEDED
		"unspecified certificate verification error",   // X509_V_ERR_UNSPECIFIED
	}
	if !slices.Equal(ClientVerifyErrors, want) {
		t.Errorf("ClientVerifyErrors %q, want %q", ClientVerifyErrors, want)
	}
	for old, now := range OpenSSL11VerifyErrors {
		if !slices.Contains(ClientVerifyErrors, now) || slices.Contains(ClientVerifyErrors, old) {
			t.Errorf("OpenSSL 1.1's %q maps to %q; want a reason of ClientVerifyErrors in place of one that is not", old, now)
		}
	}
}
