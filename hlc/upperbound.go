package hlc

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// UpperBoundStore persists the clock's wall-time upper bound across
// restarts. The node implements it on a store-local key with a synced write;
// Save must be durable when it returns, because the clock hands out wall
// times up to the saved value right after. Load returns 0 when nothing has
// been saved yet. The clock calls them with its mutex held, never
// concurrently.
type UpperBoundStore interface {
	Load() (int64, error)
	Save(wallNanos int64) error
}

// persistState is the clock's view of its attached UpperBoundStore.
type persistState struct {
	store    UpperBoundStore
	interval time.Duration
	// bound is the last value known durable in store.
	bound int64
	// err is the last Save failure, cleared by the next successful save.
	err error
}

// EnsureUpperBound attaches store to the clock so its timestamps never go
// backwards across a restart (invariant 4). It loads the persisted bound and
// moves the clock above it, so the first Now has a wall time strictly greater
// than any wall time a previous incarnation could have handed out, even if
// the physical clock is now behind. From then on, whenever the clock is about
// to pass the bound it first saves a new one interval ahead, so a save
// happens about once per interval of clock progress. Call it once, before the
// clock hands out timestamps that matter.
func (c *Clock) EnsureUpperBound(store UpperBoundStore, interval time.Duration) error {
	bound, err := store.Load()
	if err != nil {
		return fmt.Errorf("hlc: loading clock upper bound: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.persist != nil {
		return fmt.Errorf("hlc: clock already has an upper bound store")
	}
	// The previous incarnation may have handed out any timestamp with wall
	// time <= bound; the smallest timestamp above all of those is (bound+1, 0),
	// which is exactly what Next of this floor yields.
	c.mu.last = c.mu.last.Forward(Timestamp{WallTime: bound, Logical: math.MaxInt32})
	c.mu.persist = &persistState{store: store, interval: interval, bound: bound}
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

// raiseBoundLocked makes sure wall is at or below the persisted bound, saving
// a new bound of wall+interval when it is not.
func (c *Clock) raiseBoundLocked(wall int64) error {
	p := c.mu.persist
	if p == nil || wall <= p.bound {
		return nil
	}
	next := wall + int64(p.interval)
	if err := p.store.Save(next); err != nil {
		p.err = err
		return fmt.Errorf("hlc: saving clock upper bound %d: %w", next, err)
	}
	p.bound, p.err = next, nil
	return nil
}

// boundLocked returns next if it may be handed out, or the closest timestamp
// that may when the bound cannot be raised: one that is still greater than
// the clock's last timestamp but does not pass the persisted bound.
func (c *Clock) boundLocked(next Timestamp) Timestamp {
	if c.raiseBoundLocked(next.WallTime) == nil {
		return next
	}
	bound := c.mu.persist.bound
	if c.mu.last.WallTime < bound {
		return Timestamp{WallTime: bound}
	}
	pinned := c.mu.last.Next()
	if pinned.WallTime > bound {
		// 2^31 timestamps at one wall time while the store keeps failing:
		// handing out another would break invariant 4.
		panic(fmt.Sprintf("hlc: logical clock exhausted at the persisted upper bound %d: %v", bound, c.mu.persist.err))
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
