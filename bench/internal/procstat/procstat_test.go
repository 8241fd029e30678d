package procstat

import (
	"os"
	"testing"
)

// TestSelf reads this test process, which has run and holds memory, so
// every figure must be positive and the peak at least the current RSS.
func TestSelf(t *testing.T) {
	pid := os.Getpid()
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	// Work until the kernel has counted a tick (10 ms) of it.
	var cpu float64
	var err error
	for x := 0; cpu == 0; x++ {
		for i := range buf {
			buf[i] += byte(x)
		}
		if cpu, err = CPUSeconds(pid); err != nil {
			t.Fatal(err)
		}
	}
	rss, err := RSSKiB(pid)
	if err != nil || rss < 8<<10 {
		t.Fatalf("RSSKiB = %d, %v; want at least the 8 MiB just touched", rss, err)
	}
	peak, err := PeakRSSKiB(pid)
	if err != nil || peak < rss {
		t.Fatalf("PeakRSSKiB = %d, %v; want at least RSS %d", peak, err, rss)
	}
	if _, err := CPUSeconds(-1); err == nil {
		t.Fatalf("CPUSeconds of no process: no error")
	}
	_ = buf[len(buf)-1]
}
