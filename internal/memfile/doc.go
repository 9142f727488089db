// Package memfile makes and maps the anonymous memory files the
// supervisor shares with its worker processes (the session table, the
// per-client counts, the routes' rate_limit counts): each is created at a
// fixed size that is sealed for good, given its header, handed to the
// workers as an inherited file descriptor and mapped shared by each. A
// worker that shrank such a file (a bug, or one taken over) would make
// every other process's next access past the new end a SIGBUS; the seal
// rules that out. Linux only (memfd_create).
package memfile
