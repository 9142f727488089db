//go:build !unix

package proxy

import (
	"net"
	"testing"
)

// deadAddr returns a loopback address nobody listens on (the port is free
// again once returned, so a later bind may take it; the unix version holds it).
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}
