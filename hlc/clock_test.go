package hlc

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestClockDataDriven runs testdata/clock. The mini-language drives one Clock
// over a ManualClock, plus an in-memory UpperBoundStore that survives
// "restart":
//
//	clock physical=<nanos> [max-offset=<duration>] [persist=<duration>]
//	    Build a fresh clock reading a manual physical clock set to <nanos>.
//	    With persist, attach the test's UpperBoundStore with that interval
//	    (the store keeps its contents across clock commands: a restart).
//	now [n=<count>]
//	    Call Now n times (default 1) and print each timestamp.
//	advance d=<duration>
//	    Move the manual physical clock by d (negative moves it back).
//	offset d=<duration>
//	    SetPhysicalOffset(d).
//	update ts=<wall[,logical]>
//	    Call Update and print "ok" or the error.
//	lead
//	    Print Lead: how far the clock is ahead of the physical clock.
//	fail-saves on|off
//	    Make the store's Save fail (a full or broken disk) or succeed again.
//	hang-saves on|off
//	    Make the store's Save block (a stalled disk) until hang-saves off.
//	check-pinned ts=<wall[,logical]>
//	    Print CheckPinned's verdict on ts.
//	state
//	    Print the physical reading, the persisted bound and the save count.
//
// Saves run in the background; every command but those run while saves
// hang first waits for the save in flight to end, so the output is
// deterministic.
func TestClockDataDriven(t *testing.T) {
	var (
		manual *ManualClock
		clock  *Clock
		store  = &flakyStore{}
	)
	datadriven.RunTest(t, "testdata/clock", func(t *testing.T, d *datadriven.TestData) string {
		if clock != nil && !store.hanging() {
			clock.WaitPersisted()
		}
		switch d.Cmd {
		case "clock":
			var physical int64
			d.ScanArgs(t, "physical", &physical)
			var maxOffset time.Duration
			if arg, ok := d.Arg("max-offset"); ok {
				maxOffset = parseDuration(t, arg.SingleVal(t))
			}
			manual = NewManualClock(physical)
			clock = NewClock(manual.UnixNano, maxOffset)
			if arg, ok := d.Arg("persist"); ok {
				if err := clock.EnsureUpperBound(store, parseDuration(t, arg.SingleVal(t))); err != nil {
					return "error: " + err.Error()
				}
			}
			return ""
		case "now":
			n := 1
			d.MaybeScanArgs(t, "n", &n)
			var b strings.Builder
			for range n {
				fmt.Fprintln(&b, clock.Now())
			}
			return b.String()
		case "advance":
			var s string
			d.ScanArgs(t, "d", &s)
			manual.Advance(parseDuration(t, s))
			return ""
		case "lead":
			return clock.Lead().String()
		case "offset":
			var s string
			d.ScanArgs(t, "d", &s)
			clock.SetPhysicalOffset(parseDuration(t, s))
			return ""
		case "update":
			var s string
			d.ScanArgs(t, "ts", &s)
			ts, err := ParseTimestamp(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := clock.Update(ts); err != nil {
				var offErr *ClockOffsetError
				if errors.As(err, &offErr) {
					return "offset error: " + err.Error()
				}
				return "error: " + err.Error()
			}
			return "ok"
		case "fail-saves":
			store.setFail(d.CmdArgs[0].Key == "on")
			return ""
		case "hang-saves":
			store.setHang(d.CmdArgs[0].Key == "on")
			return ""
		case "check-pinned":
			var s string
			d.ScanArgs(t, "ts", &s)
			ts, err := ParseTimestamp(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := clock.CheckPinned(ts); err != nil {
				return "pinned: " + err.Error()
			}
			return "ok"
		case "state":
			bound, _ := store.Load()
			return fmt.Sprintf("physical=%d bound=%d saves=%d persist-err=%v",
				clock.PhysicalNow(), bound, store.Saves(), clock.PersistError())
		default:
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		}
	})
}

func parseDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// flakyStore is a MemUpperBoundStore whose saves can be made to fail or
// to hang.
type flakyStore struct {
	MemUpperBoundStore
	mu   sync.Mutex
	fail bool
	// hang, when non-nil, is closed to let the hanging saves return.
	hang chan struct{}
}

var errDiskFull = errors.New("disk full")

func (s *flakyStore) setFail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = on
}

func (s *flakyStore) setHang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on && s.hang == nil {
		s.hang = make(chan struct{})
	} else if !on && s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
}

func (s *flakyStore) hanging() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hang != nil
}

func (s *flakyStore) Save(bound int64) error {
	s.mu.Lock()
	fail, hang := s.fail, s.hang
	s.mu.Unlock()
	if hang != nil {
		<-hang
	}
	if fail {
		return errDiskFull
	}
	return s.MemUpperBoundStore.Save(bound)
}

// TestClockRestartNeverGoesBackwards checks invariant 4 across several
// restarts in which the physical clock jumps backwards: every timestamp after
// a restart is greater than every timestamp before it.
func TestClockRestartNeverGoesBackwards(t *testing.T) {
	store := &MemUpperBoundStore{}
	const interval = 500 * time.Nanosecond
	physical := int64(1_000_000)
	var maxBefore Timestamp
	for restart := range 5 {
		manual := NewManualClock(physical)
		c := NewClock(manual.UnixNano, 0)
		if err := c.EnsureUpperBound(store, interval); err != nil {
			t.Fatal(err)
		}
		first := c.Now()
		if !maxBefore.Less(first) {
			t.Fatalf("restart %d: first timestamp %s not above %s from before the restart", restart, first, maxBefore)
		}
		last := first
		for i := range 2000 {
			if i%3 == 0 {
				manual.Advance(7 * time.Nanosecond)
			}
			ts := c.Now()
			if !last.Less(ts) {
				t.Fatalf("restart %d: Now went from %s to %s", restart, last, ts)
			}
			last = ts
		}
		// A restart ends the process and its saves with it: let this
		// incarnation's last save land before the next one starts.
		c.WaitPersisted()
		if bound, _ := store.Load(); last.WallTime > bound {
			t.Fatalf("restart %d: handed out %s beyond the persisted bound %d", restart, last, bound)
		}
		maxBefore = last
		// The next incarnation's physical clock starts behind this one.
		physical = manual.UnixNano() - 10_000
	}
	// 5 incarnations moved the clock by ~5*(2000/3*7ns); with a 500ns interval
	// that is a few dozen saves, far fewer than the 10,000 Now calls.
	if s := store.Saves(); s == 0 || s > 100 {
		t.Fatalf("expected saves about once per interval, got %d", s)
	}
}

