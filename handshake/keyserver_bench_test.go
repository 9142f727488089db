package handshake

import (
	"context"
	"crypto"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/tlcp"
)

// BenchmarkRemoteKeyInterleaved alternates full TLCP ECC-SM4-GCM
// handshakes whose server keys are local (behind the offload engine) with
// the same handshakes whose keys are on an in-process key server reached
// over mutual TLS on loopback (pooled connections), and reports each
// one's mean wall time and their ratio: the cost of the two round trips
// (sign, decrypt) to the key server. Client, server and key server share
// the process, so the key server's own work is inside the figure.
func BenchmarkRemoteKeyInterleaved(b *testing.B) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		b.Fatal(err)
	}
	signKey, encKey := p.ServerSign.Key.(*sm2.PrivateKey), p.ServerEnc.Key.(*sm2.PrivateKey)
	srvTLS, cliTLS := mtlsPair(b)
	ks := &KeyServer{}
	ks.AddKey(signKey)
	ks.AddKey(encKey)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		b.Fatal(err)
	}
	go ks.Serve(ln)
	defer ks.Shutdown(context.Background())
	kc := &KeyClient{Dial: tlsDial(cliTLS, ln.Addr().String()), Timeout: 10 * time.Second}
	defer kc.Close()
	rs, _ := NewRemoteKey(kc, &signKey.PublicKey)
	re, _ := NewRemoteKey(kc, &encKey.PublicKey)
	off := NewOffload(OffloadConfig{}, nil)
	defer off.Close()

	configs := [2]*tlcp.Config{}
	for i, keys := range [2][2]crypto.Signer{{signKey, encKey}, {rs, re}} {
		configs[i] = &tlcp.Config{
			Certificates: []tlcp.Certificate{{
				SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: off.Wrap(keys[0], FamilyTLCP),
				EncCertificate: p.ServerEnc.Cert.Raw, EncKey: off.Wrap(keys[1], FamilyTLCP),
			}},
			SessionCacheDisabled: true, SessionTicketsDisabled: true,
		}
	}
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	cli := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, SessionTicketsDisabled: true}
	serve := func(cfg *tlcp.Config) func(net.Conn) error {
		return func(s net.Conn) error { return tlcp.Server(s, cfg).Handshake() }
	}
	b.ResetTimer()
	total := interleaveTLCPHandshakes(b, cli, [2]func(net.Conn) error{serve(configs[0]), serve(configs[1])})
	b.ReportMetric(float64(total[0].Nanoseconds())/float64(b.N), "local-ns/op")
	b.ReportMetric(float64(total[1].Nanoseconds())/float64(b.N), "remote-ns/op")
	b.ReportMetric(float64(total[1])/float64(total[0]), "remote/local")
}
