package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/lograte"
)

// HTTP/2 "rapid reset" (CVE-2023-44487): a client opens streams and resets
// them at once (HEADERS then RST_STREAM), so the server starts request
// after request while the client's concurrency limit never fills. The
// handler sends nothing upstream for a stream already reset (forward checks
// the request context); resetGuard bounds the rate of resets per
// connection with a token bucket and, past it, sends GOAWAY with
// ENHANCE_YOUR_CALM (RFC 9113 §5.4.1, §7) and ends the connection.
//
// A client can also make the server reset its streams ("MadeYouReset",
// CVE-2025-8671): a frame that is a stream error (a WINDOW_UPDATE of 0, a
// DATA frame on a stream it ended...) frees the stream's slot as a
// RST_STREAM of its own would, while the handler already started. Those
// resets, the server's RST_STREAMs with an error code that blames the
// client (PROTOCOL_ERROR, FLOW_CONTROL_ERROR, STREAM_CLOSED,
// FRAME_SIZE_ERROR, REFUSED_STREAM), take tokens from the same bucket.
//
// A header block of empty CONTINUATION frames ("CONTINUATION flood",
// CVE-2024-27316's class, RFC 9113 §6.10): x/net/http2 bounds a block by
// the size of its payloads (twice the header list left), which empty
// frames do not grow, so a client could send them as fast as the server
// reads for all of read_header_timeout, on connection after connection,
// each frame read, ordered and fed to the HPACK decoder for nothing. Past
// h2MaxEmptyContinuations in one block the guard ends the connection as
// for a reset flood, GOAWAY(ENHANCE_YOUR_CALM) (§10.5: activity that is
// suspicious).
//
// Two more kinds of frames cost the server a read and a pass through its
// serve loop each while they move nothing on, and nothing bounded them
// over a connection (body_timeout ends one stream, the idle timeout
// counts streams): DATA frames without a data octet that do not end
// their stream ("empty frames flood", CVE-2019-9518; padding alone counts
// as empty: x/net gives its flow-control window back at once, two
// WINDOW_UPDATEs written for each), past h2MaxEmptyData in a row; and frames of the types RFC 9113 leaves to
// extensions (above CONTINUATION, §5.5: ignored, or PRIORITY_UPDATE of
// RFC 9218, which x/net processes), past h2MaxUnknownFrames between two
// of the client's HEADERS or data-carrying DATA frames. Either ends the
// connection as a reset flood does. An empty DATA frame with END_STREAM
// ends a body (gRPC clients and browsers end theirs so) and is not
// counted.
//
// A STREAM_CLOSED reset of a stream the server had already ended (its
// response sent whole, or reset) is not counted: a client whose upload the
// server answered early has DATA frames in flight, each answered so, and
// its stream freed no slot and started no work.
//
// resetGuard sits between the HTTP/2 server and the connection. It follows
// the frame boundaries of both directions (a 9-octet header, then the
// payload, RFC 9113 §4.1) without decoding payloads, so that the GOAWAY it
// writes lands between two of the server's frames, and not inside a header
// block (HEADERS or PUSH_PROMISE, then CONTINUATION frames up to the one
// with END_HEADERS), which no other frame may interrupt (§6.10).
//
// The guard also closes gracefully a connection that sent a large header
// block (over h2LargeBlock), as the handler does for a large field
// (largeH2Field): the HPACK decoder keeps the buffer that gathered a field
// spanning frames for the connection's life, and the handler never sees
// the heads the server refuses itself (431 over max_header_bytes, 400,
// RST_STREAM for a malformed field) nor trailer sections, and it takes a
// cookie field for its crumbs, however large the field. Right after such
// a block the guard hands the server a GOAWAY(NO_ERROR) of the client's
// making, which x/net/http2 takes as the start of a graceful shutdown:
// GOAWAY with the last stream it took, the close once that stream and the
// others open are done (RFC 9113 §6.8), and no new stream from then on.

