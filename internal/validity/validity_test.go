package validity

import (
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// TestNarrow: the window is the latest NotBefore to the earliest
// NotAfter, whichever certificate of the chain (leaf or CA) they are
// from; an empty chain leaves it as it was.
func TestNarrow(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC) }
	leaf := &smx509.Certificate{NotBefore: day(5), NotAfter: day(20)}
	ca := &smx509.Certificate{NotBefore: day(1), NotAfter: day(10)}
	root := &smx509.Certificate{NotBefore: day(7), NotAfter: day(28)}
	if from, until := Of([]*smx509.Certificate{leaf, ca, root}); !from.Equal(day(7)) || !until.Equal(day(10)) {
		t.Errorf("window %v – %v; want %v – %v", from, until, day(7), day(10))
	}
	if from, until := Narrow(nil, day(2), day(3)); !from.Equal(day(2)) || !until.Equal(day(3)) {
		t.Errorf("empty chain: %v – %v; want the window given", from, until)
	}
	if from, until := Narrow([]*smx509.Certificate{leaf}, day(6), day(30)); !from.Equal(day(6)) || !until.Equal(day(20)) {
		t.Errorf("narrowed: %v – %v; want %v – %v", from, until, day(6), day(20))
	}
}
