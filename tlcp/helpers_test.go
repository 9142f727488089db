package tlcp

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	rec "github.com/gmproxy/gmproxy/internal/transcript"
)

// testPKI is the shared Tongsuo-made test PKI (../shared/testdata/pki-tongsuo).
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
		ca, err := os.ReadFile(f("ca.crt"))
		if err != nil {
			pkiErr = err
			return
		}
		p.pool = smx509.NewCertPool()
		p.pool.AppendCertsFromPEM(ca)
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

// tcpPair returns two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	c1, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c2 := <-ch
	if c2 == nil {
		t.Fatal("accept failed")
	}
	deadline := time.Now().Add(20 * time.Second)
	c1.SetDeadline(deadline)
	c2.SetDeadline(deadline)
	return c1, c2
}
