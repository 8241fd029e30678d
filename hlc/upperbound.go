package hlc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// UpperBoundStore persists the clock's wall-time upper bound across
// restarts. The node implements it on a store-local key with a synced write;
// Save must be durable when it returns, because the clock hands out wall
// times up to the saved value once it has. Load returns 0 when nothing has
// been saved yet. The clock never holds its mutex while calling them and
// never has two saves in flight.
type UpperBoundStore interface {
	Load() (int64, error)
	Save(wallNanos int64) error
}

// ErrPinned is what CheckPinned's errors wrap: a timestamp the clock
// handed out while its wall time was held at the persisted bound, behind
// the physical clock, because a new bound could not be saved in time.
var ErrPinned = errors.New("hlc: the clock is held at its persisted upper bound")

// persistState is the clock's view of its attached UpperBoundStore.
type persistState struct {
	store    UpperBoundStore
	interval time.Duration
	// bound is the last value known durable in store.
	bound int64
	// err is the last Save failure, cleared by the next successful save;
	// failedAt is the physical reading when it failed, so that a failing
	// store is retried at most every interval/8, not on every Now.
	err      error
	failedAt int64
	// done is non-nil while a save is in flight, and closed when it ends.
	done chan struct{}
	// slow is set when a reading of the clock gave up waiting for the
	// save in flight (nowSaveWait), cleared when that save ends: until
	// then readings pin at once rather than each wait again.
	slow bool
	// stopped is set by StopPersisting: no save starts after it.
	stopped bool
	// lastSave is how long the last successful save took, by the
	// physical clock: the headroom grows with it (extraLocked).
	lastSave int64
}

// maxExtraIntervals caps the headroom added for slow saves, in
// intervals: a bound at most 1+maxExtraIntervals intervals ahead.
const maxExtraIntervals = 3

// extraLocked is the headroom added to the interval because saves are
// slow (invariant 5): a save starts once the remaining headroom is below
// interval/2 + extra, twice the last save's duration, and saves a bound
// interval + extra ahead, so a disk whose synced writes take up to
// (interval/2 + maxExtraIntervals·interval)/2 — 1.75 s with the node's
// one-second interval — keeps the clock unpinned; a save that ends
// sooner shrinks it again. The price is a restart's wait: a restarted
// clock starts at the bound, up to interval + extra ahead.
func (p *persistState) extraLocked() int64 {
	return min(max(2*p.lastSave-int64(p.interval)/2, 0), maxExtraIntervals*int64(p.interval))
}

