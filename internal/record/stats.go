package record

import "sync/atomic"

// Stats counts the application data a connection moved: plaintext bytes and
// application_data records (empty ones included). Handshake, alert and
// ChangeCipherSpec records are not counted, so the figures mean the same for
// TLCP and TLS 1.3-SM (the daemon's per-cipher throughput metrics use them).
type Stats struct {
	BytesIn, BytesOut     uint64
	RecordsIn, RecordsOut uint64
}

// Counters are the atomic counters behind Stats, safe for a reader and a
// writer running concurrently with Stats.
type Counters struct {
	bytesIn, bytesOut, recordsIn, recordsOut atomic.Uint64
}

// RecordIn counts one application_data record read.
func (c *Counters) RecordIn() { c.recordsIn.Add(1) }

// BytesIn counts n plaintext bytes handed to the reader.
func (c *Counters) BytesIn(n int) { c.bytesIn.Add(uint64(n)) }

// Out counts records application_data records carrying n plaintext bytes written.
func (c *Counters) Out(records, n int) {
	c.recordsOut.Add(uint64(records))
	c.bytesOut.Add(uint64(n))
}

// Stats returns a snapshot.
func (c *Counters) Stats() Stats {
	return Stats{BytesIn: c.bytesIn.Load(), BytesOut: c.bytesOut.Load(), RecordsIn: c.recordsIn.Load(), RecordsOut: c.recordsOut.Load()}
}
