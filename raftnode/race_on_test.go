//go:build race

package raftnode

// raceEnabled: the race detector allocates beside the code, so counts of
// objects are not checked under it.
const raceEnabled = true
