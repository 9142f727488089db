package tlcp_test

import (
	"fmt"
	"io"
	"log"
	"os"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/tlcp"
)

// A TLCP server with a sign/enc certificate pair and optional client
// authentication, and a client that trusts the CA.
func Example() {
	cert, err := tlcp.LoadX509KeyPair("server_sign.crt", "server_sign.key", "server_enc.crt", "server_enc.key", nil)
	if err != nil {
		log.Print(err)
		return
	}
	ca, _ := os.ReadFile("ca.crt")
	pool := smx509.NewCertPool()
	pool.AppendCertsFromPEM(ca)

	l, err := tlcp.Listen("tcp", "127.0.0.1:0", &tlcp.Config{
		Certificates: []tlcp.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tlcp.VerifyClientCertIfGiven,
		NextProtos:   []string{"h2", "http/1.1"},
	})
	if err != nil {
		log.Print(err)
		return
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()

	c, err := tlcp.Dial("tcp", l.Addr().String(), &tlcp.Config{
		RootCAs:            pool,
		ServerName:         "localhost",
		CipherSuites:       []uint16{tlcp.ECC_SM4_GCM_SM3},
		ClientSessionCache: tlcp.NewLRUClientSessionCache(64),
	})
	if err != nil {
		log.Print(err)
		return
	}
	defer c.Close()
	fmt.Println(tlcp.CipherSuiteName(c.ConnectionState().CipherSuite))
}
