package daemon

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/devpki"
)

// DevListen is the address of the embedded development setup.
const DevListen = "127.0.0.1:8443"

// DefaultDevDir is where the development PKI is kept between runs:
// $XDG_STATE_HOME/gmproxy/dev, else ~/.local/state/gmproxy/dev, else
// ./gmproxy-dev.
func DefaultDevDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "gmproxy", "dev")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "gmproxy", "dev")
	}
	return "gmproxy-dev"
}

// DevSetup is the embedded default: a throwaway SM2 PKI (reused across
// runs), a built-in demo backend on loopback, and a configuration serving
// TLCP, TLS 1.3-SM and ordinary TLS on one port.
type DevSetup struct {
	Dir     string
	PKI     *devpki.PKI
	Config  *conf.Config
	backend *http.Server
	// BackendAddr is the demo backend's loopback address.
	BackendAddr string
}

// DevFolderRefused is NewDevSetup's error for a folder whose files devpki
// accepts but the embedded configuration refuses. Unlike a folder that
// cannot be made or written (a read-only home), it is not a reason to try
// another folder: the user's files are there, and the way out is to fix or
// remove them.
type DevFolderRefused struct {
	Dir string
	Err error
}

func (e *DevFolderRefused) Error() string {
	return fmt.Sprintf("the development configuration cannot use the files in %s (remove the folder and a new development PKI is made at the next start): %v", e.Dir, e.Err)
}

func (e *DevFolderRefused) Unwrap() error { return e.Err }

// NewDevSetup creates (or reuses) the PKI in dir and starts the demo backend.
// listen is the proxy's address (DevListen when empty).
func NewDevSetup(dir, listen string) (*DevSetup, error) {
	if listen == "" {
		listen = DevListen
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev folder: %w", err)
	}
	p, err := devpki.LoadOrCreate(dir, devpki.Options{})
	if err != nil {
		return nil, fmt.Errorf("dev PKI in %s: %w", dir, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo backend: %w", err)
	}
	// The embedded YAML (conf.DevConfig) is the only description of the
	// development setup, read as a user's file is, defaults included. A
	// folder whose files devpki accepts but conf refuses (a user swapped
	// or replaced them) is reported rather than served another way.
	backendAddr := ln.Addr().String()
	cfg, err := conf.DevConfig(dir, backendAddr)
	if err != nil {
		ln.Close()
		return nil, &DevFolderRefused{Dir: dir, Err: err}
	}
	d := &DevSetup{Dir: dir, PKI: p, BackendAddr: backendAddr}
	d.backend = &http.Server{Handler: http.HandlerFunc(demoHandler), ReadHeaderTimeout: 10 * time.Second}
	go d.backend.Serve(ln)
	cfg.Listeners[0].Address = listen
	d.Config = cfg
	return d, nil
}

// Close stops the demo backend.
func (d *DevSetup) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.backend.Shutdown(ctx)
}

// demoHandler is the built-in backend: it shows what the client negotiated,
// from the TLS info headers the proxy adds.
func demoHandler(w http.ResponseWriter, r *http.Request) {
	proto := r.Header.Get("X-Ssl-Protocol")
	cipher := r.Header.Get("X-Ssl-Cipher")
	reused := r.Header.Get("X-Ssl-Session-Reused")
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>gmproxy</title><h1>gmproxy development setup</h1><p>protocol <b>%s</b>, cipher <b>%s</b>, HTTP %s, path %s</p>\n",
			html.EscapeString(proto), html.EscapeString(cipher), html.EscapeString(r.Proto), html.EscapeString(r.URL.Path))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "Hello from gmproxy's demo backend.\nprotocol: %s\ncipher: %s\nsession reused: %s\nhttp: %s\npath: %s\n",
		proto, cipher, reused, r.Proto, r.URL.Path)
}

// Instructions tells the user how to connect to the development setup.
func (d *DevSetup) Instructions(addr string) string {
	ca := filepath.Join(d.Dir, devpki.FileCACert)
	var b strings.Builder
	fmt.Fprintf(&b, "gmproxy development setup listening on %s (TLCP, TLS 1.3-SM and TLS on one port)\n", addr)
	fmt.Fprintf(&b, "  test PKI (throwaway, reused on the next start): %s\n", d.Dir)
	fmt.Fprintf(&b, "  demo backend: http://%s (answers with the negotiated protocol and cipher)\n\n", d.BackendAddr)
	fmt.Fprintf(&b, "Try it:\n")
	fmt.Fprintf(&b, "  go run ./cmd/gmproxy get -ntls    -CAfile %s https://localhost:%s/\n", ca, portOf(addr))
	fmt.Fprintf(&b, "  go run ./cmd/gmproxy get -tls13sm -CAfile %s https://localhost:%s/\n", ca, portOf(addr))
	if d.PKI.ECDSACA != nil {
		fmt.Fprintf(&b, "  curl --cacert %s https://localhost:%s/\n", filepath.Join(d.Dir, devpki.FileECDSACACert), portOf(addr))
	}
	fmt.Fprintf(&b, "  printf 'GET / HTTP/1.0\\r\\n\\r\\n' | openssl s_client -enable_ntls -ntls -connect %s -CAfile %s -quiet   # Tongsuo\n", addr, ca)
	fmt.Fprintf(&b, "Stop with Ctrl-C.\n")
	return b.String()
}

func portOf(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return p
}
