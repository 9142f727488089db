package daemon

import (
	"testing"

	"github.com/gmproxy/gmproxy/proxy"
)

// TestGRPCHealthCheckConfig: an upstream's health_checks.active of type
// grpc reaches the proxy as a gRPC check of its service (not as a GET of
// the default path "/", which a gRPC target refuses).
func TestGRPCHealthCheckConfig(t *testing.T) {
	cfg := tlcpSiteConfig(t, "grpc.yaml", `      - {upstream: app}
upstreams:
  - name: app
    protocol: h2c
    targets: [127.0.0.1:50051]
    health_checks: {active: {type: grpc, service: helloworld.Greeter, host: grpc.internal}}
`)
	a := proxyConfig(cfg).Upstreams[0].HealthCheck.Active
	if a.Type != proxy.ActiveGRPC || a.Service != "helloworld.Greeter" || a.Host != "grpc.internal" {
		t.Fatalf("active check %+v, want a grpc check of helloworld.Greeter at grpc.internal", a)
	}
}
