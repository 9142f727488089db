// Package sysmon holds the GODEBUG setting that keeps the Go runtime's
// system monitor thread from being woken by the proxy's system calls, and
// adds it to a process environment.
//
// The runtime's monitor (sysmon, runtime/proc.go) runs on its own thread.
// While every P is idle it sleeps until the next timer; the next system
// call made through the scheduler's system-call state (accept4, close and
// setsockopt go that way; package rawsock keeps reads and writes out of
// it) wakes it and resets its period to 20 µs. An edge proxy serving
// short connections goes idle and makes such a call for every
// connection, so the monitor is woken once or more per connection and
// then polls every 20 µs: measured with the server pinned to one CPU,
// well over half of its context switches were the monitor's, and its
// CPU per resumed TLCP handshake + GET was about 25 % higher than without
// those wake-ups.
//
// The monitor never takes that deep sleep while GODEBUG's schedtrace is
// positive; its period then grows to 10 ms whenever it finds nothing to
// retake, and system calls do not wake it. Setting asks for a scheduler
// trace every 2^31-1 ms (24.8 days), the longest the runtime accepts, so
// the trace itself is all but never printed: the runtime prints one line
// ("SCHED ...") on standard error when the process starts on a host that
// has been up for longer than that, and one every 24.8 days after it.
//
// The setting is read when the runtime starts, so it must be in the
// environment the process starts with: gmproxy's servers (run,
// keyserver) re-execute themselves once with Environ's result when GODEBUG
// has no schedtrace entry, and an
// explicit one (GODEBUG=schedtrace=0 restores the runtime's default) is
// the operator's choice and is kept. The setting is inherited by child
// processes (worker mode).
package sysmon

import "github.com/gmproxy/gmproxy/internal/godebugenv"

// The GODEBUG key and value: a scheduler trace every 2^31-1 ms, the
// largest value the runtime parses (a 32-bit count of milliseconds).
const (
	key   = "schedtrace"
	value = "2147483647"
)

// Setting is the GODEBUG entry that keeps the monitor out of its deep
// sleep.
const Setting = key + "=" + value

// Environ returns env (entries "KEY=value", as os.Environ) with Setting
// added to GODEBUG, and whether it added it. An explicit schedtrace=
// choice already in GODEBUG is kept. env itself is not modified.
func Environ(env []string) ([]string, bool) {
	return godebugenv.Add(env, key, value)
}
