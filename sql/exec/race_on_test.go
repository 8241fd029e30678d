//go:build race

package exec

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
