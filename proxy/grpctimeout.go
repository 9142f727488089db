package proxy

import (
	"net/http"
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

// grpcHeaderWait returns the wait for the response head of a request
// whose wait is otherwise d (0: none): a gRPC call that asks for a longer
// deadline in grpc-timeout gets it, up to most (a unary call's answer
// comes with its head, so a call allowed minutes by its client was cut
// at response_header, 504, which gRPC clients take for UNAVAILABLE and
// retry). A shorter deadline leaves d: the client cancels the call
// itself when its deadline passes, and the proxy then the attempt.
func grpcHeaderWait(h http.Header, d, most time.Duration) time.Duration {
	if d <= 0 || most <= 0 {
		return d
	}
	if t, ok := grpcTimeout(h); ok && t > d {
		return min(t, max(most, d))
	}
	return d
}
