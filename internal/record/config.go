package record

import (
	"crypto/rand"
	"io"
	"time"
)

// Rand returns r, or crypto/rand.Reader when r is nil (Config.Rand).
func Rand(r io.Reader) io.Reader {
	if r != nil {
		return r
	}
	return rand.Reader
}

// Now returns now(), or time.Now() when now is nil (Config.Time).
func Now(now func() time.Time) time.Time {
	if now != nil {
		return now()
	}
	return time.Now()
}
