package daemon

import (
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/tlcp"
)

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKeepAlive1KiB: keep-alive HTTP/1.1 requests for a 1 KiB body
// through the daemon to a loopback backend, over TLCP ECC-SM4-GCM and over
// plain TCP into the same listener's HTTP server and proxy, in the same run.
// cpu-ns/op is the whole process (client, daemon and backend) CPU per
// request; the TLCP target is ≤ 15 % more than plain TCP.
func BenchmarkKeepAlive1KiB(b *testing.B) {
	be := newBackend(b)
	d := startDaemon(b, benchConfig(b, be.Listener.Addr().String()))

	pln := plainEntrance(b, d)
	plain := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}

	run := func(b *testing.B, c *http.Client, url string) {
		get := func() {
			resp, err := c.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if n != 1024 {
				b.Fatalf("body %d bytes", n)
			}
		}
		get() // connect and handshake outside the measurement
		b.ReportAllocs()
		b.SetBytes(1024)
		cpu0 := cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			get()
		}
		b.StopTimer()
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	tlcpClient := smClient(b, d.addr, "tlcp", tlcp.ECC_SM4_GCM_SM3, false)
	b.Run("interleaved", func(b *testing.B) {
		// Alternates one plain and one TLCP request per iteration, so that
		// load from other processes hits both alike; the process CPU time
		// of each request is summed per kind.
		clients := []*http.Client{plain, tlcpClient}
		urls := []string{"http://" + pln.Addr().String() + "/1k", "https://localhost/1k"}
		one := func(k int) {
			resp, err := clients[k].Get(urls[k])
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		one(0)
		one(1)
		var cpu [2]time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for j := 0; j < 2; j++ {
				k := (i + j) % 2
				c0 := cpuTime()
				one(k)
				cpu[k] += cpuTime() - c0
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(cpu[0].Nanoseconds())/float64(b.N), "plain-cpu-ns/op")
		b.ReportMetric(float64(cpu[1].Nanoseconds())/float64(b.N), "tlcp-cpu-ns/op")
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "tlcp/plain-cpu")
	})
	b.Run("plain-tcp", func(b *testing.B) { run(b, plain, "http://"+pln.Addr().String()+"/1k") })
	b.Run("tlcp-gcm", func(b *testing.B) { run(b, tlcpClient, "https://localhost/1k") })
}

func newPlainConn(c net.Conn) *frontdoor.Conn {
	return frontdoor.NewConn(c, frontdoor.ConnState{Site: "main", Family: "tcp", Protocol: "tcp", ALPN: "http/1.1"})
}

// plainEntrance opens a plain TCP loopback listener feeding the daemon's
// listener's dispatch (the same HTTP server and proxy as TLCP), closed when
// the benchmark ends.
func plainEntrance(tb testing.TB, d *testDaemon) net.Listener {
	tb.Helper()
	var l *listener
	d.Daemon.mu.Lock() // the daemon's, not the harness's
	for _, x := range d.listeners {
		l = x
	}
	d.Daemon.mu.Unlock()
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pln.Close() })
	go func() {
		for {
			c, err := pln.Accept()
			if err != nil {
				return
			}
			go l.dispatch(newPlainConn(c))
		}
	}()
	return pln
}

// benchConfig is testConfig with the upstream keep-alive pool that a
// loaded configuration gets by default (keepalive.max_idle; testConfig's
// upstream, built in code, has none and dials the backend per request).
func benchConfig(tb testing.TB, backend string) *conf.Config {
	cfg := testConfig(tb, backend)
	for i := range cfg.Upstreams {
		cfg.Upstreams[i].Keepalive.MaxIdle = conf.DefaultKeepaliveMaxIdle
	}
	return cfg
}
