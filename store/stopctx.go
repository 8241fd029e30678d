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
// must end when either the caller's does or the store closes. A request
// that never waits (a point read that meets no latch or lock) never asks
// for Done, so the channel and the hooks that close it are made on the
// first call to Done (or AfterFunc), not per request: that was 4% of the
// CPU of pgbench's select-only. Err and Value need neither.
//
// The hooks are the reqCtx's own, not a context.WithCancel of the
// caller's merged with the store's stop context: WithCancel asks its
// parent for Done, and pgwire's statement context, once asked, can no
// longer be handed to the connection's next statement (pgwire invariant
// 11), so every write (its proposer waits on Done) cost a statement
// context besides the merge's own objects. A caller's context that
// offers AfterFunc (pgwire's, the context package's afterFuncer) is
// hooked through it, without its Done.
type reqCtx struct {
	context.Context // the caller's
	stop            context.Context

	mu   sync.Mutex
	done chan struct{} // nil until Done or AfterFunc is first called
	// err is why done was closed (nil while it is open).
	err error
	// unhook undo the hooks on the caller's context and on stop.
	unhook   [2]func() bool
	funcs    []*reqAfterFunc // registered by AfterFunc, not yet stopped or run
	released bool
}

// afterFuncer is a context that runs a function once it ends without
// being asked for its Done channel (the context package's interface of
// the same name).
type afterFuncer interface {
	AfterFunc(func()) func() bool
}

// hookLocked makes done and hooks end on the caller's context and on
// stop; c.mu is held.
func (c *reqCtx) hookLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.released {
		// The request is over; nothing may wait on its context.
		c.err = context.Canceled
		close(c.done)
		return
	}
	end := c.end
	if a, ok := c.Context.(afterFuncer); ok {
		c.unhook[0] = a.AfterFunc(end)
	} else {
		c.unhook[0] = context.AfterFunc(c.Context, end)
	}
	c.unhook[1] = context.AfterFunc(c.stop, end)
}

// end closes done once the caller's context or stop has ended (or the
// request is released), with the error of whichever ended.
func (c *reqCtx) end() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	err := c.Context.Err()
	if err == nil {
		err = c.stop.Err()
	}
	if err == nil {
		err = context.Canceled // released
	}
	c.err = err
	close(c.done)
	funcs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for _, a := range funcs {
		go a.f()
	}
}

// Done implements context.Context.
func (c *reqCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hookLocked()
	return c.done
}

// Err implements context.Context: once Done was asked for, the error
// done closed with (nil while open); before, the caller's or stop's.
func (c *reqCtx) Err() error {
	c.mu.Lock()
	made, err := c.done != nil, c.err
	c.mu.Unlock()
	if made {
		return err
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	return c.stop.Err()
}

// reqAfterFunc is one AfterFunc registration.
type reqAfterFunc struct {
	c *reqCtx
	f func()
}

// stop unregisters a; it reports whether a had not run yet.
func (a *reqAfterFunc) stop() bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	for i, b := range a.c.funcs {
		if b == a {
			a.c.funcs = append(a.c.funcs[:i], a.c.funcs[i+1:]...)
			return true
		}
	}
	return false
}

// AfterFunc lets contexts derived from a reqCtx hook onto its end
// directly instead of each starting a goroutine to watch Done.
func (c *reqCtx) AfterFunc(f func()) func() bool {
	a := &reqAfterFunc{c: c, f: f}
	c.mu.Lock()
	c.hookLocked()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.funcs = append(c.funcs, a)
	c.mu.Unlock()
	return a.stop
}

// release ends the request: the hooks, if made, are undone, and done is
// closed, as the merged context's cancel did.
func (c *reqCtx) release() {
	c.mu.Lock()
	c.released = true
	made := c.done != nil
	unhook := c.unhook
	c.mu.Unlock()
	if !made {
		return
	}
	for _, u := range unhook {
		if u != nil {
			u()
		}
	}
	c.end()
}
