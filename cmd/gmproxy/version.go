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

// revision is the commit the binary was built from when the build had no
// git checkout to stamp (a container build's context leaves .git out), set
// with -ldflags "-X main.revision=..."; the toolchain's own VCS stamp wins
// when there is one.
var revision = ""

func init() {
	register("version", "print the version and build information", func(args []string, stdout, stderr io.Writer) int {
		fs := newFlags("version", stderr, "usage: gmproxy version")
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		if fs.NArg() > 0 {
			fs.Usage()
			return 2
		}
		gmsm, rev := "unknown", "unknown (no VCS stamp: built outside a git checkout or with -buildvcs=false)"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == "github.com/emmansun/gmsm" {
					gmsm = d.Version
				}
			}
			rev = vcsRevision(bi.Settings, revision)
		} else if revision != "" {
			rev = revision + " (from -ldflags)"
		}
		fmt.Fprintf(stdout, "gmproxy %s (%s, gmsm %s)\n", version, runtime.Version(), gmsm)
		fmt.Fprintf(stdout, "revision: %s\n", rev)
		fmt.Fprintf(stdout, "single-block SM4: %s\n", speed.DetectImpl().SM4Single)
		return 0
	})
}

// vcsRevision describes the commit the binary was built from, as the Go
// toolchain records it (vcs.revision, vcs.time, vcs.modified), or else as
// the build passed it in stamped (main.revision).
func vcsRevision(settings []debug.BuildSetting, stamped string) string {
	kv := map[string]string{}
	for _, s := range settings {
		kv[s.Key] = s.Value
	}
	rev := kv["vcs.revision"]
	if rev == "" && stamped != "" {
		return stamped + " (from -ldflags)"
	}
	if rev == "" {
		return "unknown (no VCS stamp: built outside a git checkout or with -buildvcs=false)"
	}
	if t := kv["vcs.time"]; t != "" {
		rev += " " + t
	}
	if kv["vcs.modified"] == "true" {
		rev += " (modified)"
	}
	return rev
}
