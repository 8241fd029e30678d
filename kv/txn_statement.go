package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
)

// Statement-level retries under READ COMMITTED, as CockroachDB does them.
//
// PostgreSQL's READ COMMITTED never fails a statement because another
// transaction changed a row concurrently: an UPDATE that meets a row being
// updated waits for the other transaction and re-evaluates on the newest
// version. Cairn's equivalent works a statement at a time: each statement
// reads a fresh snapshot (Step), its writes wait on other transactions'
// locks in the tablets, and when it meets a conflict it cannot resolve in
// place (a committed version above its snapshot whose reads cannot be
// refreshed, a read within the uncertainty interval) the SQL layer rolls
// the statement back to a savepoint taken before it and runs it again at a
// new snapshot. That is sound for READ COMMITTED only: no guarantee spans
// statements there, so the transaction's earlier statements do not depend
// on the snapshot the retried one read at. The other levels restart the
// whole transaction (PrepareForRetry), as the client must.

// ErrStatementNotRetryable: RetryStatement was asked of a transaction
// that cannot retry a statement on its own (not READ COMMITTED, or
// aborted: only a new transaction helps). The error returned wraps this
// and the transaction's retryable error.
var ErrStatementNotRetryable = errors.New("kv: the statement cannot be retried within its transaction")

// RetryStatement undoes a failed statement of a READ COMMITTED
// transaction so that it can run again: the writes made since sp (taken
// before the statement started) are rolled back as by RollbackToSavepoint,
// the retryable error the transaction was refusing operations with is
// cleared, and the transaction moves to a fresh snapshot above the
// conflict (the statement's read spans are forgotten, as at Step). Locks
// taken by the undone attempt are kept until the transaction ends.
//
// It fails, wrapping ErrStatementNotRetryable, when the transaction is not
// READ COMMITTED or was aborted (a deadlock victim, pushed out by a
// higher-priority or expired): the caller must then fail the statement.
// With no retryable error pending it only rolls back to sp and steps, so a
// caller may use it for any statement it wants to rerun.
func (t *Txn) RetryStatement(ctx context.Context, sp SavepointToken) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.state != txnPending {
		return ErrTxnFinished
	}
	if t.mu.hb != nil && t.mu.hb.abortedErr() != nil {
		t.mu.aborted = true
	}
	if t.iso != ReadCommitted || t.mu.aborted || t.mu.bufLost {
		cause := t.mu.retryErr
		if cause == nil {
			cause = fmt.Errorf("isolation %s", t.iso)
		}
		return fmt.Errorf("%w: %w", ErrStatementNotRetryable, cause)
	}
	if err := t.checkSavepointLocked(sp); err != nil {
		return err
	}
	if cur := t.mu.proto.Sequence; cur > sp.seq {
		t.mu.proto.IgnoredSeqNums = kvpb.AddIgnoredSeqRange(t.mu.proto.IgnoredSeqNums, kvpb.SeqRange{Start: sp.seq + 1, End: cur})
	}
	// The new snapshot must be above the version the statement tripped
	// on, whatever our clock says of it.
	ts := t.db.clock.Now().Forward(t.mu.proto.WriteTimestamp)
	if target, ok := inPlaceTarget(t.mu.retryErr); ok {
		ts = ts.Forward(target)
	}
	t.mu.proto.ReadTimestamp = ts
	t.mu.proto.WriteTimestamp = ts
	t.mu.proto.GlobalUncertaintyLimit = t.db.uncertaintyLimit(ts)
	t.resetObservationsLocked()
	t.mu.readSpans.reset()
	t.forgetValidationsAfterLocked(sp.seq)
	t.mu.retryErr = nil
	return nil
}
