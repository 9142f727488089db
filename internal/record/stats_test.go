package record

import "testing"

func TestCounters(t *testing.T) {
	var c Counters
	c.RecordIn()
	c.RecordIn()
	c.BytesIn(10)
	c.Out(3, 40000)
	if got, want := c.Stats(), (Stats{BytesIn: 10, BytesOut: 40000, RecordsIn: 2, RecordsOut: 3}); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}
