package clientshare

import "testing"

// TestSizeSealed: the table's file cannot be shrunk or grown by a worker
// (a bug, or one taken over): shrunk, every other process's next access
// past the new end, the supervisor's ClearWorker of the dead worker
// included, would be a SIGBUS, not a wrong count.
func TestSizeSealed(t *testing.T) {
	f, err := Create(2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(headerSize); err == nil {
		t.Error("the table's file was shrunk")
	}
	if err := f.Truncate(int64(2 * Size(2))); err == nil {
		t.Error("the table's file was grown")
	}
	tb, err := Map(f)
	if err != nil {
		t.Fatal(err)
	}
	tb.ClearWorker(1)
}
