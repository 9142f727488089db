package proxy

import "testing"

// FuzzAmbiguityGuard: the scanner never panics, and how the bytes are
// split into reads never changes its verdict.
func FuzzAmbiguityGuard(f *testing.F) {
	f.Add([]byte("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), uint8(3))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"), uint8(1))
	f.Add([]byte("content-length:1\ntransfer-encoding:x\n\n"), uint8(7))
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		var whole, split ambiguityGuard
		whole.scan(b)
		n := int(step%16) + 1
		for i := 0; i < len(b); i += n {
			split.scan(b[i:min(i+n, len(b))])
		}
		if whole.flagged.Load() != split.flagged.Load() {
			t.Fatalf("verdict depends on read sizes: whole %v, split by %d %v", whole.flagged.Load(), n, split.flagged.Load())
		}
	})
}
