//go:build !race

package rowcontainer

const raceEnabled = false
