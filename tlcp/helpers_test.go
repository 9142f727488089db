package tlcp

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/ticket"
	rec "github.com/gmproxy/gmproxy/internal/transcript"
)

// testPKI is the Tongsuo-made test PKI in the module's testdata/pki-tongsuo.
type testPKI struct {
	dir            string
	server, client Certificate
	pool           *smx509.CertPool
}

var (
	pkiOnce sync.Once
	pki     *testPKI
	pkiErr  error
)

func loadPKI(t testing.TB) *testPKI {
	t.Helper()
	pkiOnce.Do(func() {
		dir, err := rec.PKIDir()
		if err != nil {
			pkiErr = err
			return
		}
		p := &testPKI{dir: dir}
		f := func(n string) string { return filepath.Join(dir, n) }
		p.server, err = LoadX509KeyPair(f("server_sign.crt"), f("server_sign.key"), f("server_enc.crt"), f("server_enc.key"), nil)
		if err != nil {
			pkiErr = err
			return
		}
		p.client, err = LoadX509KeyPair(f("client_sign.crt"), f("client_sign.key"), f("client_enc.crt"), f("client_enc.key"), nil)
		if err != nil {
			pkiErr = err
			return
		}
		if p.pool, err = testpeer.CAPool(dir); err != nil {
			pkiErr = err
			return
		}
		pki = p
	})
	if pkiErr != nil {
		t.Fatalf("test PKI: %v", pkiErr)
	}
	return pki
}

func (p *testPKI) serverConfig() *Config {
	return &Config{Certificates: []Certificate{p.server}, ClientCAs: p.pool}
}

func (p *testPKI) clientConfig() *Config {
	return &Config{RootCAs: p.pool, ServerName: "localhost", Certificates: []Certificate{p.client}}
}

// tcpPair returns two ends of a loopback TCP connection (dialled end first).
var tcpPair = testpeer.TCPPair

// testTicketKey is a ticket key whose secret is 32 bytes of secret.
func testTicketKey(t testing.TB, secret byte) ticket.Key {
	t.Helper()
	k, err := ticket.NewKey(bytes.Repeat([]byte{secret}, 32), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k
}
