//go:build unix

package tls13sm

import (
	"testing"

	"github.com/gmproxy/gmproxy/internal/namedfile/namedfiletest"
)

// TestLoadX509KeyPairFIFO: LoadX509KeyPair refuses a FIFO in either of its
// files at once, naming it, where os.ReadFile waited in open(2) for a
// writer and never returned, and a file over 64 MiB without reading it
// whole (/dev/zero was read for ever).
func TestLoadX509KeyPairFIFO(t *testing.T) {
	namedfiletest.EachArg(t, 2, func(f []string) error {
		_, err := LoadX509KeyPair(f[0], f[1], nil)
		return err
	})
}
