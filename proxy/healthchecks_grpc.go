package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// The gRPC health check: the standard health service's unary call
// (grpc.health.v1.Health/Check, grpc/grpc doc/health-checking.md), spoken
// over the upstream's own HTTP/2 transport as gRPC over HTTP/2 frames it
// (PROTOCOL-HTTP2.md): a POST of one length-prefixed message, answered by
// one message and a grpc-status in the trailers, or by a Trailers-Only
// answer (grpc-status in the only field section) when the call failed.
// The two messages have a field each, encoded here without generated
// code:
//
//	message HealthCheckRequest  { string service = 1; }
//	message HealthCheckResponse { ServingStatus status = 1; }
//	enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }

// grpcHealthPath is the call's :path.
const grpcHealthPath = "/grpc.health.v1.Health/Check"

// maxGRPCHealthAnswer bounds the answer read: a HealthCheckResponse is
// two bytes, and the HTTP check reads 64 KiB.
const maxGRPCHealthAnswer = 64 << 10

// grpcServing is ServingStatus SERVING.
const grpcServing = 1

var grpcServingStatus = []string{"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"}

// grpcHealthRequest is the Check call for service on the target at
// origin (scheme://host:port).
func grpcHealthRequest(ctx context.Context, origin, service string) (*http.Request, error) {
	var msg []byte
	if service != "" { // proto3 leaves an empty string out
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, service)
	}
	body := make([]byte, 5, 5+len(msg)) // not compressed, then the length
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	body = append(body, msg...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, origin+grpcHealthPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	// Required of a gRPC request: it tells a proxy between that the
	// client takes trailers, where the status comes.
	req.Header.Set("Te", "trailers")
	return req, nil
}

// grpcHealthAnswer judges res, the answer to a Check call, and closes
// its body: nil only for a gRPC answer over HTTP/2 (200,
// application/grpc) whose call ended with grpc-status 0 and whose one
// message says SERVING.
func grpcHealthAnswer(res *http.Response) error {
	defer res.Body.Close()
	if res.ProtoMajor != 2 {
		// An "h2" upstream whose target picked HTTP/1.1 in ALPN: no gRPC
		// server answers there.
		return fmt.Errorf("answered over HTTP/%d.%d, not HTTP/2", res.ProtoMajor, res.ProtoMinor)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d, not a gRPC answer", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); !isGRPCType(ct) {
		return fmt.Errorf("content-type %q, not a gRPC answer", ct)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxGRPCHealthAnswer+1))
	if err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if len(body) > maxGRPCHealthAnswer {
		return fmt.Errorf("answer longer than %d bytes", maxGRPCHealthAnswer)
	}
	// The call's status is the trailers' once there was a message; the
	// only field section's in a Trailers-Only answer.
	st, where := res.Trailer, "trailers"
	if st.Get("Grpc-Status") == "" {
		st, where = res.Header, "header"
	}
	if code := st.Get("Grpc-Status"); code != "0" {
		if code == "" {
			return errors.New("no grpc-status")
		}
		msg := st.Get("Grpc-Message")
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return fmt.Errorf("grpc-status %s in the %s: %q", code, where, msg)
	}
	status, err := grpcHealthStatus(body)
	if err != nil {
		return err
	}
	if status != grpcServing {
		name := fmt.Sprint(status)
		if status < uint64(len(grpcServingStatus)) {
			name = grpcServingStatus[status]
		}
		return fmt.Errorf("health status %s, not SERVING", name)
	}
	return nil
}

// isGRPCType reports whether the Content-Type ct is gRPC's:
// application/grpc, with a +format or parameters.
func isGRPCType(ct string) bool {
	ct = strings.ToLower(ct)
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// grpcHealthStatus is the ServingStatus of body, the answer's one
// length-prefixed HealthCheckResponse.
func grpcHealthStatus(body []byte) (uint64, error) {
	if len(body) < 5 {
		return 0, fmt.Errorf("answer of %d bytes, not one gRPC message", len(body))
	}
	if body[0] != 0 {
		// Compressed (flag 1): no grpc-accept-encoding was sent, so the
		// target may not compress.
		return 0, fmt.Errorf("message flags %#x, want an uncompressed message", body[0])
	}
	if n := binary.BigEndian.Uint32(body[1:5]); uint64(n) != uint64(len(body)-5) {
		return 0, fmt.Errorf("message of %d bytes in an answer of %d, want one message", n, len(body)-5)
	}
	var status uint64 // absent: UNKNOWN
	for b := body[5:]; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, fmt.Errorf("malformed HealthCheckResponse: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, fmt.Errorf("malformed HealthCheckResponse: %v", protowire.ParseError(n))
			}
			status, b = v, b[n:] // the last one counts, as in protobuf
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b) // a field of a newer version
		if n < 0 {
			return 0, fmt.Errorf("malformed HealthCheckResponse: %v", protowire.ParseError(n))
		}
		b = b[n:]
	}
	return status, nil
}
