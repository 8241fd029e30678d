//go:build race

package rowcontainer

// raceEnabled: built with -race, whose instrumented allocations make the
// heap grow by more than the values themselves, so a comparison of the
// heap's growth with what was reserved measures the detector, not the
// container.
const raceEnabled = true
