package pgwire

import (
	"context"
	"sync"
)

// stmtCtx is the context of one statement-level call into the session
// (invariant 8). A connection keeps the last one and runs its next
// statement under it again when nothing could have seen it end: no one
// asked for its Done channel and no AfterFunc (a cancellable context
// derived from it, context.AfterFunc) is still registered on it, and it
// was not cancelled. Otherwise endStatement cancels it, as the fresh
// context.WithCancelCause each statement used to get was, and the next
// statement gets a new one. A prepared point SELECT, which waits on
// nothing, so runs every Execute under the same context and allocates
// none (the cancellable context, its cancel closure and its channel
// were three objects per statement).
//
// What a reused context gives up: code that keeps a statement's context
// past the statement and only polls Err (never Done) sees it live, and
// sees a later statement's cancel. Work that outlives its statement must
// wait on Done (invariant 11).
//
// Err is context.Canceled once cancelled, and context.Cause of a stmtCtx
// is its Err (the context package finds causes only in its own types):
// the cause (errQueryCanceled, the connection's interrupt) is kept in
// cause, which statementError reads.
type stmtCtx struct {
	context.Context // the connection's statement base; it never ends

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	err   error         // context.Canceled once cancelled
	cause error
	funcs map[*stmtAfterFunc]struct{} // registered by AfterFunc, not yet stopped or run
}

func newStmtCtx(base context.Context) *stmtCtx { return &stmtCtx{Context: base} }

// Done implements context.Context.
func (s *stmtCtx) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.err != nil {
			close(s.done)
		}
	}
	return s.done
}

// Err implements context.Context.
func (s *stmtCtx) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Cause returns the cause the context was cancelled with (nil while it
// is not).
func (s *stmtCtx) Cause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
}

// stmtAfterFunc is one AfterFunc registration.
type stmtAfterFunc struct {
	s *stmtCtx
	f func()
}

// stop unregisters a; it reports whether a had not run yet.
func (a *stmtAfterFunc) stop() bool {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if _, ok := a.s.funcs[a]; !ok {
		return false
	}
	delete(a.s.funcs, a)
	return true
}

// AfterFunc arranges for f to run in its own goroutine once s is
// cancelled, as context.AfterFunc does; the context package calls it to
// hang a derived context's cancel on s (without it, every context derived
// from s would cost a goroutine).
func (s *stmtCtx) AfterFunc(f func()) (stop func() bool) {
	a := &stmtAfterFunc{s: s, f: f}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if s.funcs == nil {
		s.funcs = make(map[*stmtAfterFunc]struct{})
	}
	s.funcs[a] = struct{}{}
	s.mu.Unlock()
	return a.stop
}

// cancel ends s with cause (context.Canceled when nil); a second cancel
// does nothing.
func (s *stmtCtx) cancel(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if cause == nil {
		cause = context.Canceled
	}
	s.err, s.cause = context.Canceled, cause
	if s.done != nil {
		close(s.done)
	}
	funcs := s.funcs
	s.funcs = nil
	s.mu.Unlock()
	for a := range funcs {
		go a.f()
	}
}

// reusable reports whether nothing could have seen s end: it is not
// cancelled, its Done channel was never made and no AfterFunc is
// registered.
func (s *stmtCtx) reusable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil && s.done == nil && len(s.funcs) == 0
}

// String names the context, as the context package's types do.
func (s *stmtCtx) String() string { return "pgwire.stmtCtx" }

// causeOf is context.Cause, which reads a stmtCtx's Err only.
func causeOf(ctx context.Context) error {
	if s, ok := ctx.(*stmtCtx); ok {
		if c := s.Cause(); c != nil {
			return c
		}
	}
	return context.Cause(ctx)
}
