// An external test package: if these tests were in package h2xconnect,
// the package itself would import x/net/http2 (through the test files) and
// be initialised after it, which is the situation the package exists to
// avoid.
package h2xconnect_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	_ "github.com/gmproxy/gmproxy/proxy/h2xconnect"
)

// TestServerAdvertisesExtendedConnect: an x/net/http2 server in this
// process sends SETTINGS_ENABLE_CONNECT_PROTOCOL = 1.
func TestServerAdvertisesExtendedConnect(t *testing.T) {
	srv, cli := net.Pipe()
	defer cli.Close()
	go (&http2.Server{}).ServeConn(srv, &http2.ServeConnOpts{Handler: http.NotFoundHandler()})
	cli.SetDeadline(time.Now().Add(20 * time.Second))
	go func() {
		io.WriteString(cli, http2.ClientPreface)
		fr := http2.NewFramer(cli, nil)
		fr.WriteSettings()
	}()
	fr := http2.NewFramer(nil, cli)
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %T, want SETTINGS", f)
	}
	v, ok := sf.Value(http2.SettingEnableConnectProtocol)
	if !ok || v != 1 {
		t.Fatalf("SETTINGS_ENABLE_CONNECT_PROTOCOL = %d (present %v), want 1", v, ok)
	}
}
