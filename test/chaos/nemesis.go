package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Nemesis kinds.
const (
	Kill         = "kill"         // SIGKILL a node, restart it after Dur
	Pause        = "pause"        // SIGSTOP a node, SIGCONT it after Dur
	Partition    = "partition"    // cut a node off from the others, heal after Dur
	Clock        = "clock"        // skew a node's clock by Offset, undo after Dur
	Leases       = "leases"       // a node hands every lease it holds to another
	Split        = "split"        // a node splits the largest tablet it leads
	AddNode      = "add"          // a new node joins
	Decommission = "decommission" // a node is decommissioned (when more than 3 live)
	SlowDisk     = "slow-disk"    // a node's disk takes SlowDiskLatency per read and sync, for Dur
	StallDisk    = "stall-disk"   // a node's disk stops answering; the node fences itself (DiskStallFence)
)

// SlowDiskLatency is the slow-disk nemesis's latency per read and sync.
const SlowDiskLatency = 30 * time.Millisecond

// AllNemeses is every kind, for the long run.
var AllNemeses = []string{Kill, Pause, Partition, Clock, Leases, Split, AddNode, Decommission, SlowDisk, StallDisk}

// Fault is one scheduled fault. Node and Other are random draws, taken
// modulo the live nodes when the fault happens, so the schedule is fixed
// by the seed alone.
type Fault struct {
	At     time.Duration
	Kind   string
	Node   int
	Other  int
	Dur    time.Duration
	Offset time.Duration
}

func (f Fault) String() string {
	s := fmt.Sprintf("%s +%s %s node#%d", f.Kind, f.At.Round(time.Millisecond), f.Dur, f.Node)
	if f.Kind == Clock {
		s += fmt.Sprintf(" offset %s", f.Offset)
	}
	return s
}

// Schedule draws faults of the given kinds every interval (the first
// after one interval) for total, each lasting dur (faults do not overlap:
// dur < interval).
func Schedule(rng *rand.Rand, kinds []string, interval, dur, total time.Duration) []Fault {
	var out []Fault
	adds := 0
	for at := interval; at+dur < total; at += interval {
		k := kinds[rng.IntN(len(kinds))]
		// Membership changes are slow and bounded: at most two added
		// nodes, and a decommission only after an add.
		if k == AddNode && adds >= 2 || k == Decommission && adds == 0 {
			k = Kill
		}
		if k == AddNode {
			adds++
		}
		f := Fault{At: at, Kind: k, Node: rng.IntN(1 << 20), Other: rng.IntN(1 << 20), Dur: dur}
		if k == Clock {
			// Within the maximum offset (500 ms): the cluster must stay
			// correct and available; beyond it a node fences itself.
			f.Offset = time.Duration(rng.IntN(400)-200) * time.Millisecond
		}
		out = append(out, f)
	}
	return out
}

// RunNemesis applies the schedule from start until ctx ends or the
// schedule is done, then undoes the last fault. Each fault is logged. It
// returns what the nemesis itself found wrong: a node whose stalled disk
// did not make it fence itself (it keeps its leases and answers nothing).
// It returns the first error applying a fault (the run goes on: a fault
// that could not be applied is not a finding about the database).
func RunNemesis(ctx context.Context, c *Cluster, start time.Time, faults []Fault, logf func(string, ...any)) (findings []string) {
	for _, f := range faults {
		if !sleepUntil(ctx, start.Add(f.At)) {
			return
		}
		live := c.Live()
		for _, i := range live {
			// A node that fenced itself on a disk that was merely slow
			// (a loaded machine) comes back, as a supervisor would do.
			if c.Fenced(i) {
				logf("nemesis: node %d had fenced itself; restarting it", i+1)
				if err := c.RestartExited(i); err != nil {
					logf("nemesis: restarting node %d: %v", i+1, err)
				}
			}
		}
		n := live[f.Node%len(live)]
		o := live[f.Other%len(live)]
		if o == n {
			o = live[(f.Other+1)%len(live)]
		}
		logf("nemesis %s: node %d (other %d)", f, n+1, o+1)
		var err error
		var undo func() error
		switch f.Kind {
		case Kill:
			c.Kill(n)
			undo = func() error { return c.Restart(n) }
		case Pause:
			err = c.Pause(n)
			undo = func() error { return c.Resume(n) }
		case Partition:
			err = c.Partition([]int{n})
			undo = func() error { return c.Heal(30 * time.Second) }
		case Clock:
			err = c.ClockOffset(n, f.Offset)
			undo = func() error { return c.ClockOffset(n, 0) }
		case SlowDisk:
			err = c.Disk(n, SlowDiskLatency, false)
			undo = func() error { return c.Disk(n, 0, false) }
		case StallDisk:
			if err = c.Disk(n, 0, true); err != nil {
				break // not stalled (the node was down): nothing to judge
			}
			undo = func() error {
				// The node should fence itself within DiskStallFence
				// and the watcher's 2 s tick; wait for it a little
				// longer than that, then bring the node back.
				stalled := time.Now()
				for !c.Node(n).Exited() && time.Since(stalled) < DiskStallFence+3*time.Second && ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond)
				}
				if !c.Fenced(n) {
					if ctx.Err() == nil {
						findings = append(findings, fmt.Sprintf("node %d's disk stalled at +%s and the node did not fence itself within %s", n+1, f.At, DiskStallFence+3*time.Second+f.Dur))
					}
					logf("nemesis stall-disk: node %d did not fence itself", n+1)
					return c.Disk(n, 0, false)
				}
				logf("nemesis stall-disk: node %d fenced itself; restarting it", n+1)
				return c.RestartExited(n)
			}
		case Leases:
			var out map[string]any
			out, err = c.TransferLeases(n, o)
			logf("nemesis leases %d -> %d: %v", n+1, o+1, out)
		case Split:
			var out map[string]any
			out, err = c.Split(n)
			logf("nemesis split on %d: %v", n+1, out)
		case AddNode:
			var i int
			i, err = c.AddNode(ctx)
			logf("nemesis added node %d", i+1)
		case Decommission:
			if len(live) > 3 {
				err = c.Decommission(ctx, n, o)
				logf("nemesis decommissioned node %d", n+1)
			}
		}
		if err != nil {
			logf("nemesis %s: %v", f.Kind, err)
		}
		if undo != nil {
			sleepUntil(ctx, start.Add(f.At+f.Dur))
			if err := undo(); err != nil {
				logf("nemesis undo %s: %v", f.Kind, err)
			}
		}
	}
	return findings
}

// sleepUntil sleeps until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
