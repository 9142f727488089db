package daemon

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
)

// TestApplicationStatusDoesNotMarkTargetsDownByDefault: with the default
// passive health checks, a target's 503 (a rate limit, maintenance of one
// URL) is the application's answer passed on, not a failure: a client
// asking again and again for such a URL does not mark the target down,
// and it keeps its share of the requests. Connect errors and timeouts
// still count (TestPassiveHealth... in proxy).
func TestApplicationStatusDoesNotMarkTargetsDownByDefault(t *testing.T) {
	parsed, err := conf.Parse("../../conf/testdata/good/passive.yaml", []byte(`listeners: [{address: 127.0.0.1:0}]
sites:
  - tlcp:
      sign_cert: ../pki/server_sign.crt
      sign_key: ../pki/server_sign.key
      enc_cert: ../pki/server_enc.crt
      enc_key: ../pki/server_enc.key
    routes: [{upstream: app}]
upstreams:
  - name: app
    targets: [127.0.0.1:1, 127.0.0.1:2]
`))
	if err != nil {
		t.Fatal(err)
	}
	var busyHits atomic.Int32
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		busyHits.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer busy.Close()
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	up := parsed.Upstreams[0]
	up.Targets[0].Address = busy.Listener.Addr().String()
	up.Targets[1].Address = b.Listener.Addr().String()
	cfg.Upstreams[0] = up
	d := startDaemon(t, cfg)
	c := tlsClient(t, d.addr, "localhost", false)
	got503 := 0
	for range 12 {
		res, err := c.Get("https://localhost/x")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable {
			got503++
		}
	}
	for _, tg := range d.Daemon.gen.Proxy.Upstream("app").Targets() {
		if !tg.Healthy() {
			t.Errorf("target %s marked down by the application's 503s", tg.Addr)
		}
	}
	if n := busyHits.Load(); n < 5 || got503 != int(n) {
		t.Errorf("the 503 target got %d of 12 requests (%d 503s passed on); want its share, each answer passed on", n, got503)
	}
}