// TestClockConcurrentNow checks invariant 1 under concurrency: all timestamps
// from concurrent callers are distinct, and each caller's are increasing.
func TestClockConcurrentNow(t *testing.T) {
	manual := NewManualClock(1)
	c := NewClock(manual.UnixNano, time.Second)
	if err := c.EnsureUpperBound(&MemUpperBoundStore{}, time.Microsecond); err != nil {
		t.Fatal(err)
	}
	const goroutines, perG = 8, 2000
	results := make([][]Timestamp, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			out := make([]Timestamp, 0, perG)
			for i := range perG {
				switch i % 4 {
				case 1:
					manual.Advance(3)
				case 2:
					// Remote timestamps inside the offset keep Update in the mix.
					if err := c.Update(Timestamp{WallTime: manual.UnixNano() + 10, Logical: 2}); err != nil {
						t.Error(err)
						return
					}
				}
				out = append(out, c.Now())
			}
			results[g] = out
		})
	}
	wg.Wait()
	seen := make(map[Timestamp]bool, goroutines*perG)
	for g, out := range results {
		for i, ts := range out {
			if i > 0 && !out[i-1].Less(ts) {
				t.Fatalf("goroutine %d: %s then %s", g, out[i-1], ts)
			}
			if seen[ts] {
				t.Fatalf("timestamp %s handed out twice", ts)
			}
			seen[ts] = true
		}
	}
}

// TestUpdateOffsetErrorLeavesClockUnchanged checks invariant 3 with the
// error's fields, which callers use to report which node is off.
func TestUpdateOffsetErrorLeavesClockUnchanged(t *testing.T) {
	manual := NewManualClock(1000)
	c := NewClock(manual.UnixNano, 100*time.Nanosecond)
	before := c.Now()
	remote := Timestamp{WallTime: 1101}
	err := c.Update(remote)
	var offErr *ClockOffsetError
	if !errors.As(err, &offErr) {
		t.Fatalf("expected *ClockOffsetError, got %v", err)
	}
	if offErr.Remote != remote || offErr.Physical != 1000 || offErr.MaxOffset != 100*time.Nanosecond {
		t.Fatalf("unexpected error fields: %+v", offErr)
	}
	if after := c.Now(); after != before.Next() {
		t.Fatalf("clock moved: %s then %s", before, after)
	}
	if err := c.Update(Timestamp{WallTime: 1100}); err != nil {
		t.Fatalf("remote exactly at the max offset must be accepted: %v", err)
	}
}

// TestUpdateBeyondHungSave checks invariant 5's one wait: an Update beyond
// the persisted bound while the save hangs is refused after
// updateSaveWait, leaves the clock where it was, and Now still answers.
func TestUpdateBeyondHungSave(t *testing.T) {
	defer func(d time.Duration) { updateSaveWait = d }(updateSaveWait)
	updateSaveWait = 10 * time.Millisecond
	manual := NewManualClock(1000)
	c := NewClock(manual.UnixNano, 0)
	store := &flakyStore{}
	if err := c.EnsureUpperBound(store, 100*time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	store.setHang(true)
	before := c.Now()
	if err := c.Update(Timestamp{WallTime: 5000}); err == nil {
		t.Fatal("an Update beyond the bound was accepted while the save hung")
	}
	if after := c.Now(); !before.Less(after) || after.WallTime >= 5000 {
		t.Fatalf("after the refused Update: %s then %s", before, after)
	}
	store.setHang(false)
	c.WaitPersisted()
	if err := c.Update(Timestamp{WallTime: 5000}); err != nil {
		t.Fatalf("once saves answer again: %v", err)
	}
	if ts := c.Now(); ts.WallTime != 5000 {
		t.Fatalf("Now after Update(5000) is %s", ts)
	}
}

// TestStopPersisting: after StopPersisting no save reaches the store (the
// node closes its engine next), and the clock still answers, pinned at
// the bound, strictly increasing.
func TestStopPersisting(t *testing.T) {
	manual := NewManualClock(1000)
	c := NewClock(manual.UnixNano, 0)
	store := &MemUpperBoundStore{}
	if err := c.EnsureUpperBound(store, 100*time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	c.StopPersisting()
	saves := store.Saves()
	bound, _ := store.Load()
	last := c.Now()
	for range 5 {
		manual.Advance(80 * time.Nanosecond)
		ts := c.Now()
		if !last.Less(ts) || ts.WallTime > bound {
			t.Fatalf("after StopPersisting: %s then %s (bound %d)", last, ts, bound)
		}
		last = ts
	}
	if err := c.Update(Timestamp{WallTime: bound + 1}); err == nil {
		t.Fatal("an Update beyond the bound was accepted after StopPersisting")
	}
	if s := store.Saves(); s != saves {
		t.Fatalf("%d saves after StopPersisting", s-saves)
	}
}
