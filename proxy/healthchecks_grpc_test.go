package proxy

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// grpcHealthHandler is a gRPC health service (grpc.health.v1.Health/Check)
// over HTTP/2, written from the protocol: a request that is not a proper
// Check call (POST, application/grpc, te: trailers, one uncompressed
// HealthCheckRequest) fails with grpc-status 13 and what was wrong. The
// service asked about picks the answer, so that each answer a checker
// must refuse differs from a good one in one respect only:
//
//	"" and "serving"     SERVING, grpc-status 0 in the trailers
//	"not_serving"        NOT_SERVING
//	"no_status"          an empty HealthCheckResponse (status UNKNOWN)
//	"unknown"            Trailers-Only grpc-status 5 (NOT_FOUND), as grpc-go
//	"text"               SERVING and status 0 as text/plain
//	"unavailable"        SERVING and status 0 with HTTP status 503
//	"trailer_fails"      grpc-status 0 in the header, 14 in the trailers
//	"compressed"         SERVING with the compressed flag set
//	"no_grpc_status"     SERVING without any grpc-status
//	"newer"              SERVING after a field the checker does not know
//	"cut"                SERVING in a message whose length says one byte more
func grpcHealthHandler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		service, bad := parseHealthCheckCall(r)
		if bad != "" {
			t.Errorf("health check request: %s", bad)
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "13")
			w.Header().Set("Grpc-Message", bad)
			return
		}
		status := uint64(grpcServing)
		var extra []byte
		ctype, code := "application/grpc", 200
		headerStatus, trailerStatus := "", "0"
		flags, more := byte(0), 0
		switch service {
		case "", "serving":
		case "not_serving":
			status = 2
		case "no_status":
			status = 0
		case "unknown":
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "5")
			w.Header().Set("Grpc-Message", "unknown service")
			return
		case "text":
			ctype = "text/plain"
		case "unavailable":
			code = http.StatusServiceUnavailable
		case "trailer_fails":
			headerStatus, trailerStatus = "0", "14"
		case "compressed":
			flags = 1
		case "no_grpc_status":
			trailerStatus = ""
		case "cut":
			more = 1
		case "newer":
			extra = protowire.AppendTag(extra, 7, protowire.BytesType)
			extra = protowire.AppendString(extra, "later field")
		default:
			t.Errorf("unexpected service %q", service)
		}
		var msg []byte
		msg = append(msg, extra...)
		if status != 0 {
			msg = protowire.AppendTag(msg, 1, protowire.VarintType)
			msg = protowire.AppendVarint(msg, status)
		}
		w.Header().Set("Content-Type", ctype)
		if headerStatus != "" {
			w.Header().Set("Grpc-Status", headerStatus)
		}
		w.WriteHeader(code)
		frame := make([]byte, 5)
		frame[0] = flags
		binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)+more))
		w.Write(append(frame, msg...))
		if trailerStatus != "" {
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", trailerStatus)
		}
	})
}

// parseHealthCheckCall returns the service of r, a Check call, or what
// is wrong with it.
func parseHealthCheckCall(r *http.Request) (service, bad string) {
	switch {
	case r.ProtoMajor != 2:
		return "", "not HTTP/2: " + r.Proto
	case r.Method != http.MethodPost:
		return "", "method " + r.Method
	case r.URL.Path != "/grpc.health.v1.Health/Check":
		return "", "path " + r.URL.Path
	case r.Header.Get("Content-Type") != "application/grpc":
		return "", "content-type " + r.Header.Get("Content-Type")
	case r.Header.Get("Te") != "trailers":
		return "", "te " + r.Header.Get("Te")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return "", err.Error()
	}
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return "", fmt.Sprintf("not one uncompressed message: % x", body)
	}
	for b := body[5:]; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return "", fmt.Sprintf("not a HealthCheckRequest: % x", body[5:])
		}
		v, m := protowire.ConsumeString(b[n:])
		if m < 0 {
			return "", fmt.Sprintf("not a HealthCheckRequest: % x", body[5:])
		}
		service, b = v, b[n+m:]
	}
	return service, ""
}

// grpcCheckUpstream is an upstream of protocol proto at addr with a gRPC
// check of service, and a client for its probes.
func grpcCheckUpstream(t *testing.T, proto, addr, service string, tls *UpstreamTLSConfig) (*Upstream, *http.Client) {
	t.Helper()
	u, err := newUpstream(&UpstreamConfig{Name: "g", Protocol: proto, TLS: tls, Targets: []TargetConfig{{Address: addr}},
		HealthCheck: HealthCheckConfig{Active: ActiveHealthConfig{Type: ActiveGRPC, Service: service, Timeout: 5 * time.Second}}},
		NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.close)
	return u, &http.Client{Transport: u.transport}
}

