//go:build race

package mvcc

// raceEnabled: built with -race, which changes allocation counts.
const raceEnabled = true
