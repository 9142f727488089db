package tls13sm

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestClientCANamesTooLargeOmitted: the certificate_authorities extension
// of CertificateRequest (RFC 8446 §4.2.4) holds at most 64 KiB of CA
// names. A ClientCAs pool whose names do not fit made every handshake
// that asks for a client certificate fail with internal_error; the
// extension is optional, so it is left out and the client chooses its
// certificate without it. A pool whose names fit still sends them.
func TestClientCANamesTooLargeOmitted(t *testing.T) {
	p := loadPKI(t)
	clientCert, roots := chainWithIntermediate(t, time.Now().Add(time.Hour))
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	huge := roots.Clone()
	for i := range 70 { // 70 names of about 1 KiB: over 64 KiB
		tmpl := &smx509.Certificate{SerialNumber: bigInt(int64(5000 + i)),
			Subject:   pkix.Name{CommonName: fmt.Sprintf("filler CA %d %s", i, strings.Repeat("x", 1000))},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: smx509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := smx509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		huge.AddCert(c)
	}
	for _, tc := range []struct {
		name      string
		pool      *smx509.CertPool
		wantNames bool
	}{{"fits", roots, true}, {"too-large", huge, false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &Config{Certificates: []Certificate{p.server}, ClientCAs: tc.pool, ClientAuth: RequireAndVerifyClientCert,
				TicketKeys: ticket.Static(mustKeys(t, 1))}
			var got [][]byte
			cli := &Config{RootCAs: p.roots, ServerName: "localhost",
				GetClientCertificate: func(cas [][]byte) (*Certificate, error) { got = cas; return &clientCert, nil }}
			a, b := tcpPair(t)
			s, c := Server(a, srv), Client(b, cli)
			defer s.Close()
			defer c.Close()
			errc := make(chan error, 1)
			go func() { errc <- s.Handshake() }()
			cerr := c.Handshake()
			if serr := <-errc; serr != nil || cerr != nil {
				t.Fatalf("handshake: server %v, client %v; want success", serr, cerr)
			}
			if (len(got) > 0) != tc.wantNames {
				t.Fatalf("client saw %d CA names; want names: %v", len(got), tc.wantNames)
			}
		})
	}
}

func bigInt(v int64) *big.Int { return big.NewInt(v) }
