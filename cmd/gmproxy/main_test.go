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
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
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
