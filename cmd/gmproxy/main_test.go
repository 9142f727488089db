package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestMain keeps the test PKI's keys and password files readable by their
// owner only, as `gmproxy check` expects of a deployment (it warns otherwise).
func TestMain(m *testing.M) {
	if os.Getenv(envTestMain) == "1" {
		if m := os.Getenv(envTestKillMargin); m != "" {
			d, err := time.ParseDuration(m)
			if err != nil {
				fmt.Fprintln(os.Stderr, envTestKillMargin+":", err)
				os.Exit(2)
			}
			workerKillMargin = d
		}
		code := dispatch(os.Args[1:], os.Stdout, os.Stderr)
		if d, err := time.ParseDuration(os.Getenv(envTestExitPause)); err == nil && os.Getenv(envWorker) != "" {
			// The moment between run's end and the exit, made long
			// enough for a test to send a signal into it.
			fmt.Fprintf(os.Stderr, "%s: worker %s done, status %d\n", envTestExitPause, os.Getenv(envWorker), code)
			time.Sleep(d)
		}
		os.Exit(code)
	}
	// The tests run gmproxy run in this process (runMain); a supervisor
	// would start this test binary as its workers, which it is not unless
	// envTestMain is set, as TestWorkers does with an explicit workers.
	unsetWorkersIsOne = true
	for _, dir := range []string{"../../conf/testdata", "../../testdata/pki-tongsuo"} {
		if err := testpeer.SecretModes(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}
