package frontdoor

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// decryptingECDSA is an ECDSA key that claims to decrypt, as the offload
// wrapper once made every key look.
type decryptingECDSA struct{ *ecdsa.PrivateKey }

func (decryptingECDSA) Decrypt(io.Reader, []byte, crypto.DecrypterOpts) ([]byte, error) {
	return nil, errors.New("cannot decrypt")
}

// TestClassifyTLSKeyFailure: a crypto/tls server whose certificate key it
// cannot use fails the handshake with internal_error, and the reason
// counted is internal_error, not protocol_error.
func TestClassifyTLSKeyFailure(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: decryptingECDSA{key}}}}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	a.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	b.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
	errc := make(chan error, 1)
	go func() {
		c := tls.Client(b, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})
		errc <- c.Handshake()
		b.Close()
	}()
	serr := tls.Server(a, srvCfg).Handshake()
	if serr == nil {
		t.Fatal("handshake succeeded")
	}
	if got := Classify(serr); got != ReasonInternal {
		t.Errorf("Classify(%q) = %s, want %s", serr, got, ReasonInternal)
	}
	if cerr := <-errc; cerr == nil {
		t.Error("client handshake succeeded")
	}
	for _, msg := range []string{"tls: failed to sign ECDHE parameters: busy", "tls: unsupported signing key type (*sm2.PublicKey)"} {
		if got := Classify(errors.New(msg)); got != ReasonInternal {
			t.Errorf("Classify(%q) = %s, want %s", msg, got, ReasonInternal)
		}
	}
}

// helloRewriter is a client connection whose first write, a ClientHello in
// one record, has every entry of the uint16 list of extension ext
// replaced with v (the lengths stay, so the hello stays well formed).
type helloRewriter struct {
	net.Conn
	ext, v uint16
	done   bool
}

func (c *helloRewriter) Write(p []byte) (int, error) {
	if !c.done {
		c.done = true
		p = append([]byte(nil), p...)
		i := 5 + 4 + 2 + 32
		i += 1 + int(p[i])                    // session ID
		i += 2 + (int(p[i])<<8 | int(p[i+1])) // cipher suites
		i += 1 + int(p[i])                    // compression methods
		for i += 2; i+4 <= len(p); {
			typ, n := uint16(p[i])<<8|uint16(p[i+1]), int(p[i+2])<<8|int(p[i+3])
			if typ == c.ext {
				for j := i + 4 + 2; j < i+4+n; j += 2 {
					p[j], p[j+1] = byte(c.v>>8), byte(c.v)
				}
			}
			i += 4 + n
		}
	}
	return c.Conn.Write(p)
}

// TestClassifyTLSNegotiationFailures: a crypto/tls handshake that fails
// because the hello has nothing in common with the site (no group, no
// signature algorithm for its certificate, no application protocol) is
// counted as no_shared_cipher, as the same failures of TLCP and TLS 1.3-SM
// are (crypto/tls sends handshake_failure or no_application_protocol);
// they were counted as protocol_error, and a client without ECDSA
// signature algorithms as bad_certificate, which reads as a client
// certificate problem.
func TestClassifyTLSNegotiationFailures(t *testing.T) {
	cert, pool := testCert(t, "a.example.cn")
	hs := TLSHandshaker(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	for _, tc := range []struct {
		name     string
		alpn     []string
		ext, val uint16
	}{
		{name: "no shared group (curveSM2 only)", ext: 10, val: 0x0029},
		{name: "no signature algorithm for the ECDSA certificate", ext: 13, val: 0x0804},
		{name: "no shared application protocol", alpn: []string{"spdy/3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
				var cc net.Conn = c
				if tc.ext != 0 {
					cc = &helloRewriter{Conn: c, ext: tc.ext, v: tc.val}
				}
				tls.Client(cc, &tls.Config{ServerName: "a.example.cn", RootCAs: pool, NextProtos: tc.alpn}).Handshake()
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
			if got := Classify(serr); got != ReasonNoSharedCipher {
				t.Errorf("Classify(%q) = %s, want %s", serr, got, ReasonNoSharedCipher)
			}
			if got := ClientCertReason(serr); got != "" {
				t.Errorf("ClientCertReason(%q) = %q, want none", serr, got)
			}
		})
	}
}
