//go:build race

package session

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
