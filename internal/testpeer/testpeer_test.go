package testpeer

import (
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/transcript"
)

func TestTCPPair(t *testing.T) {
	dialed, accepted := TCPPair(t)
	defer dialed.Close()
	defer accepted.Close()
	if dialed.LocalAddr().String() != accepted.RemoteAddr().String() {
		t.Fatalf("dialed %v, accepted from %v", dialed.LocalAddr(), accepted.RemoteAddr())
	}
	go dialed.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(accepted, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q %v", buf, err)
	}
}

func TestTail(t *testing.T) {
	if got := Tail("a\nb\nc", 2); got != "b\nc" {
		t.Fatalf("Tail = %q", got)
	}
	if got := Tail("a\nb", 5); got != "a\nb" {
		t.Fatalf("Tail = %q", got)
	}
}

func TestCAPool(t *testing.T) {
	dir, err := transcript.PKIDir()
	if err != nil {
		t.Fatalf("test PKI: %v", err)
	}
	pool, err := CAPool(dir)
	if err != nil || pool == nil {
		t.Fatalf("CAPool: %v", err)
	}
	if _, err := CAPool(t.TempDir()); err == nil {
		t.Fatal("CAPool of an empty folder succeeded")
	}
}

func TestRunAndStart(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	out, err := Run(t, t.TempDir(), "in\n", sh, "-c", "cat; echo out; pwd")
	if err != nil || !strings.HasPrefix(out, "in\nout\n") {
		t.Fatalf("Run: %q %v", out, err)
	}
	// cat keeps running while its stdin is open; Stop ends it.
	p := Start(t, "", sh, "-c", "echo started; cat")
	for i := 0; i < 500 && !strings.Contains(p.Output(), "started"); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	if !strings.Contains(p.Output(), "started") {
		t.Fatalf("output %q", p.Output())
	}
}

// TestRunLines: each line reaches the client in a read of its own (dd reads
// once per block), and the client ends when its stdin closes after want.
func TestRunLines(t *testing.T) {
	if _, err := exec.LookPath("dd"); err != nil {
		t.Skip("no dd")
	}
	script := `while :; do c=$(dd bs=4096 count=1 2>/dev/null); [ -z "$c" ] && exit 0; echo "read:$c"; done`
	out, err := RunLines(t, "", []string{"a\n", "b\n", "c\n"}, "read:c", "sh", "-c", script)
	if err != nil || !strings.Contains(out, "read:a\nread:b\nread:c\n") {
		t.Fatalf("%v\n%s", err, out)
	}
}
