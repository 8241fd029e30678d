// Package procstat reads what the bench/ programs report about a node
// process from Linux's /proc: its CPU seconds and its resident memory.
//
// It owns parsing /proc/PID/stat and /proc/PID/status. It does not time,
// sample or start anything: the programs decide when to read.
//
// Invariants:
//  1. CPU time is utime + stime of every thread of the process, in
//     seconds (/proc counts in USER_HZ ticks, which Linux fixes at 100).
//  2. The command name in /proc/PID/stat may hold spaces and ")": fields
//     are counted after the last ")".
//  3. Memory is in KiB, as /proc/PID/status gives it.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the tick of /proc's CPU times: fixed at 100 by Linux,
// whatever the kernel's HZ.
const userHZ = 100

// CPUSeconds is process pid's user and system CPU time so far.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// After the command's ")": state is field 3, utime 14 and stime 15.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return float64(ut+st) / userHZ, nil
}

// RSSKiB is process pid's resident set now (VmRSS).
func RSSKiB(pid int) (int64, error) { return statusKiB(pid, "VmRSS:") }

// PeakRSSKiB is process pid's peak resident set (VmHWM) since it started
// or since ResetPeakRSS.
func PeakRSSKiB(pid int) (int64, error) { return statusKiB(pid, "VmHWM:") }

// ResetPeakRSS sets process pid's VmHWM back to its current RSS (Linux
// 4.0 and later), so a later PeakRSSKiB covers only what came after.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// statusKiB is the value of /proc/PID/status's line field ("VmRSS:"),
// which the kernel writes in kB.
func statusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s line", pid, field)
}
