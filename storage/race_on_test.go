//go:build race

package storage

// raceEnabled: built with -race, which also builds Pebble with its
// invariants checks, and those sometimes skip the optimisations the
// read counts of TestReusingReader rest on.
const raceEnabled = true
