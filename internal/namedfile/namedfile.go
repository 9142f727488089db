// Package namedfile reads the files a configuration names (certificates,
// keys, CA and CRL files, the configuration itself) bounded and only when
// they are regular files. conf reads them so when it checks a
// configuration, and the proxy so when a library caller hands it a file
// name (UpstreamTLSConfig.CA) that conf never saw.
package namedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// Max bounds a file a configuration names (certificates, keys, CRLs,
// password and ticket key files): well over a large CA's CRL, and what a
// check or reload may hold in memory for one file.
const Max = 64 << 20

// ErrNotRegular is the error of a named file that is a FIFO, a device, a
// socket or a folder.
var ErrNotRegular = errors.New("not a regular file (a FIFO, a device or a folder): name the file itself")

// Read reads the file name, of at most max bytes. It opens it without
// blocking and refuses anything but a regular file: a FIFO opened for
// reading blocks until a writer comes (a check, a reload or an upstream's
// setup with it), and a device such as /dev/zero never ends. Errors are
// *fs.PathError.
func Read(name string, max int64) ([]byte, error) {
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
		return nil, &fs.PathError{Op: "read", Path: name, Err: ErrNotRegular}
	}
	// Bounded by what is read, not by the size Stat gave: the file may
	// grow while it is read.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		clear(b) // it may be a secret
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("over %s: name the file itself, not an archive or a disk image", sizeText(max))}
	}
	return b, nil
}

// sizeText writes n with the largest exact binary unit, as conf.ByteSize
// does.
func sizeText(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}
