package storage

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Pebble treats some failures as fatal — above all a WAL write or sync that
// fails under a commit, after which its commit pipeline cannot go on — and
// reports them through Logger.Fatalf, which by default exits the process.
// An engine must instead refuse to acknowledge the write and let the node
// decide (a node stops serving and restarts on a failed disk), so Fatalf
// panics with a fatalPanic, the engine entry points that can trigger it
// (Commit, ApplyBatchRepr, Ingest) recover that value only, and the engine
// turns failed: later writes return ErrEngineFailed without touching Pebble.
// A fatal error on a background goroutine (flush, compaction) has no caller
// to return to and still crashes the process, as Pebble intends.

// fatalPanic is the value fatalLogger panics with.
type fatalPanic struct {
	msg   string
	cause error
}

// fatalLogger forwards Pebble's logs to inner (nil: dropped) and turns
// Fatalf into a fatalPanic.
type fatalLogger struct{ inner pebble.Logger }

func (l fatalLogger) Infof(format string, args ...any) {
	if l.inner != nil {
		l.inner.Infof(format, args...)
	}
}

func (l fatalLogger) Errorf(format string, args ...any) {
	if l.inner != nil {
		l.inner.Errorf(format, args...)
	}
}

func (l fatalLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.inner != nil {
		l.inner.Errorf("%s", msg)
	}
	p := fatalPanic{msg: msg}
	for _, a := range args {
		if err, ok := a.(error); ok {
			p.cause = err
			break
		}
	}
	panic(p)
}

// failure returns the error that failed the engine, or nil.
func (e *Engine) failure() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// catchFatal, deferred by an entry point, converts a fatalPanic into *errp
// and fails the engine; any other panic continues.
func (e *Engine) catchFatal(errp *error, op string) {
	r := recover()
	if r == nil {
		return
	}
	p, ok := r.(fatalPanic)
	if !ok {
		panic(r)
	}
	err := fmt.Errorf("%w: %s", ErrEngineFailed, p.msg)
	if p.cause != nil {
		err = fmt.Errorf("%w: %w", ErrEngineFailed, p.cause)
	}
	if e.failed.CompareAndSwap(nil, &err) && e.onFatal != nil {
		e.onFatal(err)
	}
	*errp = fmt.Errorf("storage: %s: %w", op, err)
}
