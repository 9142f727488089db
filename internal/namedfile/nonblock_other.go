//go:build !unix

package namedfile

// openNonblock: opening a named pipe does not wait on other systems.
const openNonblock = 0
