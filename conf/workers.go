package conf

import (
	"runtime"
	"strconv"
)

// WorkersAuto is the workers value that starts one worker per CPU.
const WorkersAuto = "auto"

// MaxWorkers bounds the workers setting.
const MaxWorkers = 256

// WorkerCount is the number of worker processes Workers asks for: 1 when
// it is not set, runtime.NumCPU() for auto. Call it on a validated Config.
func (c *Config) WorkerCount() int {
	switch c.Workers {
	case "":
		return 1
	case WorkersAuto:
		return min(runtime.NumCPU(), MaxWorkers)
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
