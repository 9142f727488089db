package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// askReload is an admin reload request answered on res.
func askReload(res chan error) reloadSignal {
	return reloadSignal{waiters: []reloadWaiter{{ctx: context.Background(), res: res}}}
}

// reloadBench is a single process's admin POST /reload on loopback, its
// requests going through mergeReloads to a main loop making reloads as
// serveSignals does. The first reload waits for gate to be closed.
type reloadBench struct {
	url     string
	made    atomic.Int32 // reloads made
	taken   atomic.Int32 // requests mergeReloads took
	sigs    chan os.Signal
	gate    chan struct{}
	open    func()        // closes gate
	started chan struct{} // closed when the first reload started
	left    chan struct{} // a handler returned
}

func newReloadBench(t *testing.T) *reloadBench {
	b := &reloadBench{sigs: make(chan os.Signal), gate: make(chan struct{}), started: make(chan struct{}), left: make(chan struct{}, 64)}
	b.open = sync.OnceFunc(func() { close(b.gate) })
	reload := func() error {
		if b.made.Add(1) == 1 {
			close(b.started)
			<-b.gate
		}
		return nil
	}
	in, adminReload := adminReloadRequests()
	reqs := make(chan reloadSignal)
	stop := make(chan struct{})
	go func() { // counts the requests mergeReloads takes
		for {
			select {
			case rq := <-in:
				reqs <- rq
				b.taken.Add(1)
			case <-stop:
				return
			}
		}
	}()
	out := mergeReloads(b.sigs, reqs, reload)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	loopDone := make(chan struct{})
	go func() { // the main loop
		defer close(loopDone)
		for sig := range out {
			if rs, ok := sig.(reloadSignal); ok {
				rs.serve(log)
			} else if sig == syscall.SIGHUP {
				reload()
			}
		}
	}()
	h := controlHandler(new(adminState), "127.0.0.1:9", adminReload)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := adminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { b.left <- struct{}{} }()
		h.ServeHTTP(w, r)
	}))
	serveAdmin(srv, ln)
	b.url = "http://" + ln.Addr().String() + "/reload"
	t.Cleanup(func() {
		b.open() // a test that failed may leave the first reload waiting
		srv.Close()
		close(b.sigs)
		<-loopDone
		close(stop)
	})
	return b
}

func (b *reloadBench) post(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.Status + " " + string(body), err
}

// waitTaken waits until mergeReloads took n requests in all.
func (b *reloadBench) waitTaken(t *testing.T, n int32) {
	t.Helper()
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for b.taken.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d reload requests taken while a reload runs: they queue one by one", b.taken.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReloadRequestsMerged: reload requests (POST /reload and SIGHUP)
// that come while a reload runs are answered by one more reload, not one
// each: 16 concurrent requests and 3 SIGHUPs cost 2 reloads, and every
// request is answered "reloaded".
func TestReloadRequestsMerged(t *testing.T) {
	b := newReloadBench(t)
	const n = 16
	answers := make(chan string, n)
	var wg sync.WaitGroup
	post := func() {
		defer wg.Done()
		got, err := b.post(context.Background())
		if err != nil {
			got = err.Error()
		}
		answers <- got
	}
	wg.Add(1)
	go post()
	<-b.started
	for i := 1; i < n; i++ {
		wg.Add(1)
		go post()
	}
	for range 3 {
		select {
		case b.sigs <- syscall.SIGHUP:
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatal("a SIGHUP during a reload was not taken: it waits for the main loop")
		}
	}
	b.waitTaken(t, n)
	b.open()
	wg.Wait()
	close(answers)
	for got := range answers {
		if !strings.HasPrefix(got, "200 OK reloaded") {
			t.Errorf("a request answered %q, want 200 reloaded", got)
		}
	}
	if got := b.made.Load(); got != 2 {
		t.Errorf("%d reloads made for %d requests and 3 SIGHUPs during a reload, want 2 (the one under way and one for all that came meanwhile)", got, n)
	}
}

// TestReloadSkippedWhenClientLeft: a request whose client left before
// its reload started costs no reload.
func TestReloadSkippedWhenClientLeft(t *testing.T) {
	b := newReloadBench(t)
	first := make(chan string, 1)
	go func() {
		got, err := b.post(context.Background())
		if err != nil {
			got = err.Error()
		}
		first <- got
	}()
	<-b.started
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := b.post(ctx)
		gone <- err
	}()
	b.waitTaken(t, 2)
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the cancelled request was answered")
	}
	<-b.left // the server saw the client leave
	b.open()
	if got := <-first; !strings.HasPrefix(got, "200 OK reloaded") {
		t.Errorf("the first request answered %q", got)
	}
	<-b.left
	// A request after: its reload is the second one made.
	if got, err := b.post(context.Background()); err != nil || !strings.HasPrefix(got, "200 OK reloaded") {
		t.Errorf("a later request answered %q, %v", got, err)
	}
	if got := b.made.Load(); got != 2 {
		t.Errorf("%d reloads made, want 2: the request whose client left before its reload started got one", got)
	}
}

// TestSupervisorSkipsReloadClientLeft: the supervisor makes no reload in
// its workers for a request whose client left before it started.
func TestSupervisorSkipsReloadClientLeft(t *testing.T) {
	s := &supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := make(chan error, 1)
	var made int
	_, stop := s.reloading([]os.Signal{reloadSignal{waiters: []reloadWaiter{{ctx: ctx, res: res}}}}, make(chan os.Signal), func() error { made++; return nil }, nil, nil)
	if stop || made != 0 {
		t.Errorf("reloading for a client that left: stop %v, %d reloads made, want false, 0", stop, made)
	}
	if err := <-res; err == nil {
		t.Error("the request that left was answered as reloaded")
	}
	_, _ = s.reloading([]os.Signal{askReload(res), syscall.SIGHUP}, make(chan os.Signal), func() error { made++; return nil }, nil, nil)
	if err := <-res; err != nil || made != 1 {
		t.Errorf("a request still waiting: answered %v after %d reloads, want nil after 1", err, made)
	}
}
