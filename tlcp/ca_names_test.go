package tlcp

import (
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestClientCANamesTooLargeSentEmpty: a CertificateRequest's
// certificate_authorities (GB/T 38636-2020 §6.4.5.5) has a 2-byte length,
// and peers accept handshake messages of at most 64 KiB. A ClientCAs pool
// whose names do not fit made every handshake that asks for a client
// certificate fail with internal_error; the list is then sent empty,
// which lets the client send a certificate of any CA (RFC 5246 §7.4.4),
// and the server still verifies it against the pool. A pool whose names
// fit still sends them.
func TestClientCANamesTooLargeSentEmpty(t *testing.T) {
	p := loadPKI(t)
	huge := testpeer.WithFillerCAs(t, p.pool)
	for _, tc := range []struct {
		name      string
		pool      *smx509.CertPool
		wantNames int
	}{{"fits", p.pool, len(p.pool.Subjects())}, {"too-large", huge, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			scfg, ccfg := p.serverConfig(), p.clientConfig()
			scfg.ClientCAs, scfg.ClientAuth = tc.pool, RequireAndVerifyClientCert
			rec := &testpeer.Recorder{Type: typeCertificateRequest}
			scfg.testHandshakeOut = rec.Out
			r := runPair(t, scfg, ccfg, []byte("ping"))
			if r.cerr != nil || r.serr != nil {
				t.Fatalf("handshake: client %v, server %v; want success", r.cerr, r.serr)
			}
			if len(r.ss.VerifiedChains) == 0 {
				t.Fatal("server did not verify the client's certificate")
			}
			msgs := rec.Msgs()
			if len(msgs) != 1 {
				t.Fatalf("server sent %d CertificateRequests, want 1", len(msgs))
			}
			var req certificateRequestMsg
			if !req.unmarshal(msgs[0]) {
				t.Fatal("malformed CertificateRequest")
			}
			if len(req.certificateAuthorities) != tc.wantNames {
				t.Fatalf("CertificateRequest carries %d CA names, want %d", len(req.certificateAuthorities), tc.wantNames)
			}
		})
	}
}
