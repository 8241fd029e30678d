package testcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/clockmon"
)

// The clock tests of issue #4: a node's physical clock is skewed in the
// process (hlc.Clock.SetPhysicalOffset through ClusterNode.SetClockOffset;
// a Go binary cannot be skewed from outside), and the register workload
// of TestLinearizableRegisters checks what clients see.

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLinearizableRegistersClockOffset runs the register workload with
// leaseholder crashes while one node's clock is 0.8 × the maximum offset
// ahead of (or behind) the others': the tolerance the clock monitor
// allows, so the node keeps serving, and the history must stay
// linearizable. A sampler checks that no node fenced itself for its
// offset (a restarted node is briefly unverified, which is not that) and
// reports how long the skewed node held the lease.
func TestLinearizableRegistersClockOffset(t *testing.T) {
	const maxOffset = 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{
		{"ahead", maxOffset * 4 / 5},
		{"behind", -maxOffset * 4 / 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const skewed = 2
			c := StartCluster(t, ClusterOptions{MaxOffset: maxOffset, ClockOffsets: map[uint64]time.Duration{skewed: tc.skew}})
			c.WaitLeader(1, 10*time.Second)
			var (
				samples, skewedLed atomic.Int64
				stop               = make(chan struct{})
				wg                 sync.WaitGroup
				mu                 sync.Mutex
				fenced             error
			)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					samples.Add(1)
					if c.Leader(1) == skewed {
						skewedLed.Add(1)
					}
					for _, n := range c.Nodes {
						if !n.Running() {
							continue
						}
						if err := n.ClockMonitor.Fenced(); err != nil && !errors.Is(err, clockmon.ErrUnverified) {
							mu.Lock()
							fenced = fmt.Errorf("node %d: %w", n.ID, err)
							mu.Unlock()
						}
					}
				}
			})
			res := runRegisters(t, c, linSeedOrNow(t), *linDuration/2, crashLeaseholders)
			close(stop)
			wg.Wait()
			t.Logf("node %d (clock %+v) held the lease in %d of %d samples", skewed, tc.skew, skewedLed.Load(), samples.Load())
			if fenced != nil {
				t.Errorf("a node fenced itself at 0.8 × the maximum offset: %v", fenced)
			}
			res.check(t)
		})
	}
}

// TestClockOffsetBeyondMaxFences skews the leaseholder's clock to four
// times the maximum offset ahead of (or behind) the others'. (Only offsets
// certainly beyond the tolerance count, offset minus half the ping's round
// trip: at twice the maximum offset a loaded machine's 120 ms pings left
// a measurement in doubt, which lifted the fence for a moment and let two
// operations through; the monitor's rule is clockmon's doc.) It must fence
// itself: its monitor reports it, its raft node drops its leases and
// hands leadership to another node, and the others go on serving. The
// register workload then runs through all three gateways: nothing
// succeeds through the fenced one, the lease never comes back to it, and
// the history is linearizable (no stale read). Once its clock is set
// right the fence lifts and it serves again.
func TestClockOffsetBeyondMaxFences(t *testing.T) {
	const maxOffset = 50 * time.Millisecond
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{
		{"ahead", 4 * maxOffset},
		{"behind", -4 * maxOffset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := StartCluster(t, ClusterOptions{MaxOffset: maxOffset})
			ctx := context.Background()
			l := c.WaitLeader(1, 10*time.Second)
			victim := c.Nodes[l-1]
			for _, n := range c.Nodes {
				if err := n.DB.Put(ctx, []byte("\x03clock/before"), []byte(fmt.Sprint(n.ID))); err != nil {
					t.Fatalf("write through node %d before the skew: %v", n.ID, err)
				}
			}

			victim.SetClockOffset(tc.skew)
			waitFor(t, 5*time.Second, "the skewed node fences itself", func() bool {
				return errors.Is(victim.ClockMonitor.Fenced(), clockmon.ErrClockOffset) && !errors.Is(victim.ClockMonitor.Fenced(), clockmon.ErrUnverified) && victim.Raft.Fenced() != nil
			})
			t.Logf("fenced: %v", victim.Raft.Fenced())
			waitFor(t, 5*time.Second, "another node takes the lease", func() bool {
				l := c.Leader(1)
				return l != 0 && l != victim.ID
			})
			for _, n := range c.Nodes {
				if n != victim && n.ClockMonitor.Fenced() != nil {
					t.Fatalf("node %d, whose clock is right, is fenced: %v", n.ID, n.ClockMonitor.Fenced())
				}
			}

			var leased atomic.Int64
			sample := func(r *linRun, _ *rand.Rand) {
				time.Sleep(10 * time.Millisecond)
				if c.Leader(1) == victim.ID {
					leased.Add(1)
				}
			}
			res := runRegisters(t, c, linSeedOrNow(t), 3*time.Second, sample)
			res.check(t)
			if n := leased.Load(); n > 0 {
				t.Errorf("the fenced node held the lease in %d samples", n)
			}
			if n := res.okVia[victim.ID]; n > 0 {
				t.Errorf("%d operations succeeded through the fenced gateway", n)
			}
			for _, n := range c.Nodes {
				if n != victim && res.okVia[n.ID] == 0 {
					t.Errorf("nothing succeeded through node %d, whose clock is right", n.ID)
				}
			}

			victim.SetClockOffset(0)
			waitFor(t, 5*time.Second, "the fence lifts once the clock is right", func() bool {
				return victim.ClockMonitor.Fenced() == nil && victim.Raft.Fenced() == nil
			})
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := victim.DB.Put(wctx, []byte("\x03clock/after"), []byte("x")); err != nil {
				t.Fatalf("write through the healed node: %v", err)
			}
		})
	}
}
