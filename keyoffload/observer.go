package keyoffload

import "time"

// Observer receives one event per private-key operation run by the
// engine: op is "sign", "decrypt" or "key_agreement"; family is the
// protocol family; queueWait is the time spent waiting for a worker and exec
// the time the operation itself took.
type Observer interface {
	KeyOp(op, family string, queueWait, exec time.Duration, err error)
}

// LocationObserver is optionally implemented by an Observer that also
// wants to know where the key lives (Local or Remote). The engine calls
// KeyOpAt instead of KeyOp when the observer has it.
type LocationObserver interface {
	KeyOpAt(op, family, location string, queueWait, exec time.Duration, err error)
}

// Where a private key lives, the values of the metrics "location" label of
// key operations.
const (
	Local  = "local"  // in gmproxy's memory
	Remote = "remote" // on a key server (keyserver.RemoteKey)
)

// Locator is implemented by keys that say where they live
// (keyserver.RemoteKey returns Remote); keys without it are Local.
type Locator interface {
	KeyLocation() string
}

// Location returns where key lives: its KeyLocation() when it has one,
// else Local.
func Location(key any) string {
	if l, ok := key.(Locator); ok {
		if loc := l.KeyLocation(); loc != "" {
			return loc
		}
	}
	return Local
}
