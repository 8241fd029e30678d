package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

var _ builtins.BackendSignals = (*evalCtx)(nil)

// SignalBackend implements builtins.BackendSignals over the node's session
// registry, with PostgreSQL 15's rules (pg_signal_backend in signalfuncs.c):
// only a superuser may signal a superuser's session; otherwise the caller
// needs the privileges of the target's role, or of pg_signal_backend
// (which Cairn, having no predefined roles besides pg_database_owner, grants
// only through superuser). An unknown pid is a WARNING and false.
func (e *evalCtx) SignalBackend(pid int32, terminate bool, wait time.Duration) (bool, error) {
	x := e.x
	s := x.s
	var target *activity
	if pid > 0 {
		target = s.b.sessions.get(uint32(pid))
	}
	if target == nil || target.control == nil {
		e.warn(fmt.Sprintf("PID %d is not a PostgreSQL server process", pid))
		return false, nil
	}
	if target != s.act {
		a, err := catalog.NewAuthorizer(x.ctx, s.catalogReader(s.kvTxn()), s.user, nil)
		if err != nil {
			return false, err
		}
		what, whose := "cancel superuser query", "the role whose query is being canceled"
		if terminate {
			what, whose = "terminate superuser process", "the role whose process is being terminated"
		}
		if target.super && !a.Superuser {
			return false, pgerror.New(pgerrcode.InsufficientPrivilege, "must be a superuser to %s", what)
		}
		if !a.HasRole(target.user) && !a.HasRole("pg_signal_backend") {
			return false, pgerror.New(pgerrcode.InsufficientPrivilege, "must be a member of %s or member of pg_signal_backend", whose)
		}
	}
	if !terminate {
		target.control.CancelStatement()
		return true, nil
	}
	gone := target.control.Terminate()
	if wait <= 0 {
		return true, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-gone:
		return true, nil
	case <-t.C:
		e.warn(fmt.Sprintf("backend with PID %d did not terminate within %d milliseconds", pid, wait.Milliseconds()))
		return false, nil
	case <-x.ctx.Done():
		// Our own session, or a cancel of this statement.
		return false, x.ctx.Err()
	}
}

// warn sends a WARNING to the statement's client.
func (e *evalCtx) warn(msg string) {
	if x := e.x; x.w != nil {
		x.s.notice(x.w, "WARNING", pgerrcode.Warning, msg)
	}
}

// CancelJob is builtins.JobCanceller: CANCEL JOB asks the job to stop
// through its cancel key (jobs.RequestCancel); the job rolls back.
func (e *evalCtx) CancelJob(id int64) error {
	// Only index builds watch their cancel key (sql/ddl index_job.go); a
	// table move is cancelled through its statement.
	if r, ok, err := jobs.Get(e.x.ctx, e.x.s.b.db, id); err != nil {
		return err
	} else if ok && r.Type != ddl.IndexJobType {
		return pgerror.New(pgerrcode.FeatureNotSupported, "CANCEL JOB of a %s job is not supported", r.Type).
			WithHint("Cancel the statement running it (pg_cancel_backend).")
	}
	err := jobs.RequestCancel(e.x.ctx, e.x.s.b.db, id)
	switch {
	case errors.Is(err, jobs.ErrNoJob):
		return pgerror.New(pgerrcode.UndefinedObject, "job with ID %d does not exist", id)
	case errors.Is(err, jobs.ErrNotRunning):
		return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "job %d is not running", id)
	}
	return err
}
