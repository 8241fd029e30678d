//go:build race

package testcluster

// raceEnabled: the race detector slows copying and hashing of large raft
// entries by an order of magnitude; tests that move megabytes scale down.
const raceEnabled = true
