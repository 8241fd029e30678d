package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// cpuUse is what the process got from the machine: CPU time used, and
// (Linux) time its threads spent runnable but waiting for a CPU. On a
// shared machine the second says how much of the latency is other
// people's work.
type cpuUse struct {
	cpu, waited time.Duration
	ok          bool
}

func readCPUUse() cpuUse {
	var u cpuUse
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// /proc/self/task/*/schedstat: "cpu-ns runqueue-wait-ns timeslices".
	// Threads that exited are not counted; the Go runtime rarely ends one.
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var run, wait, slices int64
		if _, err := fmt.Sscan(string(b), &run, &wait, &slices); err == nil {
			u.waited += time.Duration(wait)
			u.ok = true
		}
	}
	return u
}

// since describes the use between start and u over wall.
func (u cpuUse) since(start cpuUse, wall time.Duration) string {
	s := fmt.Sprintf("cpu %.1fs of %.1fs wall (%.0f%% of one core)", (u.cpu - start.cpu).Seconds(), wall.Seconds(), 100*(u.cpu-start.cpu).Seconds()/wall.Seconds())
	if u.ok {
		s += fmt.Sprintf(", threads waited %.1fs for a CPU", (u.waited - start.waited).Seconds())
	}
	return s
}
