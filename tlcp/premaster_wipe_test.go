package tlcp

import (
	"context"
	"crypto"
	"io"
	"testing"

	"github.com/emmansun/gmsm/ecdh"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

// keptDecrypter decrypts with dec and keeps what it returned.
type keptDecrypter struct {
	crypto.Signer
	dec  crypto.Decrypter
	kept [][]byte
}

func (k *keptDecrypter) Decrypt(r io.Reader, m []byte, o crypto.DecrypterOpts) ([]byte, error) {
	out, err := k.dec.Decrypt(r, m, o)
	k.kept = append(k.kept, out)
	return out, err
}

// keptKA agrees keys with the wrapped key and keeps what it returned.
type keptKA struct {
	smkey.KeyAgreement
	kept *[][]byte
}

func (k keptKA) SM2KeyAgree(ctx context.Context, e *ecdh.PrivateKey, ps, pe *ecdh.PublicKey, resp bool, n int, u, pu []byte) ([]byte, error) {
	out, err := k.KeyAgreement.SM2KeyAgree(ctx, e, ps, pe, resp, n, u, pu)
	*k.kept = append(*k.kept, out)
	return out, err
}

// TestServerPreMasterWiped checks that the server wipes the pre-master
// secret (the decrypted ClientKeyExchange, or the SM2 key agreement's
// output) once the master secret is derived from it, so that it does not
// outlive the handshake in freed memory.
func TestServerPreMasterWiped(t *testing.T) {
	p := loadPKI(t)
	for _, suite := range []uint16{ECC_SM4_GCM_SM3, ECDHE_SM4_GCM_SM3} {
		var kept [][]byte
		cert := p.server
		var kd *keptDecrypter
		if cipherSuiteByID(suite).ecdhe {
			cert.EncKey = keptKA{KeyAgreement: smkey.AsKeyAgreement(p.server.EncKey), kept: &kept}
		} else {
			kd = &keptDecrypter{Signer: p.server.EncKey.(crypto.Signer), dec: p.server.EncKey.(crypto.Decrypter)}
			cert.EncKey = kd
		}
		runTLCPHandshake(t, p, cert, suite)
		if kd != nil {
			kept = kd.kept
		}
		checkWiped(t, suite, kept)
	}
}

func runTLCPHandshake(t *testing.T, p *testPKI, cert Certificate, suite uint16) {
	t.Helper()
	scfg := &Config{Certificates: []Certificate{cert}, CipherSuites: []uint16{suite}}
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, p.clientConfig()), Server(c2, scfg)
	defer cli.Close()
	defer srv.Close()
	errc := make(chan error, 1)
	go func() { errc <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func checkWiped(t *testing.T, suite uint16, kept [][]byte) {
	t.Helper()
	if len(kept) != 1 || len(kept[0]) != 48 {
		t.Fatalf("suite %#04x: key operation returned %d results, want one 48-byte pre-master", suite, len(kept))
	}
	for _, b := range kept[0] {
		if b != 0 {
			t.Errorf("suite %#04x: the pre-master secret is left in memory after the handshake", suite)
			return
		}
	}
}

// TestClientPreMasterWiped is TestServerPreMasterWiped for the client's
// ECDHE pre-master (its SM2 key agreement's output).
func TestClientPreMasterWiped(t *testing.T) {
	p := loadPKI(t)
	var kept [][]byte
	ccfg := p.clientConfig()
	ccfg.Certificates[0].EncKey = keptKA{KeyAgreement: smkey.AsKeyAgreement(p.client.EncKey), kept: &kept}
	scfg := &Config{Certificates: []Certificate{p.server}, CipherSuites: []uint16{ECDHE_SM4_GCM_SM3}}
	c1, c2 := tcpPair(t)
	cli, srv := Client(c1, ccfg), Server(c2, scfg)
	defer cli.Close()
	defer srv.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkWiped(t, ECDHE_SM4_GCM_SM3, kept)
}
