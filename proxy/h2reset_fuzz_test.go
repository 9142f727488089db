package proxy

import (
	"bytes"
	"encoding/binary"
	"net"
	"slices"
	"testing"
)

// h2Ref is what a reading of a whole byte stream as HTTP/2 frames (RFC
// 9113 §4.1) finds: every frame header, every complete RST_STREAM
// (stream, code), the Pad Length octet of every padded DATA frame whose
// payload begins, and the offsets just past each frame that ends outside
// a header block or completes one (§6.10), and those just past each
// header block whose frames' payloads add up to more than h2RefBigBlock.
type h2Ref struct {
	hdrs     [][h2FrameHeaderLen]byte
	rsts     [][2]uint32
	pads     []int
	ends     []int
	bigEnds  []int
	inHeader bool // the stream ends inside a header block or a header frame
}

// h2RefBigBlock is the frameScanner.bigBlock of FuzzH2FrameScanner.
const h2RefBigBlock = 3

func h2Reference(b []byte, preface bool) h2Ref {
	var r h2Ref
	off := 0
	if preface {
		if len(b) < len(h2ClientPreface) {
			return r
		}
		off = len(h2ClientPreface)
		r.ends = append(r.ends, off)
	}
	inBlock := false
	block := 0
	for len(b)-off >= h2FrameHeaderLen {
		var h [h2FrameHeaderLen]byte
		copy(h[:], b[off:])
		r.hdrs = append(r.hdrs, h)
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ := h[3]
		headerFrame := typ == h2FrameHeaders || typ == h2FramePushPromise || typ == h2FrameContinuation
		if headerFrame {
			inBlock = h[4]&h2FlagEndHeaders == 0
			if typ != h2FrameContinuation {
				block = 0
			}
			block += n
		}
		off += h2FrameHeaderLen
		if typ == h2FrameData && h[4]&h2FlagPadded != 0 && n > 0 && len(b) > off {
			r.pads = append(r.pads, int(b[off]))
		}
		if len(b)-off < n {
			r.inHeader = inBlock || (n > 0 && (typ == h2FrameHeaders || typ == h2FramePushPromise || typ == h2FrameContinuation))
			return r
		}
		if typ == h2FrameRSTStream && n == 4 {
			r.rsts = append(r.rsts, [2]uint32{binary.BigEndian.Uint32(h[5:]) & 0x7fffffff, binary.BigEndian.Uint32(b[off:])})
		}
		off += n
		if !inBlock {
			r.ends = append(r.ends, off)
			if headerFrame && block > h2RefBigBlock {
				r.bigEnds = append(r.bigEnds, off)
			}
		}
	}
	r.inHeader = inBlock
	return r
}

