package frontdoor

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// syncBuffer is a log buffer the server's goroutines write to.
type syncBuffer = testpeer.SyncBuffer

// TestHandshakeFailedLogEscapesSNI: the SNI of a failed handshake reaches
// the program log (JSON, as gmproxy writes it) escaped as the access log
// escapes it: a C1 control (CSI U+009B, NEL U+0085), a bidirectional
// override (U+202E) or an ESC in a raw ClientHello's server_name cannot
// drive the terminal of an operator reading the log, nor make the name
// read otherwise.
func TestHandshakeFailedLogEscapesSNI(t *testing.T) {
	sites, _ := tlsSites(t)
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLS: true, TLCP: true, Sites: sites, Logger: log}, newRecObserver())
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sni = "a.example.cn\u202enc.elpmaxe\u009b31m\u0085\x1b[2J"
	// Only TLCP suites in a TLS hello: the handshake fails (TestServer360Pattern).
	c.Write(helloSpec{recVers: 0x0301, vers: 0x0303, suites: []uint16{0xe013, 0xe053, 0x00ff}, sni: sni}.flight())
	c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
	io.ReadAll(c) // the server closes the connection once the failure is logged
	got := logs.String()
	if !strings.Contains(got, `"msg":"handshake failed"`) {
		t.Fatalf("no handshake failure logged:\n%s", got)
	}
	for _, raw := range []string{"\u202e", "\u009b", "\u0085", `\u001b`, "\x1b"} {
		if strings.Contains(got, raw) {
			t.Errorf("the log holds the client's %+q unescaped:\n%s", raw, got)
		}
	}
	// The access log's escape, JSON-quoted: \xHH becomes \\xHH.
	if want := `"sni":"a.example.cn\\xe2\\x80\\xaenc.elpmaxe\\xc2\\x9b31m\\xc2\\x85\\x1b[2J"`; !strings.Contains(got, want) {
		t.Errorf("the log's sni is not the access log's escape %s:\n%s", want, got)
	}
}
