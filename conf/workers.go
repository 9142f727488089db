package conf

import (
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
	if w == "" || w == WorkersAuto {
		return
	}
	n, err := strconv.Atoi(w)
	if err != nil || n < 1 || n > MaxWorkers {
		v.errf("workers", "write auto (one worker per CPU) or a whole number from 1 to "+strconv.Itoa(MaxWorkers), "invalid workers %q", w)
	}
}
