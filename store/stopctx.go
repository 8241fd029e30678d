package store

import (
	"context"
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
