// Package record is the record and connection core shared by the tlcp
// (GB/T 38636) and tls13sm (RFC 8446 + RFC 8998) stacks:
//
//   - the connection core each stack's Conn holds (Conn): the underlying
//     connection and its pass-through methods, the input side and the Read
//     loop, alert sending (SendAlert, with what an alert does to a pending
//     flight), the Write/Close interlock, close_notify once, and running the
//     handshake once under one context rule;
//   - framing and reading records from the connection, with pooled input
//     buffers that idle connections give back (Reader);
//   - coalescing a handshake flight into one write (Flight);
//   - the close sequence and the bounded close_notify (Conn.Close,
//     SendCloseNotify);
//   - the alert descriptions, one table of names, and the one error type
//     for alerts sent and received (Alert, AlertError);
//   - the application-data counters (Counters, Stats), the session-ticket
//     events (TicketEvent), the listener and dialing plumbing around a
//     handshake and the interruption of a handshake by its context.
//
// Each stack keeps its own handshake state machines, key schedules and
// record protection (TLS 1.3's inner content type stays in tls13sm), the
// checks of a record header and the alerts it sends for them, when it
// flushes a flight, and its write path (tlcp seals a Write in 64 KiB chunks,
// each sent in one write; tls13sm writes record by record).
package record
