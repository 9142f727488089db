package daemon

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tlcp"
)

// TestBenchClientHelper is the client process of BenchmarkServerCPU1KiB: it
// runs only when GMPROXY_BENCH_CLIENT is set, sends that many keep-alive
// requests over GMPROXY_BENCH_CONC (default 1) concurrent connections and
// exits.
func TestBenchClientHelper(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GMPROXY_BENCH_CLIENT"))
	if n == 0 {
		return // only a helper process of BenchmarkServerCPU1KiB (like os/exec's TestHelperProcess)
	}
	addr, proto := os.Getenv("GMPROXY_BENCH_ADDR"), os.Getenv("GMPROXY_BENCH_PROTO")
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	url := "http://" + addr + "/1k"
	if proto == "tlcp" {
		url = "https://localhost/1k"
		tr.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			c := tlcp.Client(raw, &tlcp.Config{InsecureSkipVerify: true, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, NextProtos: []string{"http/1.1"}})
			return c, c.HandshakeContext(ctx)
		}
	}
	conc, _ := strconv.Atoi(os.Getenv("GMPROXY_BENCH_CONC"))
	conc = max(conc, 1)
	tr.MaxIdleConnsPerHost = conc
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	errs := make(chan error, conc)
	for w := 0; w < conc; w++ {
		go func(w int) {
			for i := w; i < n; i += conc {
				resp, err := c.Get(url)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < conc; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkServerCPU1KiB measures the daemon's own CPU per keep-alive 1 KiB
// request (the backend runs in the same process; the client runs in a
// child process, so its TLCP work is not counted): TLCP ECC-SM4-GCM vs
// plain TCP into the same HTTP server and proxy, and, as the same-run
// baseline, TLCP ECC-SM4-GCM into a minimal httputil.ReverseProxy on a bare
// tlcp.Listener (same PKI, same backend), alternating in rounds. The
// target is ≤ 15 % more CPU per request for TLCP than plain TCP;
// tlcp/minimal is the daemon's own overhead over the bare minimum.
// "metrics" is the TLCP entrance of a second daemon wired to the metrics
// package as gmproxy run does. GMPROXY_BENCH_ONLY=plain|tlcp|minimal|metrics
// runs one entrance alone (for -cpuprofile or strace); GMPROXY_BENCH_CONC=N
// uses N concurrent keep-alive connections (bench/run.sh uses 4).
func BenchmarkServerCPU1KiB(b *testing.B) {
	be := newBackend(b)
	d := startDaemon(b, benchConfig(b, be.Listener.Addr().String()))
	pln := plainEntrance(b, d)
	mln := minimalTLCPProxy(b, be.Listener.Addr().String())
	m, err := metrics.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	dm := startDaemon(b, benchConfig(b, be.Listener.Addr().String()), func(e *Env) {
		e.Observer, e.KeyOps, e.Sessions, e.ProxyObserver = m, m, m, m
	})
	const rounds = 4
	per := b.N/rounds + 1
	var cpu [4]time.Duration
	addrs := []string{pln.Addr().String(), d.addr, mln.Addr().String(), dm.addr}
	protos := []string{"plain", "tlcp", "tlcp", "tlcp"}
	names := []string{"plain", "tlcp", "minimal", "metrics"}
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for j := 0; j < len(addrs); j++ {
			k := (r + j) % len(addrs)
			if only := os.Getenv("GMPROXY_BENCH_ONLY"); only != "" && only != names[k] {
				continue // diagnostics: profile one entrance alone
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestBenchClientHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "GMPROXY_BENCH_CLIENT="+strconv.Itoa(per), "GMPROXY_BENCH_ADDR="+addrs[k], "GMPROXY_BENCH_PROTO="+protos[k])
			c0 := cpuTime()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("client: %v\n%s", err, out)
			}
			cpu[k] += cpuTime() - c0
		}
	}
	b.StopTimer()
	n := float64(per * rounds)
	b.ReportMetric(float64(cpu[0].Nanoseconds())/n, "plain-server-cpu-ns/req")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/n, "tlcp-server-cpu-ns/req")
	b.ReportMetric(float64(cpu[2].Nanoseconds())/n, "minimal-server-cpu-ns/req")
	b.ReportMetric(float64(cpu[3].Nanoseconds())/n, "metrics-server-cpu-ns/req")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "tlcp/plain")
	b.ReportMetric(float64(cpu[1])/float64(cpu[2]), "tlcp/minimal")
	b.ReportMetric(float64(cpu[3])/float64(cpu[2]), "metrics/minimal")
}

// minimalTLCPProxy serves a bare httputil.ReverseProxy to backend on a
// tlcp.Listener with the test PKI's server certificates (no metrics, no
// logging, no routing): the baseline of BenchmarkServerCPU1KiB.
func minimalTLCPProxy(tb testing.TB, backend string) net.Listener {
	tb.Helper()
	p := testPKI(tb)
	cert := tlcp.Certificate{
		SignCertificate: [][]byte{p.ServerSign.Cert.Raw},
		SignKey:         p.ServerSign.Key,
		EncCertificate:  p.ServerEnc.Cert.Raw,
		EncKey:          p.ServerEnc.Key,
		Leaf:            p.ServerSign.Cert,
		EncLeaf:         p.ServerEnc.Cert,
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ln := tlcp.NewListener(inner, &tlcp.Config{Certificates: []tlcp.Certificate{cert}})
	target := &url.URL{Scheme: "http", Host: backend}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	srv := &http.Server{Handler: rp, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return inner
}
