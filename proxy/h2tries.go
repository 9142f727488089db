package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
)

// errTargetRefused ends an attempt whose HTTP/2 target refused the
// request on connection after connection (a GOAWAY below its stream, or
// no concurrent streams).
var errTargetRefused = errors.New("proxy: the target refused the request on every new connection (HTTP/2 GOAWAY before its stream, or no concurrent streams), not processed")

// errStreamRefused ends an attempt whose HTTP/2 target refused the
// request's stream on its connection once more after the
// maxRefusedTries retries there.
var errStreamRefused = errors.New("proxy: the target refused the request's stream again and again (HTTP/2 REFUSED_STREAM), not processed")

// triesWatch bounds the connections net/http's Transport tries on its
// own within one attempt over HTTP/2. For each connection whose GOAWAY
// excludes the request's stream, or that advertised no concurrent streams
// (SETTINGS_MAX_CONCURRENT_STREAMS 0), it dials another at once, without
// end: a target answering every connection so took thousands of
// connections a second from the proxy, for as long as the client waited.
// RFC 9113 §6.8 says such a request was not processed and may be retried:
// the Transport's retries are let be (a target's graceful restart needs
// one, a burst of requests on new connections to a target of few streams
// up to four), up to maxTransportTries; the proxy then retries on another
// target (notProcessed). Its retries of a stream refused on the same
// connection back off and end after seven. HTTP/1.1 connections are not
// counted: the Transport goes through stale pooled ones until one takes
// the request.
//
// A stream the target refused (RST_STREAM REFUSED_STREAM) the Transport
// tries again on the same connection at once, then after 1, 2, 4 … 32 s:
// when the connection it was refused on is given again and another
// target could take the request (the upstream has one not tried, and
// the attempt is not the last), the watch stops the attempt there, so
// the request goes to that target at once (as Envoy's refused-stream
// retry does) rather than back off on this one. A lone target keeps the
// Transport's first retries (at once, after 1 s): they get a burst
// through a target of few streams. Not the later ones: a target that
// refused every stream held each request for the Transport's eight tries
// and its 1 + 2 + 4 … 32 s of backoff (63 s, eight streams) before its
// client got a 502; the watch stops the try after the 2 s wait
// (maxRefusedTries), so the client has its 502 in about 3 s, after three
// streams (RFC 9113 §8.7 lets a refused request be retried, not without
// end).
//
// The watch cancels the attempt's context in the trace hook itself,
// before the request is written on the connection it was given, so the
// try it stops never reaches the target.
type triesWatch struct {
	cancel context.CancelCauseFunc
	h2c    bool // every connection speaks HTTP/2 (h2c)
	// up and tried: another target of up than those tried may take a
	// refused request; up nil: the attempt is the last.
	up    *Upstream
	tried []*Target

	mu      sync.Mutex
	tries   int      // HTTP/2 connections given (GotConn), one a try
	refused int      // tries on the connection of the try before: a refused stream's
	last    net.Conn // the connection of the last try
	cause   error    // why the watch cancelled the attempt; nil: it did not
}

// maxTransportTries bounds the tries of one attempt: above a burst's
// (four) and the Transport's own retries of a refused stream (eight
// tries in all).
const maxTransportTries = 8

// maxRefusedTries bounds the retries of a refused stream on the
// connection that refused it, in one attempt: the Transport's at once
// and after 1 s; the next, after 2 s more, is stopped.
const maxRefusedTries = 2

// watchTries returns req under a context the watch cancels when the
// transport tries the request again past its bound, or on a connection
// that refused it while a target of up not in tried could take it (up
// nil: none may), and the watch; h2c: the upstream speaks HTTP/2 on
// every connection (else those that negotiated h2 by ALPN do).
func watchTries(req *http.Request, h2c bool, up *Upstream, tried []*Target) (*http.Request, *triesWatch) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &triesWatch{cancel: cancel, h2c: h2c, up: up, tried: tried}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { w.gotConn(i.Conn) },
	})
	return req.WithContext(ctx), w
}

// gotConn stops a try on an HTTP/2 connection past the bound.
func (w *triesWatch) gotConn(c net.Conn) {
	if !w.h2c && !negotiatedH2(c) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tries++
	again := c == w.last // the Transport's retry of a refused stream
	w.last = c
	if again {
		w.refused++
	}
	if w.cause != nil {
		return
	}
	switch {
	case w.tries > maxTransportTries || again && w.up != nil && w.up.otherAvailable(w.tried):
		w.cause = errTargetRefused
	case w.refused > maxRefusedTries:
		w.cause = errStreamRefused
	default:
		return
	}
	w.cancel(w.cause)
}

// negotiatedH2 reports whether c is a TLS connection that speaks HTTP/2
// (alpnDialer's and the dial hooks' are *tls.Conn only then).
func negotiatedH2(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	return ok && tc.ConnectionState().NegotiatedProtocol == "h2"
}

// stop reports why the watch cancelled the attempt (nil: it did not).
func (w *triesWatch) stop() (cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cause
}

// notProcessed reports whether err says the HTTP/2 target did not process
// the request (RFC 9113 §8.7): it refused the stream, or its graceful
// GOAWAY excluded it. Such a request may go to another target whatever
// its method. net/http's Transport gives the last two only inside the
// text of its refusal to send a body again ("cannot retry err [...]
// after Request.Body was written"): the text is matched, and
// TestH2TargetRefusesRetriedElsewhere fails when a release changes it.
func notProcessed(err error) bool {
	if errors.Is(err, errTargetRefused) || errors.Is(err, errStreamRefused) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "REFUSED_STREAM; received from peer") ||
		strings.Contains(s, "received Server's graceful shutdown GOAWAY")
}
