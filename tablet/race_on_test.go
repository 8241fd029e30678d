//go:build race

package tablet

// raceEnabled: built with -race, which changes allocation counts (and
// makes sync.Pool drop what it is given at random).
const raceEnabled = true
