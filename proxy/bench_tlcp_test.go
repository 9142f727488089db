package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/tlcp"
)

// A 100 MiB download through the proxy with a TLCP (ECC-SM4-GCM-SM3)
// client side, against the TLCP record layer alone moving the same bytes,
// in the same run:
//
//	go test -run XXX -bench 'TLCP.*100MiB' -benchmem ./proxy/

const bigDownload = 100 << 20

func tlcpBenchConfigs(b *testing.B) (*tlcp.Config, *tlcp.Config) {
	dir := func(n string) string {
		b.Helper()
		return pkiPathTB(b, n)
	}
	sc, err := tlcp.LoadX509KeyPair(dir("server_sign.crt"), dir("server_sign.key"), dir("server_enc.crt"), dir("server_enc.key"), nil)
	if err != nil {
		b.Fatal(err)
	}
	pool := smx509.NewCertPool()
	caPEM, _ := readFile(dir("ca.crt"))
	pool.AppendCertsFromPEM(caPEM)
	return &tlcp.Config{Certificates: []tlcp.Certificate{sc}},
		&tlcp.Config{RootCAs: pool, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}}
}

// recordLayerDownload sets up one TLCP connection whose server writes
// bigDownload bytes per call of the returned func.
func recordLayerDownload(b *testing.B) func() {
	scfg, ccfg := tlcpBenchConfigs(b)
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", scfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 32<<10)
		one := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, one); err != nil {
				return
			}
			for left := bigDownload; left > 0; left -= len(buf) {
				if _, err := c.Write(buf[:min(left, len(buf))]); err != nil {
					return
				}
			}
		}
	}()
	c, err := tlcp.Dial("tcp", ln.Addr().String(), ccfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	buf := make([]byte, 32<<10)
	return func() {
		c.Write([]byte{1})
		if n, err := io.CopyBuffer(io.Discard, io.LimitReader(c, bigDownload), buf); err != nil || n != bigDownload {
			b.Fatalf("%d %v", n, err)
		}
	}
}

// proxyDownload sets up TLCP client → proxy (TLCP front, HTTP/1.1) →
// plain HTTP backend serving bigDownload bytes; each call downloads once.
func proxyDownload(b *testing.B) func() {
	scfg, ccfg := tlcpBenchConfigs(b)
	chunk := make([]byte, 32<<10)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(bigDownload))
		for left := bigDownload; left > 0; left -= len(chunk) {
			w.Write(chunk[:min(left, len(chunk))])
		}
	}))
	b.Cleanup(be.Close)
	p, err := New(proxyTo(addrOf(be)), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", scfg)
	if err != nil {
		p.Close()
		b.Fatal(err)
	}
	serveProxy(b, p, ln)
	tr := &http.Transport{DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := tlcp.Client(raw, ccfg)
		return c, c.HandshakeContext(ctx)
	}, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	url := "https://" + ln.Addr().String() + "/big"
	buf := make([]byte, 32<<10)
	return func() {
		res, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, res.Body, buf)
		res.Body.Close()
		if err != nil || n != bigDownload {
			b.Fatalf("%d %v", n, err)
		}
	}
}

// benchDownload times the downloads that setup prepares.
func benchDownload(b *testing.B, setup func(*testing.B) func()) {
	run := setup(b)
	b.SetBytes(bigDownload)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
}

func BenchmarkTLCPRecordLayer100MiB(b *testing.B) { benchDownload(b, recordLayerDownload) }

func BenchmarkProxyTLCPDownload100MiB(b *testing.B) { benchDownload(b, proxyDownload) }

// BenchmarkTLCPDownloadInterleaved100MiB alternates the two downloads in
// each iteration and reports each one's MB/s and the ratio, so that load
// from other processes hits both alike.
func BenchmarkTLCPDownloadInterleaved100MiB(b *testing.B) {
	rec, prx := recordLayerDownload(b), proxyDownload(b)
	var tRec, tPrx time.Duration
	b.ResetTimer()
	for b.Loop() {
		s := time.Now()
		rec()
		tRec += time.Since(s)
		s = time.Now()
		prx()
		tPrx += time.Since(s)
	}
	mb := float64(bigDownload) * float64(b.N) / 1e6
	b.ReportMetric(mb/tRec.Seconds(), "record-MB/s")
	b.ReportMetric(mb/tPrx.Seconds(), "proxy-MB/s")
	b.ReportMetric(tRec.Seconds()/tPrx.Seconds(), "proxy/record")
}