// h2Chunks cuts b into pieces whose lengths come from cuts (each byte a
// length of 0..255, 0 an empty Read or Write), the rest in one piece.
func h2Chunks(b, cuts []byte) [][]byte {
	var out [][]byte
	for _, c := range cuts {
		n := min(int(c), len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

// recordConn is a net.Conn whose Writes are recorded.
type recordConn struct {
	net.Conn
	writes [][]byte
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// FuzzH2FrameScanner: the frame scanner of the reset guard follows the
// frames of a client's (hostile) stream and of the server's, however the
// reads and writes cut it: it sees the frame headers, RST_STREAM codes
// and padded DATA frames' Pad Lengths a reading of the whole stream sees, in order; the end scan reports is
// the last frame boundary (outside a header block) in the piece it was
// given; and it knows whether a header block is open, which arms
// read_header_timeout, and where the first header block over its
// bigBlock in each piece ends (the guard's graceful close). The guard's write passes on only whole frames and
// whole header blocks, in order, and holds the rest: a GOAWAY it writes
// between two writes lands between two frames.
func FuzzH2FrameScanner(f *testing.F) {
	frame := func(typ, flags byte, stream uint32, payload []byte) []byte {
		h := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(h[5:], stream)
		return append(h, payload...)
	}
	rst := frame(h2FrameRSTStream, 0, 1, []byte{0, 0, 0, 5})
	block := slices.Concat(frame(h2FrameHeaders, 0, 3, []byte("ab")), frame(h2FrameContinuation, 0, 3, nil),
		frame(h2FrameContinuation, h2FlagEndHeaders, 3, []byte("c")))
	f.Add(slices.Concat([]byte(h2ClientPreface), frame(0x4, 0, 0, nil), rst), []byte{1, 9, 3, 0, 20}, true)
	f.Add(slices.Concat(block, frame(h2FrameData, h2FlagEndStream, 3, []byte("body")), rst), []byte{10, 2}, false)
	f.Add(slices.Concat(frame(h2FrameHeaders, h2FlagEndHeaders, 1, []byte("big")), block, frame(h2FrameContinuation, h2FlagEndHeaders, 5, []byte("x")),
		frame(h2FrameHeaders, 0, 5, []byte("ab")), frame(h2FrameContinuation, h2FlagEndHeaders, 5, []byte("cd"))), []byte{14, 25, 4, 30}, false)
	f.Add(slices.Concat(frame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, 1, []byte("x")), frame(h2FrameHeaders, 0, 3, []byte("yy"))), []byte{11, 0, 1}, false)
	f.Add(frame(h2FrameRSTStream, 0, 0xffffffff, []byte{0, 0, 0, 1, 2}), []byte{12}, false)
	f.Add([]byte{0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 'x'}, []byte{4}, false)
	f.Add(slices.Concat(frame(h2FrameData, h2FlagPadded, 1, nil), frame(h2FrameData, h2FlagPadded, 1, []byte{2, 'x', 0, 0}),
		frame(h2FrameData, h2FlagPadded|h2FlagEndStream, 1, []byte{7})), []byte{9, 10, 3}, false)
	f.Fuzz(func(t *testing.T, stream, cuts []byte, preface bool) {
		want := h2Reference(stream, preface)

		var got h2Ref
		s := frameScanner{
			onHdr:    func(h *[h2FrameHeaderLen]byte) { got.hdrs = append(got.hdrs, *h) },
			onRST:    func(id, code uint32) { got.rsts = append(got.rsts, [2]uint32{id, code}) },
			onPad:    func(pad int) { got.pads = append(got.pads, pad) },
			bigBlock: h2RefBigBlock,
		}
		if preface {
			s.skip = len(h2ClientPreface)
		}
		base := 0
		for _, p := range h2Chunks(stream, cuts) {
			end := s.scan(p)
			wantEnd := -1
			for _, e := range want.ends {
				if e > base && e <= base+len(p) {
					wantEnd = e - base
				}
			}
			if end != wantEnd {
				t.Fatalf("scan of [%d:%d]: end %d, want %d (boundaries %v)", base, base+len(p), end, wantEnd, want.ends)
			}
			wantBig := -1
			for _, e := range want.bigEnds {
				if e > base && e <= base+len(p) {
					wantBig = e - base
					break
				}
			}
			if s.bigEnd != wantBig {
				t.Fatalf("scan of [%d:%d]: bigEnd %d, want %d (large blocks end at %v)", base, base+len(p), s.bigEnd, wantBig, want.bigEnds)
			}
			base += len(p)
		}
		if !slices.Equal(got.hdrs, want.hdrs) {
			t.Fatalf("frame headers %x, want %x", got.hdrs, want.hdrs)
		}
		if !slices.Equal(got.rsts, want.rsts) {
			t.Fatalf("RST_STREAMs %v, want %v", got.rsts, want.rsts)
		}
		if !slices.Equal(got.pads, want.pads) {
			t.Fatalf("Pad Lengths %v, want %v", got.pads, want.pads)
		}
		if s.inHeaders() != want.inHeader {
			t.Fatalf("inHeaders %v, want %v", s.inHeaders(), want.inHeader)
		}

		if preface {
			return // the guard's writer scans the server's frames, no preface
		}
		rc := &recordConn{}
		g := newResetGuard(rc, 100, 100, nil)
		for _, p := range h2Chunks(stream, cuts) {
			if n, err := g.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		written := 0
		for _, w := range rc.writes {
			written += len(w)
			if !slices.Contains(want.ends, written) {
				t.Fatalf("a write ends at %d, no frame boundary (boundaries %v)", written, want.ends)
			}
		}
		if all := slices.Concat(slices.Concat(rc.writes...), g.held); !bytes.Equal(all, stream) {
			t.Fatalf("written and held %x, want %x", all, stream)
		}
	})
}