// DefaultHTTP2MaxResetRate is the default of LimitsConfig.HTTP2MaxResetRate.
const DefaultHTTP2MaxResetRate = 100

const (
	h2FrameHeaderLen    = 9
	h2ClientPreface     = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameData         = 0x0
	h2FrameHeaders      = 0x1
	h2FrameRSTStream    = 0x3
	h2FramePushPromise  = 0x5
	h2FrameGoAway       = 0x7
	h2NoError           = 0x0
	h2FrameContinuation = 0x9
	h2FlagEndStream     = 0x1
	h2FlagEndHeaders    = 0x4
	h2FlagPadded        = 0x8
	h2StreamClosed      = 0x5
	h2EnhanceYourCalm   = 0xb
)

// errResetFlood ends the server's reading of a connection that reset
// streams too fast.
var errResetFlood = errors.New("http2: client reset streams faster than http2_max_reset_rate")

// errContinuationFlood ends the server's reading of a connection that
// sent a header block of empty CONTINUATION frames.
var errContinuationFlood = errors.New("http2: client sent a header block of empty CONTINUATION frames")

// errEmptyDataFlood ends the server's reading of a connection that sent
// empty DATA frames one after another.
var errEmptyDataFlood = errors.New("http2: client sent empty DATA frames without END_STREAM in a row")

// errUnknownFrameFlood ends the server's reading of a connection that
// sent extension frames one after another.
var errUnknownFrameFlood = errors.New("http2: client sent extension frames without requests or data")

// floodKind tells which of the client's frames tripped a guard.
type floodKind uint8

const (
	floodResets        floodKind = iota // its resets, or the server's of its streams
	floodContinuations                  // empty CONTINUATIONs in a header block
	floodEmptyData                      // empty DATA frames in a row
	floodUnknownFrames                  // extension frames
)

// h2MaxEmptyContinuations is how many empty CONTINUATION frames one
// header block may hold. An empty frame adds nothing to a block; a
// sender whose block ended on a frame boundary may close it with one
// (END_HEADERS), and a few more are tolerated.
const h2MaxEmptyContinuations = 8

// h2MaxEmptyData is how many DATA frames without a data octet and
// without END_STREAM a client may send in a row (CVE-2019-9518, "empty
// frames flood"): such a frame moves no body on, and RFC 9113 gives it no
// use. Envoy ends the connection at the second in a row
// (max_consecutive_inbound_frames_with_empty_payload, default 1), Netty
// past 10; a client that flushes an empty write now and then on
// several of its streams sends a few, never many.
const h2MaxEmptyData = 10

// h2MaxUnknownFrames is how many frames of extension types (above
// CONTINUATION: those x/net ignores, RFC 9113 §5.5, and PRIORITY_UPDATE)
// a client may send between two of its HEADERS frames or DATA frames
// with data. Browsers send a few per request at most (PRIORITY_UPDATE,
// RFC 9218 §7.1, when a stream's priority changes; Chrome's GREASE frame
// of a reserved type once per connection), so 1000 leaves them far
// behind, while a flood costs the server at most a request's worth of
// work before each new request or data it must also send.
const h2MaxUnknownFrames = 1000

// frameScanner follows frame boundaries in one direction of a connection.
type frameScanner struct {
	skip  int // octets to pass before the next frame header (preface, payload)
	hdr   [h2FrameHeaderLen]byte
	hdrN  int
	onHdr func(hdr *[h2FrameHeaderLen]byte)
	// onRST, when set, gets the stream and error code of every
	// RST_STREAM frame (the code is the frame's 4-octet payload).
	onRST func(stream, code uint32)
	code  [4]byte
	codeN int // octets of the RST_STREAM payload still to collect: 4..1, 0 none
	// onPad, when set, gets the Pad Length octet of every padded DATA
	// frame (its payload's first, RFC 9113 §6.1); padN: that octet is
	// still to come.
	onPad func(pad int)
	padN  bool
	// inBlock: inside a header block, which ends with the frame that
	// carries END_HEADERS; the frames before it end no unit.
	inBlock bool
	// hdrFrame: inside the payload of a HEADERS, PUSH_PROMISE or
	// CONTINUATION frame.
	hdrFrame bool
	// block: the payload octets of the header block in progress (or
	// the last one) so far.
	block int
	// bigBlock, when above 0, is the block size past which scan
	// reports the block's end in bigEnd.
	bigBlock int
	// bigEnd: after scan(b), the offset in b just past the first header
	// block over bigBlock that b completes, -1 if none.
	bigEnd int
}

