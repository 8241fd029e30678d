package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStallJudge: the node fences itself on an operation past the fence
// only once a second tick still finds it in flight; the first report
// after a process pause finds every operation as old as the pause, and is
// not enough.
func TestStallJudge(t *testing.T) {
	type rep struct {
		at   time.Duration // the report's time
		path string
		age  time.Duration // the operation's age it reports
		want bool
	}
	for _, tc := range []struct {
		name string
		reps []rep
	}{
		{"woken from a pause: one report past the fence", []rep{
			{4 * time.Second, "000005.log", 4 * time.Second, false},
		}},
		{"a disk that stalls: the same operation on two ticks", []rep{
			{2 * time.Second, "000005.log", 1500 * time.Millisecond, false},
			{4 * time.Second, "000005.log", 3500 * time.Millisecond, true},
		}},
		{"the first operation finished; a newer one on the file is judged on its own", []rep{
			{2 * time.Second, "000005.log", 1100 * time.Millisecond, false},
			{6 * time.Second, "000005.log", 3500 * time.Millisecond, false},
			{8 * time.Second, "000005.log", 5500 * time.Millisecond, true},
		}},
		{"slow, not stalled: under the fence on every tick", []rep{
			{2 * time.Second, "000005.log", 1200 * time.Millisecond, false},
			{4 * time.Second, "000005.log", 2900 * time.Millisecond, false},
		}},
		{"two files: each operation is its own", []rep{
			{2 * time.Second, "000005.log", 2 * time.Second, false},
			{4 * time.Second, "MANIFEST-000001", 4 * time.Second, false},
		}},
	} {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := now
		j := newStallJudge(3*time.Second, func() time.Time { return clock })
		for i, r := range tc.reps {
			clock = now.Add(r.at)
			if got := j.report(vfs.DiskSlowInfo{Path: r.path, OpType: vfs.OpTypeSyncData, Duration: r.age}); got != r.want {
				t.Errorf("%s: report %d: fence %v, want %v", tc.name, i, got, r.want)
			}
		}
	}
}

// TestDiskProbeRuns: a node whose store is watched for stalls probes its
// disk each second (startDiskProbe; storage's
// TestDiskProbeReportsAStallWithoutWrites shows what that buys), and one
// whose fence is off does not.
func TestDiskProbeRuns(t *testing.T) {
	for _, fence := range []time.Duration{0, -1} {
		dir := t.TempDir()
		s := start(t, Config{Insecure: true, StoreDir: dir, DiskStallFence: fence})
		probe := filepath.Join(dir, "cairn-disk-probe")
		deadline := time.Now().Add(5 * diskProbeEvery)
		for {
			_, err := os.Stat(probe)
			if fence >= 0 && err == nil {
				break
			}
			if time.Now().After(deadline) {
				if fence >= 0 {
					t.Errorf("fence %s: no probe file %s after %s", fence, probe, 5*diskProbeEvery)
				}
				break
			}
			if fence < 0 && err == nil {
				t.Errorf("fence %s (off): the node probed its disk", fence)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = s.Stop(context.Background())
	}
}
