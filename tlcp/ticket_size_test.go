package tlcp

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// TestTicketTooLargeForTheMessage: a client whose certificate chain comes
// near the 64 KiB a Certificate message holds makes a session that does
// not fit a ticket (ticket<0..2^16-1>). The server sends a zero-length
// ticket (RFC 5077 §3.3) and the handshake completes; before, it failed
// with internal_error, so such a client could never connect to a site
// with tickets on. The next connection makes a full handshake.
func TestTicketTooLargeForTheMessage(t *testing.T) {
	p := loadPKI(t)
	// A self-signed certificate with a large non-critical extension, sent
	// after the client's leaf, that fills the Certificate message: the
	// server does not need it to verify the chain, and keeps it with the
	// session.
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	client := p.client
	// The Certificate message at its largest (maxHandshake): a u24 list
	// of u24-prefixed certificates, the signing chain then the
	// encryption certificate.
	room := maxHandshake - 3 - 3*(len(client.SignCertificate)+2) - len(client.EncCertificate)
	for _, c := range client.SignCertificate {
		room -= len(c)
	}
	ext := 60000
	var bulky []byte
	for range 3 { // the lengths settle after one correction
		tmpl := &smx509.Certificate{
			SerialNumber:    big.NewInt(7),
			Subject:         pkix.Name{CommonName: "bulky"},
			ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Value: make([]byte, ext)}},
		}
		var err error
		if bulky, err = smx509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key); err != nil {
			t.Fatal(err)
		}
		ext += room - 4 - len(bulky) // the signature's DER length varies by 2
	}
	if len(bulky) > room || len(bulky) < room-8 {
		t.Fatalf("extra certificate of %d bytes, want %d", len(bulky), room)
	}
	client.SignCertificate = append(append([][]byte{}, client.SignCertificate...), bulky)
	scfg := p.serverConfig()
	scfg.ClientAuth = RequireAndVerifyClientCert
	scfg.TicketKeys = ticket.Static{testTicketKey(t, 1)}
	ccfg := p.clientConfig()
	ccfg.Certificates = []Certificate{client}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	r := runPair(t, scfg, ccfg, []byte("a"))
	if r.cerr != nil || r.serr != nil {
		t.Fatalf("handshake with a %d-byte extra certificate: client %v, server %v", len(bulky), r.cerr, r.serr)
	}
	r = runPair(t, scfg, ccfg, []byte("a"))
	if r.cerr != nil || r.serr != nil || r.ss.DidResume {
		t.Fatalf("second connection: client %v, server %v, resumed %v; want a full handshake", r.cerr, r.serr, r.ss.DidResume)
	}
	// Control: without the bulky certificate the session resumes.
	ccfg = p.clientConfig()
	ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
	runPair(t, scfg, ccfg, []byte("a"))
	if r := runPair(t, scfg, ccfg, []byte("a")); r.cerr != nil || r.serr != nil || !r.ss.DidResume {
		t.Fatalf("control: client %v, server %v, resumed %v", r.cerr, r.serr, r.ss.DidResume)
	}
}