// blockEnd notes that a header block ends at offset off of the b being
// scanned.
func (s *frameScanner) blockEnd(off int) {
	if s.bigBlock > 0 && s.block > s.bigBlock && s.bigEnd < 0 {
		s.bigEnd = off
	}
}

// inHeaders reports whether the frames scanned end inside a header block
// (one begun and not yet complete).
func (s *frameScanner) inHeaders() bool { return s.inBlock || s.hdrFrame }

// scan consumes b and calls onHdr for every complete frame header. It
// returns the offset in b just past the last frame that b completes
// outside a header block (or that completes one), or -1 when b completes
// none.
func (s *frameScanner) scan(b []byte) (end int) {
	end = -1
	s.bigEnd = -1
	for off := 0; off < len(b); {
		if s.skip > 0 {
			n := min(s.skip, len(b)-off)
			if s.padN {
				s.padN = false
				s.onPad(int(b[off]))
			}
			if s.codeN > 0 {
				k := copy(s.code[4-s.codeN:], b[off:off+n])
				if s.codeN -= k; s.codeN == 0 {
					s.onRST(binary.BigEndian.Uint32(s.hdr[5:])&0x7fffffff, binary.BigEndian.Uint32(s.code[:]))
				}
			}
			s.skip -= n
			if s.skip == 0 {
				if s.hdrFrame && !s.inBlock {
					s.blockEnd(off + n)
				}
				s.hdrFrame = false
			}
			if off += n; s.skip == 0 && !s.inBlock {
				end = off
			}
			continue
		}
		n := copy(s.hdr[s.hdrN:], b[off:])
		s.hdrN += n
		off += n
		if s.hdrN < h2FrameHeaderLen {
			return end
		}
		s.hdrN = 0
		s.skip = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
		switch s.hdr[3] {
		case h2FrameHeaders, h2FramePushPromise, h2FrameContinuation:
			if s.hdr[3] != h2FrameContinuation {
				s.block = 0
			}
			s.block += s.skip
			s.inBlock = s.hdr[4]&h2FlagEndHeaders == 0
			s.hdrFrame = s.skip > 0
			if !s.inBlock && !s.hdrFrame {
				s.blockEnd(off)
			}
		}
		if s.skip == 0 && !s.inBlock {
			end = off
		}
		if s.onHdr != nil {
			s.onHdr(&s.hdr)
		}
		if s.onRST != nil && s.hdr[3] == h2FrameRSTStream && s.skip == 4 {
			s.codeN = 4
		}
		s.padN = s.onPad != nil && s.hdr[3] == h2FrameData && s.hdr[4]&h2FlagPadded != 0
	}
	return end
}

