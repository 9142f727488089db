package testpeer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Ender ends a stream that a flooding client just opened.
type Ender func(fr *http2.Framer, stream uint32) error

var (
	// Cancel resets the stream itself, RST_STREAM(CANCEL): "rapid reset"
	// (CVE-2023-44487).
	Cancel Ender = func(fr *http2.Framer, stream uint32) error {
		return fr.WriteRSTStream(stream, http2.ErrCodeCancel)
	}
	// ProvokeReset sends a WINDOW_UPDATE of 0 on the stream, a stream error
	// (RFC 9113 §6.9) that the server answers with a RST_STREAM of its own:
	// "MadeYouReset" (CVE-2025-8671).
	ProvokeReset Ender = func(fr *http2.Framer, stream uint32) error {
		fr.AllowIllegalWrites = true
		return fr.WriteWindowUpdate(stream, 0)
	}
)

// ExpectCalm runs ResetFlood on c and fails t unless the server answered
// with GOAWAY(ENHANCE_YOUR_CALM) and ended the connection. It returns the
// pairs sent.
func ExpectCalm(t testing.TB, c net.Conn, scheme, authority string, pairs int, end Ender) (sent int) {
	t.Helper()
	code, goAway, sent, ended := ResetFlood(c, scheme, authority, pairs, end)
	expectCalmEnd(t, code, goAway, ended, fmt.Sprintf("%d streams opened and ended", sent))
	return sent
}

// expectCalmEnd fails t unless a flood (what it sent) met a GOAWAY
// (goAway, its code) of ENHANCE_YOUR_CALM and the connection's end.
func expectCalmEnd(t testing.TB, code http2.ErrCode, goAway, ended bool, what string) {
	t.Helper()
	if !goAway {
		t.Fatalf("no GOAWAY after %s", what)
	}
	if code != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", code)
	}
	if !ended {
		t.Error("connection still open after GOAWAY")
	}
}

// ResetFlood is an HTTP/2 reset flood client on c: the client preface,
// then pairs of HEADERS (GET scheme://authority/, ending the stream) and
// end's frame (Cancel: RST_STREAM, "rapid reset") as fast as the
// connection takes them, up to pairs, then a PING. It returns the error code of the server's
// GOAWAY (goAway false when the PING's answer or the connection's end came
// first), the pairs sent, and whether the connection then ended (false:
// a read met c's deadline, which the caller sets).
func ResetFlood(c net.Conn, scheme, authority string, pairs int, end Ender) (code http2.ErrCode, goAway bool, sent int, ended bool) {
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	codes := goAwayCode(c)
	block := requestBlock("GET", scheme, authority)
	for i := range pairs {
		id := uint32(2*i + 1)
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}) != nil ||
			end(fr, id) != nil {
			break // the server hung up
		}
		sent++
	}
	fr.WritePing(false, [8]byte{1})
	code, goAway = <-codes
	return code, goAway, sent, endsAfter(c)
}

// Sender writes one frame of a flood on the request stream it is given.
type Sender func(fr *http2.Framer, stream uint32) error

var (
	// EmptyData sends a DATA frame without octets or END_STREAM: it
	// moves the body on by nothing (CVE-2019-9518, "empty frames
	// flood").
	EmptyData Sender = func(fr *http2.Framer, stream uint32) error {
		return fr.WriteData(stream, false, nil)
	}
	// PaddedEmptyData sends a DATA frame of padding only (PADDED, 16
	// octets of it), without END_STREAM: no data octet either, and the
	// server gives the padding's flow-control window back at once.
	PaddedEmptyData Sender = func(fr *http2.Framer, stream uint32) error {
		return fr.WriteDataPadded(stream, false, nil, make([]byte, 16))
	}
	// UnknownFrame sends a frame of a type no RFC defines (0xfa), with an
	// 8-octet payload, on the stream: RFC 9113 §5.5 has the server ignore
	// it.
	UnknownFrame Sender = func(fr *http2.Framer, stream uint32) error {
		return fr.WriteRawFrame(0xfa, 0, stream, make([]byte, 8))
	}
)

// ExpectFrameFloodCalm runs FrameFlood on c and fails t unless the server
// answered with GOAWAY(ENHANCE_YOUR_CALM) and ended the connection. It
// returns the frames sent.
func ExpectFrameFloodCalm(t testing.TB, c net.Conn, scheme, authority string, frames int, send Sender) (sent int) {
	t.Helper()
	code, goAway, sent, ended := FrameFlood(c, scheme, authority, frames, send)
	expectCalmEnd(t, code, goAway, ended, fmt.Sprintf("%d frames of the flood", sent))
	return sent
}

// FrameFlood is an HTTP/2 client on c that floods an open request: the
// client preface, HEADERS of a POST to scheme://authority/ that does not
// end its stream, then send's frame on that stream as fast as the
// connection takes them, up to frames, then a PING. Its results are
// ResetFlood's, with the frames sent.
func FrameFlood(c net.Conn, scheme, authority string, frames int, send Sender) (code http2.ErrCode, goAway bool, sent int, ended bool) {
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	codes := goAwayCode(c)
	if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("POST", scheme, authority), EndHeaders: true}) == nil {
		for range frames {
			if send(fr, 1) != nil {
				break // the server hung up
			}
			sent++
		}
	}
	fr.WritePing(false, [8]byte{1})
	code, goAway = <-codes
	return code, goAway, sent, endsAfter(c)
}

// requestBlock is the HPACK block of a request's pseudo-header fields.
func requestBlock(method, scheme, authority string) []byte {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range [][2]string{{":method", method}, {":scheme", scheme}, {":path", "/"}, {":authority", authority}} {
		enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
	}
	return block.Bytes()
}

// goAwayCode reads the server's frames on c and gives the error code of
// its GOAWAY; it closes the channel without one at the answer to a PING,
// or at the connection's end.
func goAwayCode(c net.Conn) <-chan http2.ErrCode {
	codes := make(chan http2.ErrCode, 1)
	go func() {
		defer close(codes)
		rf := http2.NewFramer(io.Discard, c)
		for {
			fm, err := rf.ReadFrame()
			if err != nil {
				return
			}
			switch fm := fm.(type) {
			case *http2.GoAwayFrame:
				codes <- fm.ErrCode
				return
			case *http2.PingFrame:
				if fm.IsAck() {
					return
				}
			}
		}
	}()
	return codes
}

// endsAfter reads what the server still sends on c (a bounded amount)
// until the end and reports whether the connection ended; reaching c's
// deadline means it stayed open.
func endsAfter(c net.Conn) bool {
	var b [1]byte
	for range 1000 {
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
	return true
}
