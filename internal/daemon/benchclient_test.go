package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/tlcp"
)

// TestBenchClientHelper is the client process of BenchmarkServerCPU1KiB: it
// runs only when GMPROXY_BENCH_CLIENT is set, sends that many keep-alive
// requests and exits.
func TestBenchClientHelper(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GMPROXY_BENCH_CLIENT"))
	if n == 0 {
		t.Skip("helper process for BenchmarkServerCPU1KiB")
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
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for i := 0; i < n; i++ {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkServerCPU1KiB measures the daemon's own CPU per keep-alive 1 KiB
// request (the backend runs in the same process; the client runs in a
// child process, so its TLCP work is not counted): TLCP ECC-SM4-GCM vs
// plain TCP into the same HTTP server and proxy, alternating in rounds.
// The target is ≤ 15 % more CPU per request for TLCP.
func BenchmarkServerCPU1KiB(b *testing.B) {
	be := newBackend(b)
	d := startDaemon(b, testConfig(b, be.Listener.Addr().String()))
	pln := plainEntrance(b, d)
	const rounds = 4
	per := b.N/rounds + 1
	var cpu [2]time.Duration
	addrs := []string{pln.Addr().String(), d.addr}
	protos := []string{"plain", "tlcp"}
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for j := 0; j < 2; j++ {
			k := (r + j) % 2
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
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "tlcp/plain")
}
