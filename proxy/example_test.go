package proxy_test

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/gmproxy/gmproxy/proxy"
)

// The daemon's wiring: one Proxy per configuration generation; every
// handshaken connection (a frontdoor.StateConn) goes to ServeConn, which
// picks TCP stream mode, HTTP/2 (ALPN h2) or HTTP/1.1. On reload the old
// generation is shut down gracefully while new connections go to the new
// one; SIGUSR1 reopens the access log.
func Example() {
	cfg := proxy.Config{
		Upstreams: []proxy.UpstreamConfig{{
			Name:        "app",
			Targets:     []proxy.TargetConfig{{Address: "127.0.0.1:8080", Weight: 2}, {Address: "127.0.0.1:8081"}},
			Balance:     "least_conn",
			HealthCheck: proxy.HealthCheckConfig{Active: proxy.ActiveHealthConfig{Path: "/healthz"}},
		}},
		Sites: []proxy.SiteConfig{{
			ServerNames:       []string{"portal.example.cn"},
			ClientCertHeaders: true,
			Routes: []proxy.RouteConfig{
				{Path: "/healthz", Respond: &proxy.RespondConfig{Body: "ok\n"}},
				{PathPrefix: "/", Upstream: "app"},
			},
		}},
		AccessLog: proxy.AccessLogConfig{Path: "stdout", Format: "combined"},
	}
	p, err := proxy.New(cfg, nil, slog.Default())
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept() // the daemon: handshake first, then a frontdoor.StateConn
			if err != nil {
				return
			}
			go p.ServeConn(c)
		}
	}()
	// On SIGUSR1: p.ReopenLogs(). On reload or SIGTERM:
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		p.Close() // grace period over: cut what is left
	}
}
