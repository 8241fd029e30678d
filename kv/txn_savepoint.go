package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// Savepoints (SQL SAVEPOINT, ROLLBACK TO SAVEPOINT, RELEASE SAVEPOINT), as
// CockroachDB does them:
//
//   - Every batch that writes carries a higher TxnMeta.Sequence than the one
//     before (prepareWritesLocked), and every intent remembers, in its lock
//     record, the transaction's earlier values of its key with their
//     sequence numbers (mvcc's "Savepoints").
//   - A savepoint is the current sequence number. Rolling back to it adds
//     (its sequence, current sequence] to Transaction.IgnoredSeqNums, which
//     every later request carries (the proto is cloned into each batch):
//     the transaction's reads and conditional writes skip values written
//     at ignored sequence numbers, and the committed record keeps the
//     ranges so that whoever resolves an intent, at commit or later,
//     commits the newest value not ignored or none.
//   - Releasing a savepoint changes nothing below the client.
//
// Locks are not released by a rollback: an intent whose every value was
// rolled back stays a lock (other transactions still wait on it) until the
// transaction ends, as in CockroachDB. PostgreSQL releases row locks taken
// after the savepoint; the difference is only in blocking, never in what
// anyone reads.
//
// Sequence numbers are per writing batch, not per request: a savepoint
// always falls between batches, so a finer grain would name nothing more.
// Sub-batches of one batch on several tablets share the sequence, which is
// what lets a rollback undo the parts of a batch that succeeded on some
// tablets when another part failed (e.g. with a ConditionFailedError).

// SavepointToken is a point in a transaction's writes that
// RollbackToSavepoint can return to. The zero value is not a savepoint.
type SavepointToken struct {
	txnID uuid.UUID
	epoch int32
	seq   int32
}

// Errors of the savepoint API.
var (
	// ErrSavepointAfterRetryableError: a rollback to a savepoint asked of
	// a transaction that failed with a retryable error (or was aborted).
	// Its reads are no longer valid at any savepoint: the whole
	// transaction must restart. The error returned wraps both this and the
	// retryable error, so kvpb.IsRetryable still holds.
	ErrSavepointAfterRetryableError = errors.New("kv: cannot roll back to a savepoint after a retryable error; the transaction must restart")
	// ErrSavepointInvalid: the token was not taken in this transaction, or
	// was taken before it restarted (a new epoch discards every write of
	// the old one, savepoints included).
	ErrSavepointInvalid = errors.New("kv: savepoint does not belong to this transaction attempt")
)

// Savepoint returns a token for the transaction's current point: a later
// RollbackToSavepoint with it undoes every write made after this call. It
// costs nothing below the client.
func (t *Txn) Savepoint(ctx context.Context) (SavepointToken, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return SavepointToken{}, err
	}
	return SavepointToken{txnID: t.mu.proto.ID, epoch: t.mu.proto.Epoch, seq: t.mu.proto.Sequence}, nil
}

// StartSavepoint returns the token Savepoint would have returned when
// the transaction was made, before any write: its first epoch at sequence
// 0. It is for a caller that made the transaction lazily, inside the
// statement it would have taken a savepoint before (sql/session's
// statement retry, whose statement may read without a transaction at
// all). Like a token taken then, it is invalid once the transaction
// restarted.
func (t *Txn) StartSavepoint() SavepointToken {
	t.mu.Lock()
	defer t.mu.Unlock()
	return SavepointToken{txnID: t.mu.proto.ID}
}

// RollbackToSavepoint undoes the writes made since sp was taken: later
// reads of the transaction no longer see them and its commit does not
// write them. Writes made before sp, and the transaction itself, stay; sp
// stays valid (it can be rolled back to again). Locks taken since sp are
// kept until the transaction ends.
//
// It is allowed after a non-retryable error, such as a
// *kvpb.ConditionFailedError or a *kvpb.WriteIntentError under
// WaitError, whose batch may have written on some tablets: those writes
// are undone too. After a retryable error it fails with an error wrapping
// ErrSavepointAfterRetryableError and the retryable error.
func (t *Txn) RollbackToSavepoint(ctx context.Context, sp SavepointToken) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.savepointUsableLocked(sp); err != nil {
		return err
	}
	if cur := t.mu.proto.Sequence; cur > sp.seq {
		// A fresh slice: batches in flight or kept by callers hold the old
		// one.
		t.mu.proto.IgnoredSeqNums = kvpb.AddIgnoredSeqRange(t.mu.proto.IgnoredSeqNums, kvpb.SeqRange{Start: sp.seq + 1, End: cur})
	}
	t.forgetMarksAfterLocked(sp.seq)
	t.forgetAfterCommitAfterLocked(sp.seq)
	t.forgetValidationsAfterLocked(sp.seq)
	return nil
}

// ReleaseSavepoint forgets sp (SQL RELEASE SAVEPOINT): the writes made
// since it simply belong to the enclosing savepoint or transaction, so
// nothing changes below the client. It fails as RollbackToSavepoint does
// for a token of another transaction or attempt, or after a retryable
// error (with that error).
func (t *Txn) ReleaseSavepoint(ctx context.Context, sp SavepointToken) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return err
	}
	return t.checkSavepointLocked(sp)
}

// savepointUsableLocked returns why the transaction cannot roll back to
// sp, if it cannot.
func (t *Txn) savepointUsableLocked(sp SavepointToken) error {
	if t.mu.state != txnPending {
		return ErrTxnFinished
	}
	if err := t.usableLocked(); err != nil {
		return fmt.Errorf("%w: %w", ErrSavepointAfterRetryableError, err)
	}
	return t.checkSavepointLocked(sp)
}

func (t *Txn) checkSavepointLocked(sp SavepointToken) error {
	switch {
	case sp.txnID != t.mu.proto.ID:
		return ErrSavepointInvalid
	case sp.epoch != t.mu.proto.Epoch:
		return fmt.Errorf("%w: taken at epoch %d, the transaction restarted at epoch %d", ErrSavepointInvalid, sp.epoch, t.mu.proto.Epoch)
	case sp.seq > t.mu.proto.Sequence:
		// Sequences only grow within an epoch: this cannot be ours.
		return fmt.Errorf("%w: savepoint at sequence %d is ahead of the transaction's %d", ErrSavepointInvalid, sp.seq, t.mu.proto.Sequence)
	}
	return nil
}
