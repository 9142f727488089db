package conf

import (
	"net"
	"runtime"
	"strconv"
)

// WorkersAuto is the workers value that starts one worker per CPU; it is
// also what an unset workers means where the worker mode runs (see
// Config.Workers).
const WorkersAuto = "auto"

// MaxWorkers bounds the workers setting.
const MaxWorkers = 256

// WorkerCount is the number of worker processes Workers asks for; unset
// counts as auto, which is the CPUs this process may use as Go counts them
// for GOMAXPROCS (its CPU affinity and its cgroup's CPU limit; read before
// anything changes GOMAXPROCS, which gmproxy run does not). A platform
// without the worker mode treats an unset Workers as 1 (gmproxy run's
// workerCount). Call it on a validated Config.
func (c *Config) WorkerCount() int {
	switch c.Workers {
	case "", WorkersAuto:
		return min(runtime.GOMAXPROCS(0), MaxWorkers)
	}
	n, err := strconv.Atoi(c.Workers)
	if err != nil || n < 1 {
		return 1
	}
	return min(n, MaxWorkers)
}

func (v *validator) validateWorkers() {
	w := v.cfg.Workers
	if w == "" {
		return
	}
	if w != WorkersAuto {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 || n > MaxWorkers {
			v.errf("workers", "write auto (one worker per CPU) or a whole number from 1 to "+strconv.Itoa(MaxWorkers), "invalid workers %q", w)
			return
		}
	}
	if n := v.cfg.WorkerCount(); n > 1 {
		v.workersPortZero(n)
	}
}

// workersPortZero refuses a listener on port 0 (a port the kernel
// chooses) under n workers: each worker binds its own socket, so each gets
// a port of its own, and a client reaches only the one worker on the port
// it was told of, if it can learn any. (An unset workers is left to gmproxy
// run, which knows whether it starts workers.)
func (v *validator) workersPortZero(n int) {
	for i, l := range v.cfg.Listeners {
		if _, port, err := net.SplitHostPort(l.Address); err == nil && port == "0" {
			p := "listeners[" + strconv.Itoa(i) + "].address"
			v.errf(p, "give the port, or set workers: 1", "port 0 under workers %s (%d processes): each worker would listen on a port of its own", v.cfg.Workers, n)
		}
	}
}
