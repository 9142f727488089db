package proxy

import (
	"testing"

	"github.com/gmproxy/gmproxy/internal/namedfile/namedfiletest"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// TestUpstreamCAFileBounded: an upstream's CA file given by path
// (UpstreamTLSConfig.CA, which conf never saw when the proxy is used as a
// library) is read as conf reads it: a FIFO is refused at once, not waited
// on for a writer, and a file over namedfile.Max is refused, not read
// whole, for the tls (crypto/tls) and the TLCP / TLS 1.3-SM dialers alike.
func TestUpstreamCAFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo, big := namedfiletest.FIFO(t, dir), namedfiletest.Oversize(t, dir)
	newWith := func(proto, ca string) error {
		uc := &UpstreamConfig{Name: "u", Protocol: proto, Targets: []TargetConfig{{Address: "127.0.0.1:1"}},
			TLS: &UpstreamTLSConfig{CA: ca, ServerName: "localhost"}}
		_, _, _, err := newTransport(uc, nil)
		return err
	}
	for _, proto := range []string{upstreamproto.TLS, upstreamproto.H2, upstreamproto.TLCP, upstreamproto.TLS13SM} {
		namedfiletest.RefusesFIFO(t, proto+" with its CA file", fifo, func() error { return newWith(proto, fifo) })
	}
	// One protocol of each reader (stdTLSConfig, smDialer): each reads up
	// to 64 MiB of the file before refusing it.
	for _, proto := range []string{upstreamproto.TLS, upstreamproto.TLS13SM} {
		namedfiletest.RefusesOversize(t, proto+" with its CA file", big, newWith(proto, big))
	}
}