// GuardHTTP2 returns the connection an HTTP/2 server should serve instead
// of c: one that bounds the client's stream resets by l's
// HTTP2MaxResetRate (l with defaults applied, LimitsConfig.WithDefaults)
// and answers a flood with GOAWAY(ENHANCE_YOUR_CALM), logged to logger,
// and that bounds the reading of each header block by l's
// ReadHeaderTimeout.
func GuardHTTP2(c net.Conn, l *LimitsConfig, logger *slog.Logger) net.Conn {
	rate := l.HTTP2MaxResetRate
	var g *resetGuard
	g = newResetGuard(c, rate, resetBurst(rate, l.MaxConcurrentStreams), func() {
		// A client may flood on connection after connection: one line
		// a second, with the count of those held back.
		if ok, held := resetFloodLog.Allow(); ok {
			switch g.kind {
			case floodContinuations:
				logger.Warn("HTTP/2 client sent a header block of empty CONTINUATION frames: GOAWAY ENHANCE_YOUR_CALM", "client", c.RemoteAddr().String(), "max_empty_continuations", h2MaxEmptyContinuations, "suppressed", held)
				return
			case floodEmptyData:
				logger.Warn("HTTP/2 client sent empty DATA frames in a row: GOAWAY ENHANCE_YOUR_CALM", "client", c.RemoteAddr().String(), "max_empty_data", h2MaxEmptyData, "suppressed", held)
				return
			case floodUnknownFrames:
				logger.Warn("HTTP/2 client sent extension frames without requests or data: GOAWAY ENHANCE_YOUR_CALM", "client", c.RemoteAddr().String(), "max_unknown_frames", h2MaxUnknownFrames, "suppressed", held)
				return
			}
			logger.Warn("HTTP/2 client reset streams too fast: GOAWAY ENHANCE_YOUR_CALM", "client", c.RemoteAddr().String(), "max_reset_rate", rate, "suppressed", held)
		}
	})
	g.hdrTimeout = l.ReadHeaderTimeout
	g.in.bigBlock = h2LargeBlock
	return g
}

// h2LargeBlock is the size of a client's header block (the payloads of
// its frames, HPACK-encoded) past which the guard closes the connection
// gracefully. The decoder's buffer for a field that spans frames holds
// at most the block, doubled as it grows: a block of up to two frames,
// a head of many ordinary fields included, costs little more than the
// frame buffer the connection keeps anyway.
const h2LargeBlock = 2 * H2MaxReadFrameSize

// resetFloodLog bounds GuardHTTP2's warnings over the process.
var resetFloodLog = &lograte.Limiter{Interval: int64(time.Second)}

// resetGuard is the connection the HTTP/2 server sees.
type resetGuard struct {
	net.Conn
	in     frameScanner // client → server, only the server's reader uses it
	onTrip func()
	flood  atomic.Bool

	bucket sync.Mutex // the reader's and the writers' resets take tokens
	rate   float64    // resets per second
	burst  float64
	tokens float64
	last   time.Time

	lastStream uint32 // highest stream the client opened (GOAWAY's last-stream-id)

	// emptyConts: empty CONTINUATION frames in the client's header
	// block in progress; emptyData: the client's last DATA frames that
	// were empty, without END_STREAM; unknown: its extension frames
	// since its last HEADERS or data octets; kind: what tripped the
	// guard, when the reader did. Only the server's reader uses them.
	emptyConts int
	emptyData  int
	unknown    int
	kind       floodKind

	// hdrTimeout bounds the reading of a header block (0: none);
	// hdrArmed: the read deadline for the block in progress is set.
	// Only the server's reader uses them.
	hdrTimeout time.Duration
	hdrArmed   bool

	// inject: octets for the server's reader before the client's next
	// ones (the GOAWAY after a large header block, then the rest of the
	// read it ended in); injected: that GOAWAY was made. Only the
	// server's reader uses them.
	inject   []byte
	injected bool

	wmu     sync.Mutex
	out     frameScanner      // server → client, under wmu
	ended   [endedKeep]uint32 // under wmu: client streams the server ended last, a ring
	endedN  int               // under wmu: streams put in ended
	held    []byte            // under wmu: the start of a frame the server's last Write ended in
	sent    bool              // under wmu
	pending atomic.Bool       // GOAWAY to write at the next frame boundary
	wentOut atomic.Bool       // the GOAWAY was written (Close lingers)
}

