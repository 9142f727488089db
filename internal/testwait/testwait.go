// Package testwait bounds tests' waits for what should happen soon (a
// worker restarted, an alert received, a connection closed). The bounds
// are written for a loaded machine (go test ./... on two cores); the
// GMPROXY_TEST_WAIT environment variable scales them down, as
// bench/mutants does: there a test runs alone, and a mutant that stops
// the awaited event makes it wait its whole bound, which the mutation
// check then spends hundreds of times.
package testwait

import (
	"os"
	"strconv"
	"time"
)

// Floor is the shortest bound a scale gives (a bound below it is kept).
const Floor = 3 * time.Second

// scale is GMPROXY_TEST_WAIT: a factor in (0, 1]; 1 when unset or invalid.
var scale = parseScale(os.Getenv("GMPROXY_TEST_WAIT"))

func parseScale(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1) {
		return 1
	}
	return f
}

// Bound returns the wait to allow where a test would wait up to d: d
// scaled by GMPROXY_TEST_WAIT, never below Floor (nor above d).
func Bound(d time.Duration) time.Duration {
	return min(d, max(time.Duration(float64(d)*scale), Floor))
}
