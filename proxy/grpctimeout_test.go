package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

func TestGRPCTimeoutParse(t *testing.T) {
	grpc := func(v ...string) http.Header {
		h := http.Header{"Content-Type": {"application/grpc"}}
		if len(v) > 0 {
			h["Grpc-Timeout"] = v
		}
		return h
	}
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{grpc("5S"), 5 * time.Second, true},
		{grpc("1H"), time.Hour, true},
		{grpc("2M"), 2 * time.Minute, true},
		{grpc("250m"), 250 * time.Millisecond, true},
		{grpc("7u"), 7 * time.Microsecond, true},
		{grpc("9n"), 9, true},
		{grpc("0S"), 0, true},
		{grpc("99999999S"), 99999999 * time.Second, true},
		{grpc("99999999H"), 1<<63 - 1, true}, // past a Duration: no end
		{grpc("123456789S"), 0, false},       // nine digits
		{grpc("5s"), 0, false},               // units are case-sensitive
		{grpc("S"), 0, false},
		{grpc("5"), 0, false},
		{grpc("-5S"), 0, false},
		{grpc("+5S"), 0, false},
		{grpc(" 5S"), 0, false},
		{grpc("5 S"), 0, false},
		{grpc("5S", "9S"), 0, false}, // repeated
		{grpc(), 0, false},
		{http.Header{"Content-Type": {"application/grpc+proto"}, "Grpc-Timeout": {"3S"}}, 3 * time.Second, true},
		{http.Header{"Content-Type": {"application/grpc-web+proto"}, "Grpc-Timeout": {"3S"}}, 3 * time.Second, true},
		{http.Header{"Content-Type": {"Application/GRPC"}, "Grpc-Timeout": {"3S"}}, 3 * time.Second, true},
		{http.Header{"Content-Type": {"text/plain"}, "Grpc-Timeout": {"3S"}}, 0, false},
		{http.Header{"Grpc-Timeout": {"3S"}}, 0, false},
	} {
		got, ok := grpcTimeout(tc.h)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: %v %v, want %v %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzGRPCTimeout: any grpc-timeout value is parsed without a panic, and
// one taken is one to eight digits and a unit, read as a non-negative
// duration.
func FuzzGRPCTimeout(f *testing.F) {
	for _, s := range []string{"5S", "1H", "250m", "99999999H", "123456789S", "5s", "", "S", "-1S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := grpcTimeout(http.Header{"Content-Type": {"application/grpc"}, "Grpc-Timeout": {v}})
		if !ok {
			return
		}
		digits := strings.TrimRight(v[:len(v)-1], "0123456789")
		if d < 0 || digits != "" || len(v) < 2 || len(v) > 9 || !strings.Contains("HMSmun", v[len(v)-1:]) {
			t.Fatalf("%q taken as %v", v, d)
		}
	})
}

// TestGRPCTimeoutHonoured: a gRPC call whose grpc-timeout asks for longer
// than response_header waits for its head that long, up to
// GRPCTimeoutMax (a unary call's answer comes with its head: a call its
// client allowed seconds was cut with 504 at response_header, which gRPC
// clients take for UNAVAILABLE and retry). A call without the field, a
// request that is not gRPC, a deadline under the wait's, and an upstream
// that does not honour it keep the wait. Through every upstream client:
// h1Client, net/http's Transport (max_conns), HTTP/2 (h2c).
func TestGRPCTimeoutHonoured(t *testing.T) {
	const wait = 100 * time.Millisecond
	addr := lateBackend(t)
	for _, tc := range headClients() {
		t.Run(tc.name, func(t *testing.T) {
			front := func(most time.Duration) *front {
				cfg := proxyTo(addr)
				cfg.Upstreams[0].Transport.ResponseHeaderTimeout = wait
				cfg.Upstreams[0].Transport.GRPCTimeoutMax = most
				tc.setup(&cfg.Upstreams[0])
				return newFront(t, cfg, frontOpts{})
			}
			c := testClient(t)
			c.Timeout = testwait.Bound(10 * time.Second)
			for _, fc := range []struct {
				name string
				most time.Duration
				ct   string
				to   string // grpc-timeout; "": none
				d    string // the target's delay
				want int
			}{
				{"deadline honoured", 0, "application/grpc", "5S", "400ms", 200},
				{"gRPC-Web", 0, "application/grpc-web+proto", "5S", "400ms", 200},
				{"no deadline", 0, "application/grpc", "", "1200ms", 504},
				{"not gRPC", 0, "text/plain", "5S", "1200ms", 504},
				{"malformed", 0, "application/grpc", "5s", "1200ms", 504},
				{"deadline passed", 0, "application/grpc", "300m", "1200ms", 504},
				{"under the most", 3 * wait, "application/grpc", "5S", "200ms", 200},
				{"past the most", 3 * wait, "application/grpc", "5S", "1200ms", 504},
				{"not honoured", -1, "application/grpc", "5S", "1200ms", 504},
			} {
				f := front(fc.most)
				hdr := []string{"Content-Type", fc.ct}
				if fc.to != "" {
					hdr = append(hdr, "Grpc-Timeout", fc.to)
				}
				if status, body, _ := get(t, c, f.url+"/?d="+fc.d, hdr...); status != fc.want || fc.want == 200 && body != "late" {
					t.Errorf("%s: %d %q, want %d", fc.name, status, body, fc.want)
				}
			}
		})
	}
}
