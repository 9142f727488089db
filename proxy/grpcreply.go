package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// gRPC status codes (grpc/grpc doc/statuscodes.md) of the proxy's own
// replies to gRPC calls.
const (
	grpcUnknown          = 2
	grpcDeadlineExceeded = 4
	grpcPermissionDenied = 7
	grpcUnimplemented    = 12
	grpcInternal         = 13
	grpcUnavailable      = 14
	grpcUnauthenticated  = 16
)

// grpcReplyType returns the Content-Type of the proxy's own error reply
// to r when r is a gRPC call that takes it as a gRPC status ("" when r
// gets an HTTP error page): gRPC over HTTP/2 (application/grpc, with a
// +format or parameters) or gRPC-Web over any version
// (application/grpc-web, application/grpc-web-text). A gRPC client given
// an HTTP status and a page reports a transport error ("unexpected HTTP
// status code", "malformed header: missing HTTP content-type"), not why
// the call failed. gRPC over HTTP/1.1 is no gRPC client's (PROTOCOL-HTTP2.md
// needs HTTP/2's trailers): it gets the page.
func grpcReplyType(r *http.Request) string {
	ct := r.Header["Content-Type"]
	if len(ct) != 1 {
		return ""
	}
	base := ct[0]
	if i := strings.IndexAny(base, "+;"); i >= 0 {
		base = base[:i]
	}
	switch base = strings.ToLower(strings.TrimSpace(base)); base {
	case "application/grpc":
		if r.ProtoMajor != 2 {
			return ""
		}
		return base
	case "application/grpc-web", "application/grpc-web-text":
		return base
	}
	return ""
}

// grpcCodeOf is the gRPC status of the proxy's HTTP status code for a
// call (grpc/grpc doc/http-grpc-status-mapping.md, as Envoy's local
// replies map it): 400 INTERNAL, 401 UNAUTHENTICATED, 403
// PERMISSION_DENIED, 404 UNIMPLEMENTED, 429, 502, 503 and 504
// UNAVAILABLE, any other UNKNOWN; but DEADLINE_EXCEEDED for a 504 once
// the call's own deadline (its grpc-timeout, counted from start) has
// passed: UNAVAILABLE would have its client try again a call it has
// given up on (Envoy answers so since envoyproxy/envoy#44479).
func grpcCodeOf(code int, r *http.Request, start time.Time) int {
	switch code {
	case http.StatusBadRequest:
		return grpcInternal
	case http.StatusUnauthorized:
		return grpcUnauthenticated
	case http.StatusForbidden:
		return grpcPermissionDenied
	case http.StatusNotFound:
		return grpcUnimplemented
	case http.StatusGatewayTimeout:
		if t, ok := grpcTimeout(r.Header); ok && t > 0 && time.Since(start) >= t {
			return grpcDeadlineExceeded
		}
		return grpcUnavailable
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return grpcUnavailable
	}
	return grpcUnknown
}

// grpcMessage percent-encodes msg as a grpc-message value
// (PROTOCOL-HTTP2.md, Responses: Percent-Byte-Encoded, every byte but
// the printable ASCII ones other than '%').
func grpcMessage(msg string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// grpcReply answers a gRPC call (grpcReplyType gave ctype) the proxy
// fails itself with status code as gRPC does, and as Envoy's local
// replies: HTTP 200 and a Trailers-Only response (one field section that
// ends the stream; PROTOCOL-WEB.md takes it so for gRPC-Web too, with an
// empty body) whose grpc-status is code's (grpcCodeOf) and grpc-message
// msg. The fields already in the header (a request ID, Retry-After,
// WWW-Authenticate) go with it. The access log and the metrics keep
// code: the log's grpc_status gives what the client got, and a
// dashboard's 5xx rate still counts the calls no target answered.
func (rs *reqState) grpcReply(r *http.Request, code int, ctype, msg string) {
	h := rs.w.Header()
	h["Content-Type"] = []string{ctype}
	h["Grpc-Status"] = []string{strconv.Itoa(grpcCodeOf(code, r, rs.start))}
	h["Grpc-Message"] = []string{grpcMessage(msg)}
	rs.w.WriteHeader(http.StatusOK)
	rs.w.status = code
}

// maxGRPCMessage is the longest respond body a gRPC call gets as its
// grpc-message; a longer one (a page) gives the status's text.
const maxGRPCMessage = 256
