package store

import (
	"context"
	"sync"
	"time"
)

// stopCtx is the context of a request whose caller's context can never end
// (its Done is nil, as for context.Background): only the store's Close can
// cancel the request, so it runs on the store's stop context with the
// caller's values, instead of deriving and registering a context per
// request (which cost a point read about half a microsecond).
type stopCtx struct {
	context.Context // the caller's, for Value only
	stop            context.Context
}

// Deadline implements context.Context: a context that cannot end has none.
func (c stopCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done implements context.Context.
func (c stopCtx) Done() <-chan struct{} { return c.stop.Done() }

// Err implements context.Context.
func (c stopCtx) Err() error { return c.stop.Err() }

// AfterFunc lets contexts derived from a stopCtx hook onto the store's
// cancellation directly, as they do for the standard library's contexts,
// rather than each starting a goroutine to watch Done.
func (c stopCtx) AfterFunc(f func()) func() bool { return context.AfterFunc(c.stop, f) }

// reqCtx is the context of a request whose caller's context can end: it
// must end when either the caller's does or the store closes. Merging the
// two takes a derived context and a hook on the store's stop context
// (context.WithCancel, context.AfterFunc); a request that never waits
// (a point read that meets no latch or lock) never asks for Done, so the
// merge is made on the first call to Done, not per request. That was 4%
// of the CPU of pgbench's select-only. Err and Value need no merge.
type reqCtx struct {
	context.Context // the caller's
	stop            context.Context

	mu       sync.Mutex
	merged   context.Context // nil until Done is first called
	cancel   context.CancelFunc
	unhook   func() bool
	released bool
}

// mergedLocked returns the merged context, making it if needed.
func (c *reqCtx) mergedLocked() context.Context {
	if c.merged == nil {
		if c.released {
			// The request is over; nothing may wait on its context.
			return c.Context
		}
		c.merged, c.cancel = context.WithCancel(c.Context)
		c.unhook = context.AfterFunc(c.stop, c.cancel)
	}
	return c.merged
}

// Done implements context.Context.
func (c *reqCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mergedLocked().Done()
}

// Err implements context.Context.
func (c *reqCtx) Err() error {
	c.mu.Lock()
	m := c.merged
	c.mu.Unlock()
	if m != nil {
		return m.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	return c.stop.Err()
}

// AfterFunc lets contexts derived from a reqCtx hook onto the merged
// context directly instead of each starting a goroutine to watch Done.
func (c *reqCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	m := c.mergedLocked()
	c.mu.Unlock()
	return context.AfterFunc(m, f)
}

// release ends the request: the merge, if made, is undone.
func (c *reqCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.merged != nil {
		c.unhook()
		c.cancel()
	}
}
