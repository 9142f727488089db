//go:build unix

package tlcp

import (
	"testing"

	"github.com/gmproxy/gmproxy/internal/namedfile/namedfiletest"
)

// TestLoadX509KeyPairFIFO: LoadX509KeyPair refuses a FIFO in any of its
// files at once, naming it, where os.ReadFile waited in open(2) for a
// writer and never returned, and a file over 64 MiB without reading it
// whole (/dev/zero was read for ever).
func TestLoadX509KeyPairFIFO(t *testing.T) {
	namedfiletest.EachArg(t, 4, func(f []string) error {
		_, err := LoadX509KeyPair(f[0], f[1], f[2], f[3], nil)
		return err
	})
}
