//go:build !unix

package conf

import "io/fs"

// ownGroup: file groups are a Unix notion.
func ownGroup(fs.FileInfo) bool { return false }

// openNonblock: opening a named pipe does not wait on other systems.
const openNonblock = 0
