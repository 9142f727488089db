package main

import (
	"os"
	"syscall"
)

// The supervisor's orders to its workers go by real-time signals, which
// no operator, terminal or service manager sends: a signal sent to every
// process of the service (systemd's KillMode=control-group, kill -- -PGID)
// reaches the workers beside the supervisor, which passes on what it
// takes; an order by a signal such a sender uses too was acted on twice
// (SIGUSR1: every worker reopened its access log twice) or taken for an
// order the supervisor never gave (SIGUSR2: every worker closed all its
// connections and exited, then was restarted as after a crash, where the
// supervisor ignores SIGUSR2). A worker ignores those senders' SIGUSR1 and
// SIGUSR2, as it ignores SIGHUP (workerSignals).
const sigRTMin = 34 // the first real-time signal a program may use: glibc keeps 32 and 33 (signal(7))

// forceSignal is a supervisor's order to its workers to close every
// connection now: a second stop request during the graceful shutdown.
var forceSignal os.Signal = syscall.Signal(sigRTMin + 1)

// workerReopenSignal is a supervisor's order to its workers to reopen
// their access logs (it took reopenSignal).
var workerReopenSignal os.Signal = syscall.Signal(sigRTMin + 2)

// workerIgnored are the signals a worker takes from no one but its
// supervisor, which gives them as the orders above: logged and dropped.
// (SIGUSR1 and SIGHUP come on run's signals.)
var workerIgnored = []os.Signal{syscall.SIGUSR2}
