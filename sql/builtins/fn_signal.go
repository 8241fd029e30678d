package builtins

import (
	"time"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// pg_cancel_backend and pg_terminate_backend: the functions check their
// arguments; the session's EvalContext finds the backend, applies
// PostgreSQL's privilege rules and signals it.

// BackendSignals is what the signalling functions need of the node's
// sessions. The session's EvalContext implements it; a context that does
// not (FixedContext) makes them fail with 55000.
type BackendSignals interface {
	// SignalBackend cancels the running statement of the session with
	// process id pid (terminate false), or ends that session (true),
	// then waiting up to wait for it to be gone (0: not at all). It
	// returns false, having sent the client a WARNING, when there is no
	// such session or it did not end within wait; 42501 when the caller
	// may not signal it.
	SignalBackend(pid int32, terminate bool, wait time.Duration) (bool, error)
}

// JobCanceller asks a running job to stop (CANCEL JOB, cairn_cancel_job);
// the session's EvalContext implements it.
type JobCanceller interface {
	// CancelJob asks job id to stop: 42704 if there is no such job, 55000
	// if it is not running.
	CancelJob(id int64) error
}

func signalsOf(ctx EvalContext) (BackendSignals, error) {
	if bs, ok := ctx.(BackendSignals); ok {
		return bs, nil
	}
	return nil, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "server processes cannot be signalled in this context")
}

func init() {
	registerFn("cairn_cancel_job", Overload{Args: []*types.T{types.Int8}, Return: Fixed(types.Bool), Strict: true, Volatility: Volatile,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			jc, ok := ctx.(JobCanceller)
			if !ok {
				return nil, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "jobs cannot be canceled in this context")
			}
			if err := jc.CancelJob(i64(a[0])); err != nil {
				return nil, err
			}
			return types.DBool(true), nil
		}})
	registerFn("pg_cancel_backend", Overload{Args: []*types.T{types.Int4}, Return: Fixed(types.Bool), Strict: true, Volatility: Volatile,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			bs, err := signalsOf(ctx)
			if err != nil {
				return nil, err
			}
			ok, err := bs.SignalBackend(int32(i64(a[0])), false, 0)
			return types.DBool(ok), err
		}})
	terminate := func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		var wait time.Duration
		if len(a) > 1 {
			ms := i64(a[1])
			if ms < 0 {
				return nil, pgerror.New(pgerrcode.NumericValueOutOfRange, "\"timeout\" must not be negative")
			}
			wait = time.Duration(min(ms, int64(time.Duration(1<<62)/time.Millisecond))) * time.Millisecond
		}
		bs, err := signalsOf(ctx)
		if err != nil {
			return nil, err
		}
		ok, err := bs.SignalBackend(int32(i64(a[0])), true, wait)
		return types.DBool(ok), err
	}
	registerFn("pg_terminate_backend",
		Overload{Args: []*types.T{types.Int4}, Return: Fixed(types.Bool), Strict: true, Volatility: Volatile, Fn: terminate},
		Overload{Args: []*types.T{types.Int4, types.Int8}, Return: Fixed(types.Bool), Strict: true, Volatility: Volatile, Fn: terminate})
}
