package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultGRPCTimeoutMax is the default of TransportConfig.GRPCTimeoutMax.
const DefaultGRPCTimeoutMax = 10 * time.Minute

// grpcTimeout returns the deadline a gRPC call asks for in its
// grpc-timeout field ("gRPC over HTTP2", Requests: TimeoutValue, one to
// eight ASCII digits, then TimeoutUnit, one of H M S m u n), and false
// for a request that is not a gRPC call (gRPC or gRPC-Web: a Content-Type
// of application/grpc…) or whose field is absent, repeated or malformed.
func grpcTimeout(h http.Header) (time.Duration, bool) {
	v := h["Grpc-Timeout"]
	if len(v) != 1 || !isGRPCCall(h) {
		return 0, false
	}
	s := v[0]
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	var n int64
	for _, c := range []byte(s[:len(s)-1]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	// 99999999 hours overflow a Duration: such a call asks for no end.
	if n > int64(1<<63-1)/int64(unit) {
		return 1<<63 - 1, true
	}
	return time.Duration(n) * unit, true
}

// isGRPCCall reports whether a request's Content-Type is gRPC's or
// gRPC-Web's (application/grpc, application/grpc-web, with a +format or
// parameters).
func isGRPCCall(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) == 1 && len(ct[0]) >= 16 && strings.EqualFold(ct[0][:16], "application/grpc")
}

// grpcDeadline returns how long a gRPC call asks to be given in its
// grpc-timeout field (grpcTimeout), for the proxy to honour when most,
// the upstream's GRPCTimeoutMax, is positive; false for none: not gRPC,
// no valid field, not honoured, a zero (no TimeoutValue is zero; Envoy
// takes it for no deadline) or a deadline past a Duration (no end).
func grpcDeadline(h http.Header, most time.Duration) (time.Duration, bool) {
	if most <= 0 {
		return 0, false
	}
	t, ok := grpcTimeout(h)
	return t, ok && t > 0 && t < 1<<63-1
}

// grpcHeaderWait returns the wait for the response head of an attempt of
// a gRPC call with left of its deadline to go (grpcDeadline), whose wait
// is otherwise d (0: none): a call that has longer gets it, up to most (a
// unary call's answer comes with its head, so a call allowed minutes by
// its client was cut at response_header, 504, which gRPC clients take for
// UNAVAILABLE and retry); a call with less, or waiting on no
// response_header, keeps d: the call's deadline, which ends its whole
// exchange (forward's context), ends the wait, so that the proxy answers
// DEADLINE_EXCEEDED then even to a client that does not cancel the call
// (one whose deadline a hop before the proxy set), and holds no target
// connection past it.
func grpcHeaderWait(d, left, most time.Duration) time.Duration {
	if d > 0 && left > d {
		return min(left, max(most, d))
	}
	return d
}

// encodeGRPCTimeout writes d, positive, as a grpc-timeout value: at most
// eight digits in the finest unit that holds it, rounded down (the
// backend's deadline then falls at or just before the proxy's).
func encodeGRPCTimeout(d time.Duration) string {
	const most = 99999999
	for _, u := range []struct {
		d time.Duration
		c string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}} {
		if d/u.d <= most {
			return strconv.FormatInt(int64(d/u.d), 10) + u.c
		}
	}
	return strconv.FormatInt(int64(min(d/time.Hour, most)), 10) + "H"
}

// errGRPCDeadline is why a gRPC call got no further attempt: its deadline
// (grpc-timeout) passed. A timeout: 504, DEADLINE_EXCEEDED to the client.
var errGRPCDeadline error = grpcDeadlineError{}

type grpcDeadlineError struct{}

func (grpcDeadlineError) Error() string {
	return "proxy: the gRPC call's deadline (grpc-timeout) passed"
}
func (grpcDeadlineError) Timeout() bool   { return true }
func (grpcDeadlineError) Temporary() bool { return false }

// grpcDeadlinePassed ends a gRPC call whose deadline (rs.grpcEnd) ended
// the copy of target t's response (err: how the read ended), the
// target's stream already reset by the exchange's context. A client
// given none of the response gets the Trailers-Only DEADLINE_EXCEEDED
// reply (grpcReply), as at the head's wait. One whose head went out, over
// HTTP/2, gets trailers that end the stream with grpc-status 4 and
// grpc-message "deadline exceeded", which every gRPC client takes as the
// call's status (Envoy resets the stream instead, with NO_ERROR, which
// grpc-go reports as INTERNAL: "stream terminated by RST_STREAM"). A
// gRPC-Web call's trailers are a frame of its body and one over HTTP/1.1
// no client's: their response ends broken (ErrAbortHandler), which the
// client takes as a failed call. The target is not charged: the client
// chose the deadline. The access log keeps the response's status with
// grpc_status 4 (the trailer's).
func (s *site) grpcDeadlinePassed(rs *reqState, r *http.Request, t *Target, err error) {
	up := rs.route.up.name
	if rs.w.discard() {
		s.errorResponse(rs, r, http.StatusGatewayTimeout, "upstream timed out", "the gRPC call's deadline (grpc-timeout) passed during the response from target "+t.Addr+" of upstream "+up+": "+err.Error())
		return
	}
	args := []any{"site", s.name, "upstream", up, "target", t.Addr, "uri", r.RequestURI, "grpc_timeout", r.Header["Grpc-Timeout"][0]}
	if rs.reqID != "" {
		args = append(args, "request_id", rs.reqID)
	}
	s.p.logger.Info("gRPC call ended at its deadline during the response", args...)
	if r.ProtoMajor != 2 || grpcReplyType(r) != "application/grpc" {
		panic(http.ErrAbortHandler)
	}
	rs.w.Flush()
	h := rs.w.Header()
	h[http.TrailerPrefix+"Grpc-Status"] = []string{strconv.Itoa(grpcDeadlineExceeded)}
	h[http.TrailerPrefix+"Grpc-Message"] = []string{"deadline exceeded"}
}
