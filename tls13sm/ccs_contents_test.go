package tls13sm

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestChangeCipherSpecContents — RFC 8446 §5: the middlebox-compatibility
// ChangeCipherSpec is the single byte 0x01 and is dropped; "an
// implementation which receives any other change_cipher_spec value ...
// MUST abort the handshake with an unexpected_message alert". A client
// takes the server's one compatibility CCS only (§D.4: the server sends
// one, right after its ServerHello or HelloRetryRequest); a second is
// unexpected too.
func TestChangeCipherSpecContents(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	hello := zzHello(t, nil)
	for _, tc := range []struct{ name, rec string }{
		{"value-2", "\x14\x03\x03\x00\x01\x02"},
		{"value-0", "\x14\x03\x03\x00\x01\x00"},
		{"two-bytes", "\x14\x03\x03\x00\x02\x01\x01"},
		{"empty", "\x14\x03\x03\x00\x00"},
	} {
		t.Run("client-sends-"+tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			dl := time.Now().Add(testwait.Bound(10 * time.Second))
			a.SetDeadline(dl)
			b.SetDeadline(dl)
			b.Write(append(zzRecord(recordTypeHandshake, hello), tc.rec...))
			err := Server(a, srvCfg).Handshake()
			a.Close()
			wantAlert(t, err, AlertUnexpectedMessage, false)
		})
	}

	// The server's compatibility CCS rewritten in its flight.
	for _, tc := range []struct {
		name string
		ccs  []byte
	}{
		{"value-2", []byte{recordTypeChangeCipherSpec, 3, 3, 0, 1, 2}},
		{"two-bytes", []byte{recordTypeChangeCipherSpec, 3, 3, 0, 2, 1, 1}},
		{"twice", append(zzCCS[:len(zzCCS):len(zzCCS)], zzCCS...)},
	} {
		t.Run("server-sends-"+tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			dl := time.Now().Add(testwait.Bound(10 * time.Second))
			a.SetDeadline(dl)
			b.SetDeadline(dl)
			srvDone := make(chan error, 1)
			go func() {
				s := Server(&ccsRewriteConn{Conn: a, ccs: tc.ccs}, srvCfg)
				srvDone <- s.Handshake()
				a.Close()
			}()
			c := Client(b, cliCfg)
			cerr := c.Handshake()
			b.Close()
			<-srvDone
			wantAlert(t, cerr, AlertUnexpectedMessage, false)
		})
	}
}

// ccsRewriteConn replaces the first ChangeCipherSpec record its writes
// carry (a flight is written whole) with ccs.
type ccsRewriteConn struct {
	net.Conn
	ccs  []byte
	done bool
}

func (c *ccsRewriteConn) Write(b []byte) (int, error) {
	if !c.done {
		if i := bytes.Index(b, zzCCS); i >= 0 {
			c.done = true
			out := append(append(append([]byte(nil), b[:i]...), c.ccs...), b[i+len(zzCCS):]...)
			if _, err := c.Conn.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return c.Conn.Write(b)
}
