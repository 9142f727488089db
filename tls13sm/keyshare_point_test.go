package tls13sm

import (
	"crypto/rand"
	"encoding/binary"
	"testing"

	gmecdh "github.com/emmansun/gmsm/ecdh"
)

// TestClientKeySharePointRejected: a curveSM2 key share that is not an
// uncompressed point on the curve (RFC 8998 §3.1: 04 || X || Y, 65 bytes;
// RFC 8446 §4.2.8.2 and SEC 1 §3.2.2.1: on the curve, not the point at
// infinity) ends the handshake with illegal_parameter before the server
// uses it.
func TestClientKeySharePointRejected(t *testing.T) {
	k, err := gmecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	good := k.PublicKey().Bytes()
	offCurve := append([]byte{}, good...)
	offCurve[64] ^= 1
	compressed := append([]byte{2 | good[64]&1}, good[1:33]...)
	xTooBig := append([]byte{}, good...)
	for i := 1; i < 33; i++ {
		xTooBig[i] = 0xff // x >= p: not a field element
	}
	for _, tc := range []struct {
		name  string
		share []byte
	}{
		{"off-curve", offCurve},
		{"infinity", []byte{0}},
		{"zeros", make([]byte, 65)},
		{"compressed", compressed},
		{"hybrid-prefix", append([]byte{6 | good[64]&1}, good[1:]...)},
		{"x-not-a-field-element", xTooBig},
		{"truncated", good[:64]},
		{"extended", append(append([]byte{}, good...), 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var exts []byte
			exts = appendExtension(exts, extSupportedVersions, []byte{2, 3, 4})
			exts = appendExtension(exts, extSupportedGroups, []byte{0, 2, 0, byte(CurveSM2)})
			exts = appendExtension(exts, extSignatureAlgorithms, []byte{0, 2, 7, 8})
			ks := binary.BigEndian.AppendUint16(nil, CurveSM2)
			ks = binary.BigEndian.AppendUint16(ks, uint16(len(tc.share)))
			ks = append(ks, tc.share...)
			exts = appendExtension(exts, extKeyShare, append(binary.BigEndian.AppendUint16(nil, uint16(len(ks))), ks...))
			alert, err := answerHello(t, helloWith(exts))
			if err == nil || alert != AlertIllegalParameter {
				t.Fatalf("server sent alert %v (error %v), want illegal_parameter", alert, err)
			}
		})
	}
}