func newResetGuard(c net.Conn, rate, burst int, onTrip func()) *resetGuard {
	g := &resetGuard{Conn: c, rate: float64(rate), burst: float64(burst), tokens: float64(burst), onTrip: onTrip}
	g.in.skip = len(h2ClientPreface)
	g.in.onHdr = g.clientFrame
	g.in.onPad = g.dataPad
	g.out.onRST = g.serverReset
	g.out.onHdr = g.serverFrame
	return g
}

// reset takes a token for a stream reset; with none left the client is
// flooding.
func (g *resetGuard) reset() {
	g.bucket.Lock()
	defer g.bucket.Unlock()
	now := time.Now()
	if !g.last.IsZero() {
		g.tokens = min(g.burst, g.tokens+now.Sub(g.last).Seconds()*g.rate)
	}
	g.last = now
	g.tokens--
	if g.tokens < 0 {
		g.flood.Store(true)
	}
}

// serverReset counts the server's resets of client streams that the
// client caused (RFC 9113 §7 codes of its protocol errors, and streams it
// opened past the concurrency limit).
// A STREAM_CLOSED reset of a stream the server had ended is not.
func (g *resetGuard) serverReset(stream, code uint32) {
	if stream&1 == 0 {
		return
	}
	switch code {
	case h2StreamClosed:
		if g.endedLately(stream) {
			return
		}
		g.reset()
	case 0x1, 0x3, 0x6, 0x7: // PROTOCOL_ERROR, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR, REFUSED_STREAM
		g.reset()
	}
	g.streamEnded(stream)
}

// endedKeep is how many streams the server ended a connection remembers,
// for the client's frames still in flight on them.
const endedKeep = 128

// serverFrame notes a server frame that ends a client stream: DATA or
// HEADERS with END_STREAM (an RST_STREAM is noted by serverReset).
func (g *resetGuard) serverFrame(h *[h2FrameHeaderLen]byte) {
	if (h[3] == h2FrameData || h[3] == h2FrameHeaders) && h[4]&h2FlagEndStream != 0 {
		if id := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff; id&1 == 1 {
			g.streamEnded(id)
		}
	}
}

func (g *resetGuard) streamEnded(id uint32) {
	g.ended[g.endedN%endedKeep] = id
	g.endedN++
}

// endedLately tells whether id is among the streams the server ended
// last.
func (g *resetGuard) endedLately(id uint32) bool {
	for _, e := range g.ended[:min(g.endedN, endedKeep)] {
		if e == id {
			return true
		}
	}
	return false
}

func (g *resetGuard) clientFrame(h *[h2FrameHeaderLen]byte) {
	id := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff
	switch h[3] {
	case h2FrameData:
		switch {
		case h[4]&h2FlagEndStream != 0:
			g.emptyData = 0
		case h[0]|h[1]|h[2] == 0:
			g.emptyDataFrame()
		case h[4]&h2FlagPadded != 0:
			// dataPad decides, at the Pad Length octet.
		default:
			g.dataOctets()
		}
	case h2FrameHeaders:
		if id > g.lastStream && id&1 == 1 {
			g.lastStream = id
		}
		g.emptyConts = 0
		g.unknown = 0
	case h2FrameContinuation:
		if h[0]|h[1]|h[2] == 0 {
			if g.emptyConts++; g.emptyConts > h2MaxEmptyContinuations {
				g.tripOn(floodContinuations)
			}
		}
	case h2FrameRSTStream:
		g.reset()
	default:
		if h[3] > h2FrameContinuation {
			if g.unknown++; g.unknown > h2MaxUnknownFrames {
				g.tripOn(floodUnknownFrames)
			}
		}
	}
}

