package tls13sm

import (
	"testing"
)

// TestHandshakeBufferReleased: the buffer that reassembles handshake
// messages grows to the largest one the client sent (a certificate chain,
// a padded ClientHello: up to 64 KiB); an established connection must not
// keep it for its whole life, idle or not.
func TestHandshakeBufferReleased(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	srvCfg.ClientAuth = RequireAnyClientCert
	leaf := cliCfg.Certificates[0]
	chain := leaf.Certificate[:1:1]
	for len(chain) < 10 { // the most a chain may have
		chain = append(chain, leaf.Certificate[0])
	}
	cliCfg.Certificates = []Certificate{{Certificate: chain, PrivateKey: leaf.PrivateKey}}
	a, b := tcpPair(t)
	srv, cli := Server(a, srvCfg), Client(b, cliCfg)
	t.Cleanup(func() { srv.Close(); cli.Close() })
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := len(srv.ConnectionState().PeerCertificates); got != len(chain) {
		t.Fatalf("server saw %d client certificates, want %d", got, len(chain))
	}
	if n := cap(srv.core.Hand); n > 0 {
		t.Errorf("established server connection holds a %d-byte handshake buffer", n)
	}
	// It is still usable for post-handshake messages.
	if _, err := cli.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if n, err := srv.Read(buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}
