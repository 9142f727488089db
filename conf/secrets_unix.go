//go:build unix

package conf

import (
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// ownGroup reports whether fi's group is one of this process's groups:
// a group-readable secret is then how gmproxy itself reads it (a key owned
// by root, mode 0640, group gmproxy; a Kubernetes Secret mounted 0440 with
// the pod's fsGroup), not a leak to other users.
func ownGroup(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	gid := int(st.Gid)
	if gid == os.Getgid() || gid == os.Getegid() {
		return true
	}
	groups, err := os.Getgroups()
	return err == nil && slices.Contains(groups, gid)
}
