package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// TestUpstreamCAFileBounded: an upstream's CA file given by path
// (UpstreamTLSConfig.CA, which conf never saw when the proxy is used as a
// library) is read as conf reads it: a FIFO is refused at once, not waited
// on for a writer, and a file over namedfile.Max is refused, not read
// whole, for the tls (crypto/tls) and the TLCP / TLS 1.3-SM dialers alike.
func TestUpstreamCAFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ca.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A reader waiting in open(2) (the defect) goes on once a writer
		// opens, and then reads the end.
		if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			w.Close()
		}
	})
	// One byte over the bound, sparse: no 64 MiB written to the disk.
	big := filepath.Join(dir, "ca-big.pem")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(namedfile.Max + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	newWith := func(proto, ca string) error {
		uc := &UpstreamConfig{Name: "u", Protocol: proto, Targets: []TargetConfig{{Address: "127.0.0.1:1"}},
			TLS: &UpstreamTLSConfig{CA: ca, ServerName: "localhost"}}
		_, _, _, err := newTransport(uc, nil)
		return err
	}
	check := func(proto, ca, want string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ca) {
			t.Errorf("%s with CA %s: error %v, want one naming the file and saying %q", proto, filepath.Base(ca), err, want)
		}
	}
	for _, proto := range []string{upstreamproto.TLS, upstreamproto.H2, upstreamproto.TLCP, upstreamproto.TLS13SM} {
		done := make(chan error, 1)
		go func() { done <- newWith(proto, fifo) }()
		select {
		case err := <-done:
			check(proto, fifo, "not a regular file", err)
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatalf("%s with a FIFO as its CA file: still opening it (waiting for a writer)", proto)
		}
	}
	// One protocol of each reader (stdTLSConfig, smDialer): each reads up
	// to 64 MiB of the file before refusing it.
	for _, proto := range []string{upstreamproto.TLS, upstreamproto.TLS13SM} {
		check(proto, big, "over 64MiB", newWith(proto, big))
	}
}
