package conf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxNamedFile bounds a file the configuration names (certificates, keys,
// CRLs, password and ticket key files): well over a large CA's CRL, and
// what a check or reload may hold in memory for one file.
const maxNamedFile = 64 << 20

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

// errNotRegular is the error of a named file that is a FIFO, a device, a
// socket or a folder.
var errNotRegular = errors.New("not a regular file (a FIFO, a device or a folder): name the file itself")

// readNamed reads a file the configuration names, of at most max bytes.
// It opens it without blocking and refuses anything but a regular file:
// a FIFO opened for reading blocks until a writer comes (check and every
// reload with it), and a device such as /dev/zero never ends. Errors are
// *fs.PathError, for errText.
func readNamed(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errNotRegular}
	}
	// Bounded by what is read, not by the size Stat gave: the file may
	// grow while it is read.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		clear(b) // it may be a secret
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("over %s: name the file itself, not an archive or a disk image", ByteSize(max))}
	}
	return b, nil
}