// TestGRPCHealthCheck calls the standard health service of an h2c and an
// h2 (TLS) target: only a completed call whose answer is SERVING passes;
// a GET of a path, what the HTTP check sends, gets 415 or a reset from
// grpc-go, so its gRPC targets were all marked down.
func TestGRPCHealthCheck(t *testing.T) {
	h2c := h2cBackend(t, grpcHealthHandler(t))
	h2tls := httptest.NewUnstartedServer(grpcHealthHandler(t))
	h2tls.EnableHTTP2 = true
	h2tls.StartTLS()
	t.Cleanup(h2tls.Close)
	cases := []struct {
		service string
		want    string // "" healthy, else a part of the error
	}{
		{"", ""},
		{"serving", ""},
		{"newer", ""},
		{"not_serving", "NOT_SERVING"},
		{"no_status", "UNKNOWN"},
		{"unknown", "grpc-status 5"},
		{"text", "content-type"},
		{"unavailable", "status 503"},
		{"trailer_fails", "grpc-status 14 in the trailers"},
		{"compressed", "uncompressed"},
		{"cut", "want one message"},
		{"no_grpc_status", "no grpc-status"},
	}
	for _, tc := range cases {
		for _, proto := range []string{"h2c", "h2"} {
			t.Run(proto+"/"+tc.service, func(t *testing.T) {
				addr := h2c
				var tls *UpstreamTLSConfig
				if proto == "h2" {
					addr = h2tls.Listener.Addr().String()
					tls = &UpstreamTLSConfig{RootCAs: h2tls.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
				}
				u, c := grpcCheckUpstream(t, proto, addr, tc.service, tls)
				err := u.checkOnce(c, u.Targets()[0])
				switch {
				case tc.want == "" && err != nil:
					t.Fatalf("healthy target failed: %v", err)
				case tc.want != "" && err == nil:
					t.Fatalf("passed, want a failure with %q", tc.want)
				case tc.want != "" && !strings.Contains(err.Error(), tc.want):
					t.Fatalf("error %q, want one with %q", err, tc.want)
				}
			})
		}
	}
}

// TestGRPCHealthCheckNeedsHTTP2: a gRPC check of an upstream that speaks
// HTTP/1.1 to its targets could never pass; it is refused, and an "h2"
// target that picks HTTP/1.1 in ALPN fails the check.
func TestGRPCHealthCheckNeedsHTTP2(t *testing.T) {
	for _, proto := range []string{"http", "tls", "tlcp", "tls13sm"} {
		_, err := newUpstream(&UpstreamConfig{Name: "g", Protocol: proto, TLS: &UpstreamTLSConfig{InsecureSkipVerify: true}, Targets: []TargetConfig{{Address: "127.0.0.1:1"}},
			HealthCheck: HealthCheckConfig{Active: ActiveHealthConfig{Type: ActiveGRPC}}}, NopObserver{}, testLogger(t))
		if err == nil || !strings.Contains(err.Error(), "gRPC health check needs protocol") {
			t.Errorf("protocol %s: error %v, want the gRPC check refused", proto, err)
		}
	}
	// HTTP/1.1 only, with what would be a SERVING answer over HTTP/2.
	h1 := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		w.Write([]byte{0, 0, 0, 0, 2, byte(protowire.EncodeTag(1, protowire.VarintType)), grpcServing})
		w.Header().Set("Grpc-Status", "0")
	}))
	t.Cleanup(h1.Close)
	tls := &UpstreamTLSConfig{RootCAs: h1.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
	u, c := grpcCheckUpstream(t, "h2", h1.Listener.Addr().String(), "serving", tls)
	if err := u.checkOnce(c, u.Targets()[0]); err == nil || !strings.Contains(err.Error(), "not HTTP/2") {
		t.Fatalf("check of an HTTP/1.1 target: %v, want a failure", err)
	}
}

// TestGRPCHealthCheckMarksDown runs the checks of a proxy: the target
// goes down when its service stops serving and up again after.
func TestGRPCHealthCheckMarksDown(t *testing.T) {
	var serving atomic.Value
	serving.Store("serving")
	h := grpcHealthHandler(t)
	addr := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == grpcHealthPath {
			// The checker asks for app.Health; the handler answers as
			// for the service serving holds.
			service, _ := parseHealthCheckCall(r)
			if service != "app.Health" {
				t.Errorf("checked service %q, want app.Health", service)
			}
			r.Body = io.NopCloser(strings.NewReader(string(healthCheckRequestFrame(serving.Load().(string)))))
		}
		h.ServeHTTP(w, r)
	}))
	obs := newEventObserver()
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Protocol: "h2c", Targets: []TargetConfig{{Address: addr}},
			HealthCheck: HealthCheckConfig{
				Passive: PassiveHealthConfig{MaxFails: -1},
				Active:  ActiveHealthConfig{Type: ActiveGRPC, Service: "app.Health", Interval: 10 * time.Millisecond, Timeout: 5 * time.Second, Rise: 1, Fall: 1},
			}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	newFront(t, cfg, frontOpts{obs: obs})
	serving.Store("not_serving")
	obs.waitHealth(t, "app "+addr+" down")
	serving.Store("serving")
	obs.waitHealth(t, "app "+addr+" up")
}

// healthCheckRequestFrame is a framed HealthCheckRequest for service.
func healthCheckRequestFrame(service string) []byte {
	var msg []byte
	if service != "" {
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, service)
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}
