package conf

import "github.com/gmproxy/gmproxy/internal/namedfile"

// maxNamedFile bounds a file the configuration names (certificates, keys,
// CRLs, password and ticket key files): well over a large CA's CRL, and
// what a check or reload may hold in memory for one file.
const maxNamedFile = namedfile.Max

// maxConfigFile bounds the configuration file itself: thousands of sites
// take a few MiB.
const maxConfigFile = 16 << 20

// ReadConfigFile reads a configuration file as Load does: a regular file
// of at most 16 MiB (a FIFO or a device named by -c would block or never
// end, at start and at every reload).
func ReadConfigFile(path string) ([]byte, error) { return readNamed(path, maxConfigFile) }

// ReadNamed reads a file the configuration names (a certificate, a key, a
// CA file) as validation read it: a regular file of at most 64 MiB. The
// runtime uses it for a file it reads again after the configuration was
// loaded.
func ReadNamed(path string) ([]byte, error) { return readNamed(path, maxNamedFile) }

// readNamed reads a file the configuration names, of at most max bytes,
// without blocking on a FIFO and refusing anything but a regular file
// (namedfile.Read, which the proxy shares for the files a library caller
// names). Errors are *fs.PathError, for errText.
func readNamed(name string, max int64) ([]byte, error) { return namedfile.Read(name, max) }
