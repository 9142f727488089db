package tls13sm

import (
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testpeer"
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
	huge := testpeer.WithFillerCAs(t, roots)
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
