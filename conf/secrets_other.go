//go:build !unix

package conf

import "io/fs"

// ownGroup: file groups are a Unix notion.
func ownGroup(fs.FileInfo) bool { return false }
