package hlc

import (
	"sync"
	"sync/atomic"
	"time"
)

// UnixNano reads the real physical clock; pass it to NewClock outside tests.
func UnixNano() int64 { return time.Now().UnixNano() }

// Clock is a hybrid logical clock. It is safe for concurrent use.
//
// Its wall time follows the physical clock when that moves forward and holds
// still (ticking the logical counter instead) when it does not, so timestamps
// are strictly increasing (invariant 1) yet stay close to real time, and
// Update pulls it forward to timestamps seen from other nodes so causally
// later events get larger timestamps across the cluster (invariant 2).
type Clock struct {
	physical  func() int64
	maxOffset time.Duration
	// skew is added to every physical reading; see SetPhysicalOffset. It is
	// atomic so a test can skew a running node without taking mu.
	skew atomic.Int64

	mu struct {
		sync.Mutex
		// last is the largest timestamp handed out by Now or accepted by
		// Update; the next Now is strictly greater.
		last Timestamp
		// persist is set by EnsureUpperBound.
		persist *persistState
	}
	// pinLo and pinHi are the wall times of the last stretch of
	// timestamps handed out while pinned at the persisted bound (0: none
	// yet); written under mu, read lock-free by CheckPinned.
	pinLo, pinHi atomic.Int64
	// pinned counts the readings handed out pinned (PinnedReadings).
	pinned atomic.Int64
}

// NewClock returns a clock reading physical (Unix nanoseconds; hlc.UnixNano
// for the real clock, a ManualClock's UnixNano in tests) that rejects remote
// timestamps more than maxOffset ahead of it. maxOffset 0 disables the check.
func NewClock(physical func() int64, maxOffset time.Duration) *Clock {
	return &Clock{physical: physical, maxOffset: maxOffset}
}

// MaxOffset returns the maximum clock offset the clock was built with; readers
// use it as the width of their uncertainty interval.
func (c *Clock) MaxOffset() time.Duration { return c.maxOffset }

// PhysicalNow returns the physical clock's reading in Unix nanoseconds,
// including any offset set with SetPhysicalOffset. It does not move the HLC.
func (c *Clock) PhysicalNow() int64 { return c.physical() + c.skew.Load() }

// SetPhysicalOffset skews this clock's physical readings by d (positive runs
// ahead, negative behind). It exists for tests that simulate a node with a
// bad clock, such as the cluster's clock-skew fault tests; production code
// never calls it. Because Now never goes backwards, a negative offset only
// makes the wall time stall until the skewed physical clock catches up.
func (c *Clock) SetPhysicalOffset(d time.Duration) { c.skew.Store(int64(d)) }

// Now returns a timestamp strictly greater than every timestamp this clock
// has returned from Now or accepted in Update.
func (c *Clock) Now() Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		next := c.mu.last.Next()
		if pt := c.PhysicalNow(); pt > c.mu.last.WallTime {
			next = Timestamp{WallTime: pt}
		}
		if p := c.mu.persist; p != nil {
			c.saveAheadLocked(next.WallTime)
			if next.WallTime > p.bound {
				if c.waitSaveLocked() {
					continue // the save ended: read the clock again
				}
				next = c.pinLocked()
			}
		}
		c.mu.last = next
		return next
	}
}

// Update moves the clock forward to remote, so every later Now is greater
// than it. If remote is more than MaxOffset ahead of the physical clock it
// returns a *ClockOffsetError and changes nothing. With an UpperBoundStore
// attached it may also return an error wrapping the store's, again with the
// clock unchanged. A remote timestamp at or below the clock is a no-op,
// checked first: it reads no physical clock and refuses nothing (a batch
// between a node's own KV client and its own tablets carries the node's
// own timestamps, three Updates of them per read, and each physical
// reading was a cost of a point read).
func (c *Clock) Update(remote Timestamp) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if remote.LessEq(c.mu.last) {
		return nil
	}
	if c.maxOffset > 0 {
		pt := c.PhysicalNow()
		if remote.WallTime-pt > int64(c.maxOffset) {
			return &ClockOffsetError{Remote: remote, Physical: pt, MaxOffset: c.maxOffset}
		}
	}
	if err := c.raiseBoundLocked(remote.WallTime); err != nil {
		return err
	}
	if remote.LessEq(c.mu.last) {
		// The mutex was released while a save ran: another caller may
		// have moved the clock past remote meanwhile.
		return nil
	}
	c.mu.last = remote
	if c.mu.persist != nil {
		c.saveAheadLocked(remote.WallTime)
	}
	return nil
}

// Lead returns how far the clock's wall time is ahead of the physical
// clock (zero when it is not), from one physical reading, without moving
// the clock: how long a leaseholder waits before answering (tablet's
// commit wait).
func (c *Clock) Lead() time.Duration {
	c.mu.Lock()
	last := c.mu.last.WallTime
	c.mu.Unlock()
	if d := last - c.PhysicalNow(); d > 0 {
		return time.Duration(d)
	}
	return 0
}
