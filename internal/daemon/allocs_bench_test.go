package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/metrics"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// The daemon's own heap allocations per connection and per request.
//
// Method: the benchmark process holds only the daemon and a backend that
// answers every request from one canned response without allocating
// (rawBackend); the client runs in a child process (TestServingClientHelper),
// so its handshakes and HTTP parsing are not counted. The child warms up
// (one full handshake and GET, which fills its session cache and the
// daemon's upstream connection pool), says "ready", waits for "go", runs
// b.N operations and says "done"; the timer (and so allocs/op and B/op,
// which the testing package takes from runtime.MemStats) runs only from
// "go" to "done". allocs/op and B/op are thus the daemon's allocations per
// operation, independent of timing and load; ns/op is the wall time of one
// operation including the client's work, server-cpu-ns/op the benchmark
// process's CPU time (daemon and backend, not the client) per operation
// (both noisy: compare interleaved runs).
//
//	go test ./internal/daemon -run '^$' -bench 'Serving' -count 5
func BenchmarkServing(b *testing.B) {
	be := rawBackend(b)
	d := startDaemon(b, benchConfig(b, be))
	m, err := metrics.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	// "+metrics": a second daemon wired to the metrics package as gmproxy
	// run does.
	dm := startDaemon(b, benchConfig(b, be), func(e *Env) {
		e.Observer, e.KeyOps, e.Sessions, e.ProxyObserver = m, m, m, m
	})
	for _, mode := range []string{"tlcp-new-get", "tlcp-resume-get", "tlcp-ticket-get", "tls13sm-resume-get", "tlcp-keepalive-get", "tls13sm-keepalive-get", "tlcp-resume-get+metrics", "tlcp-keepalive-get+metrics"} {
		d := d
		if strings.HasSuffix(mode, "+metrics") {
			d = dm
		}
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1024)
			b.StopTimer()
			client := os.Args[0]
			if bin := os.Getenv("GMPROXY_SERVING_CLIENT_BIN"); bin != "" {
				client = bin // a copy of the test binary: uprobes on this one see the daemon only
			}
			cmd := exec.Command(client, "-test.run=^TestServingClientHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "GMPROXY_SERVING_CLIENT="+strings.TrimSuffix(mode, "+metrics"), "GMPROXY_SERVING_ADDR="+d.addr, "GMPROXY_SERVING_N="+strconv.Itoa(b.N))
			cmd.Stderr = os.Stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			outp, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer cmd.Wait()
			defer in.Close()
			out := bufio.NewReader(outp)
			expect := func(word string) {
				line, err := out.ReadString('\n')
				if err != nil || line != word+"\n" {
					rest, _ := io.ReadAll(out)
					b.Fatalf("client: want %q, got %q (%v) %s", word, line, err, rest)
				}
			}
			expect("ready")
			b.StartTimer()
			cpu0 := cpuTime()
			io.WriteString(in, "go\n")
			expect("done")
			cpu := cpuTime() - cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "server-cpu-ns/op")
		})
	}
}

// cannedResponse is rawBackend's answer: 1 KiB of zeros.
var cannedResponse = append([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1024\r\n\r\n"), make([]byte, 1024)...)

// rawBackend serves keep-alive GETs (no request bodies) with
// cannedResponse, with no heap allocation per request, so that the
// benchmark process's allocations are the daemon's. It returns its
// address; it stops when the benchmark ends.
func rawBackend(tb testing.TB) string {
	tb.Helper()
	return testpeer.ServeLoopback(tb, func(c net.Conn) {
		r := bufio.NewReaderSize(c, 4096)
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 { // end of a request's header
				if _, err := c.Write(cannedResponse); err != nil {
					return
				}
			}
		}
	})
}

// TestServingClientHelper is the client process of BenchmarkServing: it
// runs only when GMPROXY_SERVING_CLIENT names a mode.
func TestServingClientHelper(t *testing.T) {
	mode := os.Getenv("GMPROXY_SERVING_CLIENT")
	if mode == "" {
		return // only a helper process of BenchmarkServing (like os/exec's TestHelperProcess)
	}
	if err := servingClient(mode, os.Getenv("GMPROXY_SERVING_ADDR"), os.Getenv("GMPROXY_SERVING_N")); err != nil {
		fmt.Fprintln(os.Stdout, "error:", err)
		os.Exit(1)
	}
}

func servingClient(mode, addr, count string) error {
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	// The daemon's PKI is made in the benchmark process: the client does
	// not verify it (what is measured is the server's side).
	tlcpCfg := &tlcp.Config{InsecureSkipVerify: true, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, NextProtos: []string{"http/1.1"},
		SessionTicketsDisabled: mode != "tlcp-ticket-get", ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}
	if mode == "tlcp-new-get" {
		tlcpCfg.ClientSessionCache = nil // every connection a full handshake
	}
	sm13Cfg := &tls13sm.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"}, ClientSessionCache: tls13sm.NewLRUClientSessionCache(4)}
	dial := func(resume bool) (net.Conn, error) {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		var did bool
		if strings.HasPrefix(mode, "tls13sm") {
			c := tls13sm.Client(raw, sm13Cfg)
			err, did = c.Handshake(), c.ConnectionState().DidResume
			if err == nil && did == resume {
				return c, nil
			}
		} else {
			c := tlcp.Client(raw, tlcpCfg)
			err, did = c.Handshake(), c.ConnectionState().DidResume
			if err == nil && did == resume {
				return c, nil
			}
		}
		raw.Close()
		if err == nil {
			err = fmt.Errorf("resumed %v, want %v", did, resume)
		}
		return nil, err
	}
	const request = "GET /1k HTTP/1.1\r\nHost: localhost\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
	get := func(c net.Conn, br *bufio.Reader) error {
		if _, err := io.WriteString(c, request); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		m, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && (resp.StatusCode != 200 || m != 1024) {
			err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, m)
		}
		return err
	}
	connGet := func(resume bool) error {
		c, err := dial(resume)
		if err != nil {
			return err
		}
		defer c.Close()
		return get(c, bufio.NewReader(c))
	}
	// Warm up: a full handshake (fills the session cache) and the daemon's
	// upstream connection.
	if err := connGet(false); err != nil {
		return err
	}
	var ka net.Conn
	var kabr *bufio.Reader
	if strings.HasSuffix(mode, "-keepalive-get") {
		if ka, err = dial(true); err != nil {
			return err
		}
		defer ka.Close()
		kabr = bufio.NewReader(ka)
		if err := get(ka, kabr); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if ka != nil {
			err = get(ka, kabr)
		} else {
			err = connGet(mode != "tlcp-new-get")
		}
		if err != nil {
			return err
		}
	}
	fmt.Println("done")
	return nil
}
