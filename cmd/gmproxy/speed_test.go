package main

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/speed"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

func runSpeedJSON(t *testing.T, args ...string) (speed.Report, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(append([]string{"speed", "-json"}, args...), &out, &errb)
	var rep speed.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, bad JSON: %v\n%s\n%s", code, err, out.String(), errb.String())
	}
	return rep, code, errb.String()
}

func TestSpeedJSON(t *testing.T) {
	rep, code, stderr := runSpeedJSON(t, "-seconds", "0.05", "-bytes", "1024", "sm4-gcm", "sm2-sign", "-evp", "hmac-sm3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if rep.Seconds != 0.05 || rep.Multi != 1 || rep.Impl.SM4Blocks == "" {
		t.Errorf("header %+v", rep)
	}
	got := map[string]speed.Result{}
	for _, r := range rep.Results {
		got[r.Name] = r
	}
	if len(got) != 3 {
		t.Fatalf("results %v", rep.Results)
	}
	if r := got["sm4-gcm"]; len(r.Sizes) != 1 || r.Sizes[0].Bytes != 1024 || r.Sizes[0].BytesPerSec <= 0 {
		t.Errorf("sm4-gcm %+v", r)
	}
	if r := got["hmac-sm3"]; r.Unit != "bytes" || len(r.Sizes) != 1 || r.Sizes[0].Ops <= 0 {
		t.Errorf("hmac-sm3 %+v", r)
	}
	// Sane: an SM2 signature takes between 1 µs and 100 ms here.
	if r := got["sm2-sign"]; r.Unit != "ops" || r.SecPerOp < 1e-6 || r.SecPerOp > 0.1 {
		t.Errorf("sm2-sign %+v", r)
	}
}

// TestSpeedProtocolRows runs the rows that go through the real tlcp and
// tls13sm packages: records at one size, and complete handshakes.
func TestSpeedProtocolRows(t *testing.T) {
	if testing.Short() {
		t.Skip("handshakes per row")
	}
	rep, _, _ := runSpeedJSON(t, "-seconds", "0.05", "-bytes", "16384", "record", "handshake")
	want := map[string]string{
		"tlcp-sm4-cbc": "bytes", "tlcp-sm4-gcm": "bytes", "tls13sm-sm4-gcm": "bytes", "tls13sm-sm4-ccm": "bytes",
		"tlcp-ecc-handshake": "ops", "tlcp-ecdhe-handshake": "ops", "tlcp-resumed-handshake": "ops",
		"tls13sm-handshake": "ops", "tls13sm-resumed-handshake": "ops",
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d rows, want %d", len(rep.Results), len(want))
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Name, r.Error)
			continue
		}
		if want[r.Name] != r.Unit {
			t.Errorf("%s: unit %q, want %q", r.Name, r.Unit, want[r.Name])
		}
		switch r.Unit {
		case "bytes":
			if len(r.Sizes) != 1 || r.Sizes[0].Bytes != 16384 || r.Sizes[0].BytesPerSec <= 0 {
				t.Errorf("%s: %+v", r.Name, r)
			}
		case "ops":
			if r.Ops <= 0 || r.OpsPerSec <= 0 {
				t.Errorf("%s: %+v", r.Name, r)
			}
		}
	}
}

func TestSpeedTableAndFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"speed", "-seconds", "0.02", "-multi", "2", "-bytes", "64", "sm3", "sm2-verify"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"The 'numbers' are in 1000s of bytes per second processed.", "64 bytes", "sm3 ", "sm2 verify", "2 worker(s)", "SM4 single block:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "Doing sm3 for") {
		t.Errorf("progress: %s", errb.String())
	}
	for _, args := range [][]string{{"rc4"}, {"-seconds", "0"}, {"-seconds", "NaN", "sm3"}, {"-multi", "0"}, {"-bytes", "17"}} {
		var o, e bytes.Buffer
		if code := dispatch(append([]string{"speed"}, args...), &o, &e); code != 2 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
	var o, e bytes.Buffer
	if code := dispatch([]string{"speed", "-list"}, &o, &e); code != 0 || !strings.Contains(o.String(), "tlcp-sm4-cbc") || !strings.Contains(o.String(), "sm4-xts") {
		t.Errorf("-list: %d\n%s", code, o.String())
	}
}

// misdirectedListener accepts on a loopback listener but reports the
// address of a closed port, so that every dial to it fails, as a dial does
// when the process is out of descriptors or ports.
type misdirectedListener struct {
	*net.TCPListener
	addr net.Addr
}

func (l misdirectedListener) Addr() net.Addr { return l.addr }

// TestTCPPairDialFails: when the dial fails, tcpPair returns the error
// instead of waiting for ever for a connection to accept, and the next
// pair is still accepted by its own call.
func TestTCPPairDialFails(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr()
	closed.Close()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		_, _, err := tcpPair(misdirectedListener{ln, closedAddr})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("tcpPair to a closed port succeeded")
		}
	case <-time.After(testwait.Bound(10 * time.Second)):
		t.Fatal("tcpPair waits for ever after a failed dial")
	}
	c, s, err := tcpPair(ln)
	if err != nil {
		t.Fatalf("the next pair: %v", err)
	}
	c.Close()
	s.Close()
}
