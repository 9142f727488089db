package frontdoor

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/tlcp"
)

// tlcpBenchConfigs returns a server and a client config for ECC-SM4-GCM.
func tlcpBenchConfigs(b *testing.B) (*tlcp.Config, *tlcp.Config) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		b.Fatal(err)
	}
	srv := &tlcp.Config{
		Certificates: []tlcp.Certificate{{
			SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: p.ServerSign.Key,
			EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
		}},
		SessionCacheDisabled:   true,
		SessionTicketsDisabled: true,
	}
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	cli := &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, SessionTicketsDisabled: true}
	return srv, cli
}

// benchHandshakes runs b.N full TLCP handshakes over net.Pipe with serve
// doing the server side.
func benchHandshakes(b *testing.B, cli *tlcp.Config, serve func(net.Conn) error) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c, s := net.Pipe()
		errc := make(chan error, 1)
		go func() { errc <- serve(s) }()
		cc := tlcp.Client(c, cli)
		if err := cc.Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		c.Close()
		s.Close()
	}
}

// BenchmarkTLCPHandshake compares a full TLCP handshake served directly by
// tlcp.Server with the same handshake going through the sniffer and site
// selection (the target is ≤ 2 % more time per handshake).
func BenchmarkTLCPHandshake(b *testing.B) {
	srv, cli := tlcpBenchConfigs(b)
	b.Run("direct", func(b *testing.B) {
		benchHandshakes(b, cli, func(s net.Conn) error {
			return tlcp.Server(s, srv).HandshakeContext(context.Background())
		})
	})
	b.Run("sniffed", func(b *testing.B) {
		site := &Site{Name: "s", TLCP: TLCPHandshaker(srv)}
		cfg := &ListenerConfig{Name: "bench", TLCP: true, Sites: NewSites([]*Site{site}, nil)}
		hs := NewServer(cfg, nil, nil)
		benchHandshakes(b, cli, func(s net.Conn) error {
			_, err := hs.Handshake(context.Background(), cfg, s)
			return err
		})
	})
}

// BenchmarkSniff measures the sniffer alone on recorded first flights.
func BenchmarkSniff(b *testing.B) {
	for _, name := range []string{"clienthello-tongsuo-ntls", "clienthello-openssl30-tls13"} {
		in := recordedHello(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for i := 0; i < b.N; i++ {
				if _, err := sniff(&sliceReader{b: in}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// interleaveTLCPHandshakes runs b.N pairs of TLCP handshakes of cli over
// net.Pipe against serves[0] and serves[1], alternating which goes first,
// and returns each one's total wall time.
func interleaveTLCPHandshakes(b *testing.B, cli *tlcp.Config, serves [2]func(net.Conn) error) [2]time.Duration {
	var total [2]time.Duration
	for i := 0; i < b.N; i++ {
		for j := range serves {
			k := (i + j) % 2 // alternate the order too
			serve := serves[k]
			c, s := net.Pipe()
			errc := make(chan error, 1)
			start := time.Now()
			go func() { errc <- serve(s) }()
			if err := tlcp.Client(c, cli).Handshake(); err != nil {
				b.Fatal(err)
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			total[k] += time.Since(start)
			c.Close()
			s.Close()
		}
	}
	return total
}

// BenchmarkTLCPHandshakeInterleaved alternates direct and sniffed
// handshakes in one loop (so that load changes hit both equally) and
// reports each one's mean time and their ratio.
func BenchmarkTLCPHandshakeInterleaved(b *testing.B) {
	srv, cli := tlcpBenchConfigs(b)
	site := &Site{Name: "s", TLCP: TLCPHandshaker(srv)}
	cfg := &ListenerConfig{Name: "bench", TLCP: true, Sites: NewSites([]*Site{site}, nil)}
	hs := NewServer(cfg, nil, nil)
	serves := [2]func(net.Conn) error{
		// The direct server gets the same deadline handling as the sniffed
		// one, so that the difference is the sniffer and site selection.
		func(s net.Conn) error {
			ctx, cancel := context.WithTimeout(context.Background(), DefaultHandshakeTimeout)
			defer cancel()
			s.SetDeadline(time.Now().Add(DefaultHandshakeTimeout))
			c := tlcp.Server(s, srv)
			err := c.HandshakeContext(ctx)
			s.SetDeadline(time.Time{})
			c.SetDeadline(time.Time{})
			return err
		},
		func(s net.Conn) error { _, err := hs.Handshake(context.Background(), cfg, s); return err },
	}
	total := interleaveTLCPHandshakes(b, cli, serves)
	b.ReportMetric(float64(total[0].Nanoseconds())/float64(b.N), "direct-ns/op")
	b.ReportMetric(float64(total[1].Nanoseconds())/float64(b.N), "sniffed-ns/op")
	b.ReportMetric(float64(total[1])/float64(total[0]), "sniffed/direct")
}
