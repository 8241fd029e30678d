package hlc

import (
	"sync/atomic"
	"time"
)

// ManualClock is a physical clock that moves only when told to, so clock
// tests (and deterministic cluster tests) can step time by hand. Pass its
// UnixNano method to NewClock. It is safe for concurrent use.
type ManualClock struct {
	nanos atomic.Int64
}

// NewManualClock returns a manual clock reading start (Unix nanos).
func NewManualClock(start int64) *ManualClock {
	m := &ManualClock{}
	m.nanos.Store(start)
	return m
}

// UnixNano returns the current reading.
func (m *ManualClock) UnixNano() int64 { return m.nanos.Load() }

// Advance moves the reading by d (which may be negative, to model a clock
// stepped backwards).
func (m *ManualClock) Advance(d time.Duration) { m.nanos.Add(int64(d)) }

// Set sets the reading to nanos.
func (m *ManualClock) Set(nanos int64) { m.nanos.Store(nanos) }
