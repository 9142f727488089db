// An external test package, like every user of the package: x/net/http2
// is initialised before any test runs, so the setting has to come from
// the environment the test process starts with.
package extendedconnect_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/proxy/extendedconnect"
)

func TestEnviron(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
		changed  bool
	}{
		{[]string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=http2xconnect=1"}, true},
		{[]string{"GODEBUG="}, []string{"GODEBUG=http2xconnect=1"}, true},
		{[]string{"GODEBUG=netdns=go", "HOME=/"}, []string{"GODEBUG=netdns=go,http2xconnect=1", "HOME=/"}, true},
		{[]string{"GODEBUG=http2xconnect=0"}, []string{"GODEBUG=http2xconnect=0"}, false},
		{[]string{"GODEBUG=netdns=go,http2xconnect=1"}, []string{"GODEBUG=netdns=go,http2xconnect=1"}, false},
		// Go trims no spaces: " http2xconnect=1" leaves it unset.
		{[]string{"GODEBUG=netdns=go, http2xconnect=1"}, []string{"GODEBUG=netdns=go, http2xconnect=1,http2xconnect=1"}, true},
		{[]string{"GODEBUG=a=1", "GODEBUG=b=1"}, []string{"GODEBUG=a=1,http2xconnect=1", "GODEBUG=b=1"}, true},
		{[]string{"XGODEBUG=http2xconnect=0"}, []string{"XGODEBUG=http2xconnect=0", "GODEBUG=http2xconnect=1"}, true},
	} {
		in := slices.Clone(tc.in)
		got, changed := extendedconnect.Environ(in)
		if !slices.Equal(got, tc.want) || changed != tc.changed {
			t.Errorf("Environ(%q) = %q, %v; want %q, %v", tc.in, got, changed, tc.want, tc.changed)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Environ(%q) modified its argument: %q", tc.in, in)
		}
	}
}

// TestServerAdvertisesExtendedConnect: an x/net/http2 server in a process
// started with Environ's environment sends SETTINGS_ENABLE_CONNECT_PROTOCOL
// = 1; this test process, started without it, does not (nothing here
// changes GODEBUG at initialisation).
func TestServerAdvertisesExtendedConnect(t *testing.T) {
	if os.Getenv("H2XCONNECT_CHILD") == "1" {
		if v := serverConnectSetting(t); v != 1 {
			t.Fatalf("with %s: SETTINGS_ENABLE_CONNECT_PROTOCOL = %d, want 1", extendedconnect.Setting, v)
		}
		return
	}
	if strings.Contains(os.Getenv("GODEBUG"), "http2xconnect=") {
		t.Skip("GODEBUG already chooses http2xconnect")
	}
	if v := serverConnectSetting(t); v != 0 {
		t.Fatalf("without %s: SETTINGS_ENABLE_CONNECT_PROTOCOL = %d, want absent", extendedconnect.Setting, v)
	}
	env, _ := extendedconnect.Environ(os.Environ())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestServerAdvertisesExtendedConnect$", "-test.count=1")
	cmd.Env = append(env, "H2XCONNECT_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// serverConnectSetting returns the SETTINGS_ENABLE_CONNECT_PROTOCOL value
// of an x/net/http2 server's first SETTINGS frame (0 when absent).
func serverConnectSetting(t *testing.T) uint32 {
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
	v, _ := sf.Value(http2.SettingEnableConnectProtocol)
	return v
}
