package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestAccessLogStalledOutputDoesNotBlockRequests: the access log is a FIFO
// whose reader does not read (as a stalled log shipper, a hung NFS mount,
// stdout into a blocked logging driver): once the pipe and the bounded
// queue are full, requests are still served, the lines that found the
// queue full are dropped, counted and reported as lost, and once the
// reader reads, the queued lines and the later ones arrive, in order.
func TestAccessLogStalledOutputDoesNotBlockRequests(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "access.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	// A reader that reads nothing for now (non-blocking: opening a FIFO
	// waits for the other end).
	fd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	reader := os.NewFile(uintptr(fd), fifo)
	defer reader.Close()

	var logs syncBuffer
	defer func(d time.Duration) { accessLogErrorEvery = d }(accessLogErrorEvery)
	accessLogErrorEvery = 0
	cfg := Config{
		Sites: oneSite(RouteConfig{Name: "all", Respond: &RespondConfig{Status: 200, Body: "ok"}}),
		AccessLog: AccessLogConfig{Path: fifo, Format: "template", Template: "{uri}", QueueSize: 16 << 10,
			FlushInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
	}
	f := newFront(t, cfg, frontOpts{})
	pad := strings.Repeat("x", 3000) // a pipe (64 KiB) and the queue hold some 26 lines
	const n = 60
	for i := range n {
		req := fmt.Sprintf("GET /%d/%s HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", i, pad)
		if resp := rawRoundTrip(t, f.addr, req, testwait.Bound(10*time.Second)); statusOf(resp) != "HTTP/1.1 200 OK" {
			t.Fatalf("request %d while the access log's reader stalls: %q", i, statusOf(resp))
		}
	}
	al := f.p.AccessLog()
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); al.LinesLost() == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	lost := al.LinesLost()
	if lost == 0 {
		t.Fatal("no line counted lost while the output stalled")
	}
	if got := logs.String(); !strings.Contains(got, "lines lost") || !strings.Contains(got, "queue full") {
		t.Errorf("the dropped lines are not reported:\n%s", got)
	}

	var read syncBuffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(&read, reader)
	}()
	if resp := rawRoundTrip(t, f.addr, "GET /after HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n", testwait.Bound(10*time.Second)); statusOf(resp) != "HTTP/1.1 200 OK" {
		t.Fatalf("request after the reader read: %q", statusOf(resp))
	}
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); !strings.Contains(read.String(), "/after\n") && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	lines := strings.Split(strings.TrimSuffix(read.String(), "\n"), "\n")
	if len(lines) == 0 || lines[len(lines)-1] != "/after" {
		t.Fatalf("the line of the request after the reader read did not arrive (%d lines read)", len(lines))
	}
	if int64(len(lines)-1)+lost != n {
		t.Errorf("%d lines read and %d lost, want %d in all", len(lines)-1, lost, n)
	}
	last := -1
	for _, line := range lines[:len(lines)-1] {
		num, _, _ := strings.Cut(strings.TrimPrefix(line, "/"), "/")
		i, err := strconv.Atoi(num)
		if err != nil || i <= last {
			t.Fatalf("line %.20q after request %d: out of order or torn", line, last)
		}
		last = i
	}
	f.p.Close()
	<-copied // the writer closed its end
}

// TestAccessLogReopenedFileTakesLaterLines: after a rotation's rename and
// Reopen, the new file appears only once the lines queued before went to
// the old one, so that every line logged once it exists lands in it: a
// rotation (or a test) that waits for the new file may count on that. The
// old file is a FIFO whose reader does not read yet, which holds the
// writer in the old file's lines; the new file must not appear meanwhile
// (opened ahead of the writer, it took lines bound for the old one).
func TestAccessLogReopenedFileTakesLaterLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	reader := os.NewFile(uintptr(fd), path)
	defer reader.Close()
	al, err := NewAccessLog(AccessLogConfig{Path: path, Format: "template", Template: "{uri}", FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	pad := strings.Repeat("x", 1000)
	for i := range 100 { // more than the pipe's 64 KiB: the writer blocks
		al.Log(&LogEntry{URI: fmt.Sprintf("/old%d/%s", i, pad)})
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	reopened := make(chan error, 1)
	go func() { reopened <- al.Reopen() }()
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			t.Fatal("the new file appeared while the lines before the reopen were still being written to the old one")
		}
	}
	go io.Copy(io.Discard, reader) // the old file's reader reads at last
	var st os.FileInfo
	for end := time.Now().Add(testwait.Bound(10 * time.Second)); st == nil && time.Now().Before(end); time.Sleep(time.Millisecond) {
		st, _ = os.Stat(path)
	}
	if st == nil {
		t.Fatal("Reopen made no new file")
	}
	al.Log(&LogEntry{URI: "/new"})
	if err := <-reopened; err != nil {
		t.Fatal(err)
	}
	if err := al.Flush(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "/new\n" {
		t.Fatalf("new file holds %q, want the line logged once it existed", b)
	}
}