// dataPad takes the Pad Length of a padded DATA frame without END_STREAM
// whose header the scanner holds: a frame of padding only is empty (a
// Pad Length past the payload is x/net's PROTOCOL_ERROR anyway).
func (g *resetGuard) dataPad(pad int) {
	h := &g.in.hdr
	if h[4]&h2FlagEndStream != 0 {
		return
	}
	if n := int(h[0])<<16 | int(h[1])<<8 | int(h[2]); n-1-pad > 0 {
		g.dataOctets()
	} else {
		g.emptyDataFrame()
	}
}

// dataOctets notes a DATA frame that carries data: progress.
func (g *resetGuard) dataOctets() {
	g.emptyData = 0
	g.unknown = 0
}

// emptyDataFrame notes a DATA frame without data octets or END_STREAM.
func (g *resetGuard) emptyDataFrame() {
	if g.emptyData++; g.emptyData > h2MaxEmptyData {
		g.tripOn(floodEmptyData)
	}
}

// tripOn notes a flood of the client's frames of kind k; the reader
// ends the connection.
func (g *resetGuard) tripOn(k floodKind) {
	g.kind = k
	g.flood.Store(true)
}

func (g *resetGuard) Read(p []byte) (int, error) {
	if g.flood.Load() { // tripped before, or by the server's resets
		return 0, g.trip()
	}
	if len(g.inject) > 0 {
		n := copy(p, g.inject)
		g.inject = g.inject[n:]
		return n, nil
	}
	n, err := g.Conn.Read(p)
	g.in.scan(p[:n])
	if g.flood.Load() {
		return 0, g.trip()
	}
	if end := g.in.bigEnd; end >= 0 && !g.injected && err == nil {
		// The client's GOAWAY goes between two of its frames, right
		// after the block: the server takes the block's stream, then
		// shuts down gracefully.
		g.injected = true
		var f [h2FrameHeaderLen + 8]byte
		f[2] = 8 // length; last-stream-id 0: the client accepts no pushed stream
		f[3] = h2FrameGoAway
		binary.BigEndian.PutUint32(f[13:], h2NoError)
		g.inject = append(f[:], p[end:n]...)
		n = end
	}
	if g.hdrTimeout > 0 && g.in.inHeaders() != g.hdrArmed {
		g.armHeaders()
	}
	return n, err
}

// armHeaders sets the read deadline when a header block begins and
// clears it when the block is complete. read_header_timeout bounds an
// HTTP/1.1 head; x/net/http2 bounds no header block, and a client that
// began one (HEADERS without END_HEADERS, or a HEADERS frame short of its
// payload) and sent no more held the connection until its idle timeout,
// or for as long as another of its streams was open. The read that
// passes the deadline fails, which ends the connection. x/net/http2
// reads a frame's header, then its payload, and a header block's
// CONTINUATION frames right after its HEADERS, so the time counted is
// the client's; an ordinary request (one HEADERS frame) arms and clears
// the deadline once, a runtime timer change each.
func (g *resetGuard) armHeaders() {
	if g.hdrArmed = !g.hdrArmed; g.hdrArmed {
		g.Conn.SetReadDeadline(time.Now().Add(g.hdrTimeout))
	} else {
		g.Conn.SetReadDeadline(time.Time{})
	}
}

// trip ends a flooding client's connection: nothing more of it reaches
// the server; GOAWAY (once), and the read error ends the connection. Only
// the reader calls it.
func (g *resetGuard) trip() error {
	if !g.pending.Load() {
		g.goAway()
		if g.onTrip != nil {
			g.onTrip()
		}
	}
	switch g.kind {
	case floodContinuations:
		return errContinuationFlood
	case floodEmptyData:
		return errEmptyDataFlood
	case floodUnknownFrames:
		return errUnknownFrameFlood
	}
	return errResetFlood
}

// goAway writes GOAWAY(ENHANCE_YOUR_CALM) now if the server is not
// writing, else the server's writer does as soon as its current write is
// out (the reader never waits for the writer: a client that does not read
// could hold it).
func (g *resetGuard) goAway() {
	g.pending.Store(true)
	if !g.wmu.TryLock() {
		return
	}
	defer g.wmu.Unlock()
	if !g.sent {
		g.writeGoAwayLocked()
	}
}

