package tablet

import "time"

// waitABit pauses briefly so a goroutine the test waits on can make
// progress. Tests loop on a condition with it; they never assert on elapsed
// time.
func waitABit() { time.Sleep(time.Millisecond) }
