//go:build unix

package conf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestNamedFileNotRegularOrHuge: a file the configuration names that is a
// FIFO, a device or larger than any such file can be is refused by name,
// without being read: a FIFO opened for reading blocks check and every
// reload until someone writes to it (and then loads what was written), and
// a device such as /dev/zero, or a file growing while it is read, has no
// end to read into memory.
func TestNamedFileNotRegularOrHuge(t *testing.T) {
	path, data, pki := minimalWithPKI(t)
	dir := t.TempDir()

	// A FIFO standing for the signing certificate, with a writer that
	// hands the real certificate to every reader that opens it: read, it
	// would load as if it were the file.
	fifo := filepath.Join(dir, "sign.crt")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	cert, err := os.ReadFile(filepath.Join(pki, "server_sign.crt"))
	if err != nil {
		t.Fatal(err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			// Without a reader, a non-blocking open fails (ENXIO).
			f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			f.Write(cert)
			f.Close()
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })

	// A ticket key file far larger than any ticket key file (sparse: it
	// takes no disk).
	huge := filepath.Join(dir, "ticket.key")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 64<<20+1); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"certificate a FIFO", "sign_cert: ../pki/server_sign.crt", "sign_cert: " + fifo, "tlcp.sign_cert"},
		{"password file a device", "enc_key: ../pki/server_enc.key", "enc_key: " + pki + "/server_enc.enc.key\n      key_password_file: /dev/null", "tlcp.key_password_file"},
		{"ticket key file huge", "upstreams:", "sessions: {tickets: true, ticket_key_file: " + huge + "}\nupstreams:", "sessions.ticket_key_file"},
	} {
		s := strings.ReplaceAll(string(data), "../pki/", pki+"/")
		s = strings.Replace(s, strings.ReplaceAll(tc.from, "../pki/", pki+"/"), tc.to, 1)
		_, err := Parse(path, []byte(s))
		var probs Problems
		if !errors.As(err, &probs) {
			t.Errorf("%s: %v; want it refused", tc.name, err)
			continue
		}
		found := false
		for _, p := range probs {
			if strings.HasSuffix(p.Path, tc.want) && p.Line > 0 && (strings.Contains(p.Message, "not a regular file") || strings.Contains(p.Message, "over 64MiB: name the file itself")) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %v; want %s refused as not a regular file or too large, at its line", tc.name, err, tc.want)
		}
	}
}

// TestConfigFileNotRegularOrHuge: the configuration file itself (-c, read
// at start and at every reload) is read as the files it names are: a
// FIFO or a device is refused without being read (a FIFO would block the
// reload until a writer comes), and so is a file over 16 MiB.
func TestConfigFileNotRegularOrHuge(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "gmproxy.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 16<<20+1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{huge, "over 16MiB"},
	} {
		_, err := Load(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want it refused as %s", tc.path, err, tc.want)
		}
		if _, err := ReadConfigFile(tc.path); err == nil {
			t.Errorf("ReadConfigFile(%s) read it", tc.path)
		}
	}
}

// TestTLCPPairFIFOWithoutWriter: a site's TLCP certificate or key file
// that is a FIFO nobody writes to is refused at its line. The check of a
// pair named the other way round (sign_key for enc_cert) read the four
// files first with os.ReadFile, whose open of a FIFO waits for a writer:
// check and every reload hung there.
func TestTLCPPairFIFOWithoutWriter(t *testing.T) {
	path, data, pki := minimalWithPKI(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pair.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() {
		// Readers waiting in open(2) (the defect) go on once a writer
		// opens, and then read the end.
		for range 8 {
			if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				w.Close()
			}
		}
	})
	for _, f := range [][2]string{{"sign_cert", "server_sign.crt"}, {"sign_key", "server_sign.key"}, {"enc_cert", "server_enc.crt"}, {"enc_key", "server_enc.key"}} {
		field := f[0]
		s := strings.ReplaceAll(string(data), "../pki/", pki+"/")
		s = strings.Replace(s, field+": "+pki+"/"+f[1], field+": "+fifo, 1)
		if !strings.Contains(s, field+": "+fifo) {
			t.Fatalf("%s not replaced", field)
		}
		done := make(chan error, 1)
		go func() {
			_, err := Parse(path, []byte(s))
			done <- err
		}()
		select {
		case err := <-done:
			var probs Problems
			found := false
			if errors.As(err, &probs) {
				for _, p := range probs {
					if strings.HasSuffix(p.Path, "tlcp."+field) && p.Line > 0 && strings.Contains(p.Message, "not a regular file") {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("%s a FIFO: %v; want it refused as not a regular file, at its line", field, err)
			}
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatalf("%s a FIFO: check still opening it (waiting for a writer)", field)
		}
	}
}

// minimalWithPKI returns testdata/good/minimal.yaml's path and text and
// the absolute path of the test PKI it names.
func minimalWithPKI(t *testing.T) (path string, data []byte, pki string) {
	t.Helper()
	path = filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pki, err = filepath.Abs(filepath.Join("testdata", "pki"))
	if err != nil {
		t.Fatal(err)
	}
	return path, data, pki
}
