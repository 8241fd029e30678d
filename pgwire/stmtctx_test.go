package pgwire

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// TestStatementContextReuse checks invariant 11: a statement's context is
// the next statement's only when nothing could have seen it end, and a
// reused one is cancelled by a CancelRequest and the connection's
// interrupt, and bounds a statement_timeout derived from it, as a fresh
// one is.
func TestStatementContextReuse(t *testing.T) {
	base := context.WithoutCancel(context.Background())
	for _, tc := range []struct {
		name string
		// during runs while the statement runs; it may cancel it (c) and
		// returns a check to run on the context after the statement
		// ended, or nil.
		during func(t *testing.T, c *conn, ctx context.Context) func(t *testing.T)
		reused bool
	}{
		{name: "nothing watches", reused: true,
			during: func(*testing.T, *conn, context.Context) func(*testing.T) { return nil }},
		{name: "Err only", reused: true,
			during: func(t *testing.T, _ *conn, ctx context.Context) func(*testing.T) {
				if ctx.Err() != nil {
					t.Fatal("a running statement's context ended")
				}
				return nil
			}},
		{name: "Done asked for", reused: false,
			during: func(_ *testing.T, _ *conn, ctx context.Context) func(*testing.T) {
				done := ctx.Done()
				return func(t *testing.T) {
					<-done // ended with the statement
					if ctx.Err() != context.Canceled {
						t.Fatalf("Err after the statement: %v", ctx.Err())
					}
				}
			}},
		{name: "derived context left open", reused: false,
			during: func(_ *testing.T, _ *conn, ctx context.Context) func(*testing.T) {
				child, cancel := context.WithCancel(ctx)
				_ = cancel // left open on purpose: the statement's end ends it
				return func(t *testing.T) {
					<-child.Done()
					if !errors.Is(child.Err(), context.Canceled) {
						t.Fatalf("derived context: %v", child.Err())
					}
				}
			}},
		{name: "AfterFunc left registered", reused: false,
			during: func(_ *testing.T, _ *conn, ctx context.Context) func(*testing.T) {
				ran := make(chan struct{})
				context.AfterFunc(ctx, func() { close(ran) })
				return func(*testing.T) { <-ran }
			}},
		{name: "CancelRequest", reused: false,
			during: func(t *testing.T, c *conn, ctx context.Context) func(*testing.T) {
				c.cancelQuery()
				if ctx.Err() != context.Canceled || causeOf(ctx) != errQueryCanceled {
					t.Fatalf("after CancelRequest: Err %v, cause %v", ctx.Err(), causeOf(ctx))
				}
				return nil
			}},
		{name: "statement_timeout", reused: false,
			during: func(t *testing.T, _ *conn, ctx context.Context) func(*testing.T) {
				cause := errors.New("statement timeout")
				tctx, cancel := context.WithTimeoutCause(ctx, time.Millisecond, cause)
				defer cancel()
				<-tctx.Done()
				if context.Cause(tctx) != cause || ctx.Err() != nil {
					t.Fatalf("timeout: cause %v, statement's Err %v", context.Cause(tctx), ctx.Err())
				}
				return nil
			}},
		{name: "CancelRequest reaches a derived timeout", reused: false,
			during: func(t *testing.T, c *conn, ctx context.Context) func(*testing.T) {
				tctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				c.cancelQuery()
				<-tctx.Done()
				if !errors.Is(tctx.Err(), context.Canceled) {
					t.Fatalf("derived timeout after CancelRequest: %v", tctx.Err())
				}
				return nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{}
			// A first statement that watches nothing, so that each case
			// runs under a reused context.
			first := c.statementContext(base)
			c.endStatement(first)
			ctx := c.statementContext(base)
			if ctx != first {
				t.Fatal("an unwatched statement's context was not reused")
			}
			check := tc.during(t, c, ctx)
			c.endStatement(ctx)
			if check != nil {
				check(t)
			}
			if c.cancelRunning(errQueryCanceled) {
				t.Fatal("a CancelRequest between statements found a statement")
			}
			next := c.statementContext(base)
			if got := next == ctx; got != tc.reused {
				t.Fatalf("next statement reused the context: %v, want %v", got, tc.reused)
			}
			if next.Err() != nil {
				t.Fatalf("next statement's context: %v", next.Err())
			}
			// The next statement, on a reused context or not, is cancelled.
			c.cancelQuery()
			if next.Err() != context.Canceled || next.Cause() != errQueryCanceled {
				t.Fatalf("next statement after CancelRequest: %v, %v", next.Err(), next.Cause())
			}
			c.endStatement(next)
		})
	}
}

// TestStatementContextInterrupted checks that the interrupt (Close,
// pg_terminate_backend) ends the running statement's context, reused or
// not, and every later one, with its cause.
func TestStatementContextInterrupted(t *testing.T) {
	base := context.WithoutCancel(context.Background())
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	c := &conn{raw: p1}
	s := c.statementContext(base)
	c.endStatement(s)
	s = c.statementContext(base)
	c.interrupt(errTerminated)
	<-s.Done()
	if causeOf(s) != errTerminated {
		t.Fatalf("running statement: %v", causeOf(s))
	}
	c.endStatement(s)
	s = c.statementContext(base)
	if causeOf(s) != errTerminated || s.Err() == nil {
		t.Fatalf("statement after the interrupt: %v", causeOf(s))
	}
}

// TestStatementContextAllocs checks that a statement whose context
// nothing watches allocates nothing for it (a prepared point SELECT's
// Execute allocated a cancellable context, its cancel func and, once the
// store asked for Done, its channel).
func TestStatementContextAllocs(t *testing.T) {
	base := context.WithoutCancel(context.Background())
	c := &conn{}
	c.endStatement(c.statementContext(base))
	if n := testing.AllocsPerRun(100, func() {
		s := c.statementContext(base)
		_ = s.Err()
		c.endStatement(s)
	}); n != 0 {
		t.Fatalf("%v allocations per statement, want 0", n)
	}
}
