package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/gmproxy/gmproxy/internal/speed"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	register("version", "print the version and build information", func(args []string, stdout, stderr io.Writer) int {
		gmsm := "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == "github.com/emmansun/gmsm" {
					gmsm = d.Version
				}
			}
		}
		fmt.Fprintf(stdout, "gmproxy %s (%s, gmsm %s)\n", version, runtime.Version(), gmsm)
		fmt.Fprintf(stdout, "single-block SM4: %s\n", speed.DetectImpl().SM4Single)
		return 0
	})
}
