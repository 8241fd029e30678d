package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// hookCtx is a caller's context like pgwire's statement context: it runs
// functions once cancelled (AfterFunc) and counts the calls to Done, after
// which pgwire could not reuse it for the connection's next statement.
type hookCtx struct {
	context.Context
	dones atomic.Int32
	mu    sync.Mutex
	ended bool
	done  chan struct{} // made by the first Done
	funcs map[*func()]struct{}
}

func (c *hookCtx) Done() <-chan struct{} {
	c.dones.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.ended {
			close(c.done)
		}
	}
	return c.done
}

func (c *hookCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return context.Canceled
	}
	return nil
}

func (c *hookCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.funcs == nil {
		c.funcs = map[*func()]struct{}{}
	}
	p := &f
	c.funcs[p] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.funcs[p]
		delete(c.funcs, p)
		return ok
	}
}

func (c *hookCtx) cancel() {
	c.mu.Lock()
	c.ended = true
	if c.done != nil {
		close(c.done)
	}
	funcs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for f := range funcs {
		go (*f)()
	}
}

func (c *hookCtx) hooked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.funcs)
}

// TestReqCtxDoneHooksCaller: a request that waits (a write's proposer asks
// its context for Done) hooks onto a caller's context that offers
// AfterFunc without asking it for Done, so pgwire can hand its statement
// context to the next statement (pgwire invariant 11); the request still
// ends when the caller's context does, derived contexts with it, and its
// end unhooks it. The merge through context.WithCancel asked the caller
// for Done, and a Done and release cost 10 objects here (the reqCtx and
// this fake's two per AfterFunc included); the hooks cost 7.
func TestReqCtxDoneHooksCaller(t *testing.T) {
	stop, cancelStop := context.WithCancel(context.Background())
	defer cancelStop()

	caller := &hookCtx{Context: context.Background()}
	rc := &reqCtx{Context: caller, stop: stop}
	done := rc.Done()
	if n := caller.dones.Load(); n != 0 {
		t.Fatalf("Done of the request asked its caller's context for Done %d times, want none", n)
	}
	derived, cancelDerived := context.WithCancel(rc)
	defer cancelDerived()
	caller.cancel()
	<-done
	<-derived.Done()
	if !errors.Is(rc.Err(), context.Canceled) || !errors.Is(derived.Err(), context.Canceled) {
		t.Fatalf("after the caller's end: errors %v, %v", rc.Err(), derived.Err())
	}
	rc.release()

	// Released before either end: unhooked from the caller, and ended.
	caller = &hookCtx{Context: context.Background()}
	rc = &reqCtx{Context: caller, stop: stop}
	_ = rc.Done()
	if caller.hooked() != 1 {
		t.Fatalf("%d hooks on the caller's context, want 1", caller.hooked())
	}
	rc.release()
	if caller.hooked() != 0 {
		t.Fatalf("%d hooks left on the caller's context after the request", caller.hooked())
	}
	if rc.Err() == nil {
		t.Fatal("a released request's context has no error")
	}
	if caller.dones.Load() != 0 {
		t.Fatalf("the caller's context was asked for Done %d times", caller.dones.Load())
	}

	if raceEnabled {
		return
	}
	caller = &hookCtx{Context: context.Background()}
	_ = caller.AfterFunc(func() {})() // its map made, as a reused statement context's is
	got := testing.AllocsPerRun(100, func() {
		rc := &reqCtx{Context: caller, stop: stop}
		_ = rc.Done()
		rc.release()
	})
	if got > 7 {
		t.Fatalf("a request's Done and release allocate %.1f objects, want at most 7", got)
	}
	t.Logf("a request's Done and release: %.1f objects", got)
}
