package kv

// RaceEnabled tells the external tests (package kv_test) whether the race
// detector is on: allocation counts differ under it.
const RaceEnabled = raceEnabled
