package daemon

import (
	"crypto/tls"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestH2FrameOverMaxFrameSize: an HTTP/2 client may not send a frame
// larger than the server's SETTINGS_MAX_FRAME_SIZE (RFC 9113 §4.2: a
// FRAME_SIZE_ERROR). x/net/http2 keeps its frame read buffer at the size
// of the largest frame read for the connection's life, so a server that
// accepted 1 MiB frames let each client connection pin 1 MiB with one
// frame of an unknown type (ignored, §4.1) and then idle: the server
// advertises, and holds clients to, the protocol's initial 16 KiB.
func TestH2FrameOverMaxFrameSize(t *testing.T) {
	b := newBackend(t)
	td := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	c, err := tls.Dial("tcp", td.addr, &tls.Config{RootCAs: ecdsaRoots(t), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxFrameSize); ok && v != 16384 {
		t.Errorf("server advertises SETTINGS_MAX_FRAME_SIZE %d, want the initial 16384", v)
	}
	fr.WriteSettingsAck()
	// An unknown frame type (ignored by a server that takes its size) of
	// 64 KiB, then a PING.
	fr.WriteRawFrame(0xbb, 0, 0, make([]byte, 64<<10))
	fr.WritePing(false, [8]byte{1})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended without GOAWAY: %v", err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() {
				t.Fatal("server answered a PING sent after a 64 KiB frame: it took the frame")
			}
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeFrameSize {
				t.Fatalf("GOAWAY %v, want FRAME_SIZE_ERROR", f.ErrCode)
			}
			return
		}
	}
}
