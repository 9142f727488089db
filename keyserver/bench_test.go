package keyserver

import (
	"context"
	"crypto"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/keyoffload"
	"github.com/gmproxy/gmproxy/tlcp"
)

// BenchmarkPipelining measures key-server operations per second over one
// mutual-TLS connection on loopback, alternating in each iteration a batch
// of pipelined operations (benchBatch in flight at once) with the same
// number one at a time (each waits for the previous answer), and reports
// both rates and their ratio. Client and key server share the process.
// op is sign (SM2 signing on the key server) or ping (the protocol alone).
func BenchmarkPipelining(b *testing.B) {
	for _, op := range []Op{OpSign, OpPing} {
		b.Run(op.String(), func(b *testing.B) { benchPipelining(b, op) })
	}
}

const benchBatch = 64

func benchPipelining(b *testing.B, op Op) {
	keys := testKeys(b)
	pki := newTestPKI(b)
	cliTLS, _ := pki.client(b, "edge")
	ks := startServer(b, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	kc := newClient(b, cliTLS, ks.addr)
	kc.Conns = 1
	rk := remote(b, kc, keys[0])
	ctx := context.Background()
	one := func() {
		var err error
		if op == OpPing {
			err = kc.Ping(ctx)
		} else {
			_, err = rk.SignContext(ctx, nil, testMsg, testOpts)
		}
		if err != nil {
			b.Error(err)
		}
	}
	one() // connect
	var serial, piped time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var wg sync.WaitGroup
		for range benchBatch {
			wg.Add(1)
			go func() { defer wg.Done(); one() }()
		}
		wg.Wait()
		piped += time.Since(start)
		start = time.Now()
		for range benchBatch {
			one()
		}
		serial += time.Since(start)
	}
	ops := float64(b.N * benchBatch)
	b.ReportMetric(ops/piped.Seconds(), "pipelined-ops/s")
	b.ReportMetric(ops/serial.Seconds(), "serial-ops/s")
	b.ReportMetric(serial.Seconds()/piped.Seconds(), "pipelined/serial")
}

// BenchmarkRemoteKeyInterleaved alternates full TLCP ECC-SM4-GCM
// handshakes whose server keys are local (behind the offload engine) with
// the same handshakes whose keys are on an in-process key server reached
// over mutual TLS on loopback, and reports each one's mean wall time and
// their ratio: the cost of the two round trips (sign, decrypt) to the key
// server. Client, server and key server share the process, so the key
// server's own work is inside the figure.
func BenchmarkRemoteKeyInterleaved(b *testing.B) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		b.Fatal(err)
	}
	keys := devKeys(p)
	pki := newTestPKI(b)
	cliTLS, _ := pki.client(b, "edge")
	ks := startServer(b, pki, &Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}, nil)
	kc := newClient(b, cliTLS, ks.addr)
	off := keyoffload.New(keyoffload.Config{}, nil)
	defer off.Close()

	var configs [2]*tlcp.Config
	for i, pair := range [2][2]crypto.Signer{{keys[0].Private, keys[1].Private}, {remote(b, kc, keys[0]), remote(b, kc, keys[1])}} {
		configs[i] = &tlcp.Config{
			Certificates: []tlcp.Certificate{{
				SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: off.Wrap(pair[0], frontdoor.FamilyTLCP),
				EncCertificate: p.ServerEnc.Cert.Raw, EncKey: off.Wrap(pair[1], frontdoor.FamilyTLCP),
			}},
			SessionCacheDisabled: true, SessionTicketsDisabled: true,
		}
	}
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	cli := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, SessionTicketsDisabled: true}
	var total [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range configs {
			k := (i + j) % 2 // alternate the order too
			start := time.Now()
			if cerr, serr := tlcpHandshake(configs[k], cli); cerr != nil || serr != nil {
				b.Fatal(cerr, serr)
			}
			total[k] += time.Since(start)
		}
	}
	b.ReportMetric(float64(total[0].Nanoseconds())/float64(b.N), "local-ns/op")
	b.ReportMetric(float64(total[1].Nanoseconds())/float64(b.N), "remote-ns/op")
	b.ReportMetric(float64(total[1])/float64(total[0]), "remote/local")
}
