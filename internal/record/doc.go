// Package record is the record and connection core shared by the tlcp
// (GB/T 38636) and tls13sm (RFC 8446 + RFC 8998) stacks: the alert
// descriptions and the one error type for alerts, the application-data
// counters, the kinds of session-ticket events, the listener and dialing
// plumbing around a handshake and the interruption of a handshake by its
// context. Each stack keeps its own handshake state machines, key
// schedules and record protection.
package record