// EnsureUpperBound attaches store to the clock so its timestamps never go
// backwards across a restart (invariant 4). It loads the persisted bound and
// moves the clock above it, so the first Now has a wall time strictly greater
// than any wall time a previous incarnation could have handed out, even if
// the physical clock is now behind; and it saves a new bound one interval
// ahead of the clock before it returns. From then on the clock saves the
// next bound, interval ahead, in the background once it has used half of
// the headroom (about twice per interval of clock progress), so no Now
// waits for a disk (invariant 5). Call it once, before the clock hands out
// timestamps that matter.
func (c *Clock) EnsureUpperBound(store UpperBoundStore, interval time.Duration) error {
	bound, err := store.Load()
	if err != nil {
		return fmt.Errorf("hlc: loading clock upper bound: %w", err)
	}
	c.mu.Lock()
	attached := c.mu.persist != nil
	// The previous incarnation may have handed out any timestamp with wall
	// time <= bound; the smallest timestamp above all of those is
	// (bound+1, 0), which is exactly what Next of this floor yields.
	floor := c.mu.last.Forward(Timestamp{WallTime: bound, Logical: math.MaxInt32})
	c.mu.Unlock()
	if attached {
		return fmt.Errorf("hlc: clock already has an upper bound store")
	}
	next := max(floor.WallTime+1, c.PhysicalNow()) + int64(interval)
	if err := store.Save(next); err != nil {
		return fmt.Errorf("hlc: saving clock upper bound %d: %w", next, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.persist != nil {
		return fmt.Errorf("hlc: clock already has an upper bound store")
	}
	c.mu.last = c.mu.last.Forward(floor)
	c.mu.persist = &persistState{store: store, interval: interval, bound: next}
	return nil
}

// PersistError returns the last error saving the upper bound, or nil once a
// later save succeeded. While it is non-nil the clock's wall time is pinned
// at the persisted bound (invariant 5), so a node should report it loudly.
func (c *Clock) PersistError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.persist == nil {
		return nil
	}
	return c.mu.persist.err
}

// WaitPersisted waits until no save of the bound is in flight (tests
// use it to read the store at a known point).
func (c *Clock) WaitPersisted() {
	for {
		c.mu.Lock()
		var done chan struct{}
		if c.mu.persist != nil {
			done = c.mu.persist.done
		}
		c.mu.Unlock()
		if done == nil {
			return
		}
		<-done
	}
}

// WaitSaved waits, until ctx ends, for the save of the bound in flight
// (if any) to end, and reports whether the clock's bound is saved: no
// save was in flight, or the one that was succeeded. A gateway that
// refused a pinned timestamp (CheckPinned) asks it before it lets the
// transaction restart, so that the restart reads the clock after the
// bound moved rather than pin again. It waits for that one save only: a
// later one, started once the clock has used half of the new headroom,
// pins nothing unless it is slow too.
func (c *Clock) WaitSaved(ctx context.Context) bool {
	c.mu.Lock()
	p := c.mu.persist
	if p == nil {
		c.mu.Unlock()
		return true
	}
	done := p.done
	if done == nil {
		ok := p.err == nil
		c.mu.Unlock()
		return ok
	}
	c.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return p.err == nil
}

// StopPersisting ends the clock's saves: it waits for the save in flight,
// and none starts after it, so the store may be closed. The clock goes on
// answering, pinned at the persisted bound once it reaches it (invariant
// 5). A node calls it as it stops, before closing its engine.
func (c *Clock) StopPersisting() {
	c.mu.Lock()
	if c.mu.persist != nil {
		c.mu.persist.stopped = true
	}
	c.mu.Unlock()
	c.WaitPersisted()
}

// CheckPinned returns an error wrapping ErrPinned when ts's wall time lies
// in the last stretch of wall times the clock handed out while it was
// pinned at its persisted bound behind the physical clock (invariant 6),
// nil otherwise. A gateway must not choose a read timestamp so far behind
// real time: a read there could miss a write another node acknowledged
// before the read began. Lock-free: the gateway asks for every batch.
func (c *Clock) CheckPinned(ts Timestamp) error {
	hi := c.pinHi.Load()
	if hi == 0 || ts.WallTime > hi || ts.WallTime < c.pinLo.Load() {
		return nil
	}
	return fmt.Errorf("%w: timestamp %s was handed out while the clock could not pass %d (the bound could not be saved in time)", ErrPinned, ts, hi)
}

// PinnedReadings is how many readings of the clock were handed out held
// at the persisted bound since the process started: each was one a
// gateway refuses to read at (CheckPinned). A node exports it
// (cairn_clock_pinned_readings_total): a count that grows says the disk
// is too slow for the bound's saves.
func (c *Clock) PinnedReadings() int64 { return c.pinned.Load() }

// saveAheadLocked starts a background save of wall+interval (plus the
// slow saves' extra) when wall has used half of the interval's headroom
// (plus the extra) below the persisted bound and no save is in flight
// (nor did one fail within the last interval/8).
func (c *Clock) saveAheadLocked(wall int64) {
	p := c.mu.persist
	if p.done != nil || p.stopped {
		return
	}
	extra := p.extraLocked()
	if p.bound-wall >= int64(p.interval)/2+extra {
		return
	}
	if p.err != nil && c.PhysicalNow()-p.failedAt < int64(p.interval)/8 {
		return
	}
	target := wall + int64(p.interval) + extra
	done := make(chan struct{})
	p.done = done
	go c.save(p, target, done, c.PhysicalNow())
}

// save runs one Save off the clock's mutex and records its outcome and,
// when it succeeded, its duration since started (a physical reading).
func (c *Clock) save(p *persistState, target int64, done chan struct{}, started int64) {
	err := p.store.Save(target)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		p.err = fmt.Errorf("hlc: saving clock upper bound %d: %w", target, err)
		p.failedAt = c.PhysicalNow()
	} else {
		p.err = nil
		p.bound = max(p.bound, target)
		p.lastSave = max(c.PhysicalNow()-started, 0)
	}
	p.done, p.slow = nil, false
	close(done)
}

// waitSaveLocked waits, with the mutex released, up to nowSaveWait for
// the save in flight, and reports whether it ended (the caller reads the
// clock again). It returns false at once when no save is in flight (a
// failed one waits out its retry gap) or an earlier wait already gave up
// on this one.
func (c *Clock) waitSaveLocked() bool {
	p := c.mu.persist
	if p.done == nil || p.slow {
		return false
	}
	done := p.done
	t := time.NewTimer(nowSaveWait)
	defer t.Stop()
	c.mu.Unlock()
	select {
	case <-done:
		c.mu.Lock()
		return true
	case <-t.C:
		c.mu.Lock()
		if p.done == done {
			p.slow = true
		}
		return p.done != done
	}
}