func (g *resetGuard) writeGoAwayLocked() {
	var f [h2FrameHeaderLen + 8]byte
	f[2] = 8 // length
	f[3] = h2FrameGoAway
	binary.BigEndian.PutUint32(f[9:], g.lastStream)
	binary.BigEndian.PutUint32(f[13:], h2EnhanceYourCalm)
	g.sent = true
	g.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := g.Conn.Write(f[:]); err == nil {
		g.wentOut.Store(true)
	}
}

// Linger bounds for Close after a GOAWAY.
const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 256 << 10
)

// Close closes the connection; after a GOAWAY for a reset flood it first
// lingers. The client is still flooding then, and closing a socket with
// unread input makes the kernel answer with a reset, which can reach the
// client before it read the GOAWAY (and the client then sees only a reset
// connection). So the input is read and dropped, for at most lingerTime
// or lingerBytes, before the close, as net/http's closeWriteAndWait and
// nginx's lingering close do.
//
// A GOAWAY still pending when Close is called waits for the server's
// writer: the server closes as soon as its reader fails, often while
// another of its goroutines is still writing a frame, after which the
// GOAWAY is due. Close bounds that wait with the write deadline (a writer
// blocked on a client that does not read returns within a second), then
// writes the GOAWAY itself if the writer did not.
func (g *resetGuard) Close() error {
	if g.pending.Load() && !g.wentOut.Load() {
		g.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		g.wmu.Lock()
		if !g.sent {
			g.writeGoAwayLocked()
		}
		g.wmu.Unlock()
	}
	if g.wentOut.Load() {
		g.Conn.SetReadDeadline(time.Now().Add(lingerTime))
		io.CopyN(io.Discard, g.Conn, lingerBytes)
	}
	return g.Conn.Close()
}

func (g *resetGuard) Write(p []byte) (int, error) {
	n, err := g.write(p)
	// A reader that tripped while this write held the lock left its
	// GOAWAY pending (goAway does not wait): send it now, as the server
	// may write nothing more and close without it.
	if g.pending.Load() {
		g.goAway()
	}
	return n, err
}

// write passes on the frames p completes and holds the start of a frame
// it ends in until a later Write completes it, so that the connection is
// always between two frames and a GOAWAY can go out at once. The server
// fills a 4 KiB buffer and writes it out when full, often in the middle
// of a frame, and ends a connection without writing the rest when its
// reader fails: the GOAWAY for a flood would then have no place to go.
func (g *resetGuard) write(p []byte) (int, error) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	end := g.out.scan(p)
	if end < 0 {
		g.held = append(g.held, p...)
		return len(p), nil
	}
	out := p[:end]
	if len(g.held) > 0 {
		g.held = append(g.held, out...)
		out = g.held
	}
	_, err := g.Conn.Write(out)
	if cap(g.held) > heldKeep {
		g.held = nil // a large frame's start: do not keep its buffer
	}
	g.held = append(g.held[:0], p[end:]...)
	if err != nil {
		// 0, not the octets of p that went out: the scanner took all
		// of p, so a caller that wrote the rest again (x/net/http2's
		// WriteByteTimeout loop does after a partial write that timed
		// out) would have it scanned twice, out of step with the
		// frames. A write error ends the connection anyway: every
		// front door is a TLS-like connection whose failed write is
		// permanent, and the octets counted (frontdoor.Conn) are those
		// below the guard.
		return 0, err
	}
	return len(p), nil
}

// heldKeep is the largest buffer for held frame starts that a connection
// keeps between writes.
const heldKeep = 4 << 10

// resetBurst is the bucket size for a rate: twice the rate or twice the
// stream limit (a browser may cancel every open stream at once).
func resetBurst(rate int, maxStreams uint32) int {
	return max(2*rate, 2*int(maxStreams))
}
