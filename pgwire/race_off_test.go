//go:build !race

package pgwire

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = false
