//go:build !race

package testpeer

// RaceEnabled reports a build with the race detector (see race_on.go).
const RaceEnabled = false
