//go:build race

package testpeer

// RaceEnabled reports a build with the race detector, which makes
// sync.Pool drop items at random: allocation counts that rely on pooled
// state are not meaningful then.
const RaceEnabled = true
