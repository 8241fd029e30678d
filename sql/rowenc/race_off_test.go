//go:build !race

package rowenc_test

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = false
