// Command backend is the loopback HTTP backend of the gmproxy benchmark
// harness: it answers GET /size/N (and the shortcuts /1k and /1m) with N
// bytes, keeps connections alive, and writes its address to -addr-file once
// it listens.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const maxSize = 64 << 20

var zeros = make([]byte, 1<<20)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen `address` (loopback)")
	addrFile := flag.String("addr-file", "", "write the listening address to this `file`")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			log.Fatal(err)
		}
	}
	srv := &http.Server{Handler: http.HandlerFunc(serve), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	log.Fatal(srv.Serve(ln))
}

func serve(w http.ResponseWriter, r *http.Request) {
	var n int
	switch p := r.URL.Path; {
	case p == "/1k":
		n = 1 << 10
	case p == "/1m":
		n = 1 << 20
	case strings.HasPrefix(p, "/size/"):
		v, err := strconv.Atoi(strings.TrimPrefix(p, "/size/"))
		if err != nil || v < 0 || v > maxSize {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		n = v
	default:
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "gmproxy bench backend: GET /1k, /1m or /size/N")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(n))
	for n > 0 {
		c := min(n, len(zeros))
		if _, err := w.Write(zeros[:c]); err != nil {
			return
		}
		n -= c
	}
}