// raiseBoundLocked makes sure wall is at or below the persisted bound,
// starting a save and waiting for it (with the mutex released) when it is
// not, for at most updateSaveWait. Only Update needs it: a remote timestamp
// beyond a bound kept an interval ahead of the clock is more than the
// maximum offset ahead unless saves are slow.
func (c *Clock) raiseBoundLocked(wall int64) error {
	p := c.mu.persist
	if p == nil {
		return nil
	}
	var timeout <-chan time.Time
	for wall > p.bound {
		if p.stopped {
			return fmt.Errorf("hlc: the clock's upper bound cannot be raised to %d: the node is stopping", wall)
		}
		if p.slow {
			return fmt.Errorf("hlc: the clock's upper bound could not be raised to %d: %w", wall, orSlow(p.err))
		}
		if p.done == nil {
			if p.err != nil && timeout != nil {
				return p.err
			}
			target := wall + int64(p.interval) + p.extraLocked()
			p.done = make(chan struct{})
			go c.save(p, target, p.done, c.PhysicalNow())
		}
		if timeout == nil {
			t := time.NewTimer(updateSaveWait)
			defer t.Stop()
			timeout = t.C
		}
		done := p.done
		c.mu.Unlock()
		select {
		case <-done:
			c.mu.Lock()
		case <-timeout:
			c.mu.Lock()
			if wall > p.bound {
				return fmt.Errorf("hlc: the clock's upper bound could not be raised to %d within %s: %w", wall, updateSaveWait, orSlow(p.err))
			}
		}
	}
	return nil
}

// nowSaveWait bounds how long a reading of the clock that would pass the
// persisted bound waits for the save in flight before it pins: a synced
// write of a few bytes ends well within it, so only a jump of the
// physical clock (an NTP step) makes a reading wait at all, unless the
// disk is slow or stalled. A variable for tests.
var nowSaveWait = 200 * time.Millisecond

// updateSaveWait bounds how long an Update beyond the persisted bound
// waits for a save to raise it: a synced write of a few bytes, unless the
// disk stalled, when the caller (a request) is better refused. A variable
// for tests.
var updateSaveWait = time.Second

// pinMerge is how close (in wall time) two stretches of pinned
// timestamps are merged into one for CheckPinned.
const pinMerge = 10 * time.Second

var errSaveSlow = errors.New("its save has not returned")

func orSlow(err error) error {
	if err != nil {
		return err
	}
	return errSaveSlow
}

// pinLocked returns the timestamp handed out instead of next when next
// passes the persisted bound and the save did not raise it in time: one
// still greater than the clock's last timestamp that does not pass the
// bound (invariant 5).
func (c *Clock) pinLocked() Timestamp {
	p := c.mu.persist
	// Record the stretch of wall times handed out so, for CheckPinned
	// (invariant 6). Every timestamp handed out while pinned has a wall
	// time from the first pinned bound to the current one; a new stretch
	// within pinMerge of the last one extends it, so a transaction begun
	// in the first of two close stalls stays refused.
	if hi := c.pinHi.Load(); hi == 0 || p.bound-hi > int64(pinMerge) {
		c.pinLo.Store(p.bound)
	}
	c.pinHi.Store(p.bound)
	c.pinned.Add(1)
	if c.mu.last.WallTime < p.bound {
		return Timestamp{WallTime: p.bound}
	}
	pinned := c.mu.last.Next()
	if pinned.WallTime > p.bound {
		// 2^31 timestamps at one wall time while the store keeps failing:
		// handing out another would break invariant 4.
		panic(fmt.Sprintf("hlc: logical clock exhausted at the persisted upper bound %d: %v", p.bound, p.err))
	}
	return pinned
}

// MemUpperBoundStore is an UpperBoundStore held in memory, for in-memory
// nodes and tests: it survives a Clock being rebuilt but not the process.
type MemUpperBoundStore struct {
	mu    sync.Mutex
	bound int64
	saves int
}

// Load returns the last saved bound.
func (s *MemUpperBoundStore) Load() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bound, nil
}

// Save records bound.
func (s *MemUpperBoundStore) Save(bound int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bound = bound
	s.saves++
	return nil
}

// Saves returns how many times Save was called.
func (s *MemUpperBoundStore) Saves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}
