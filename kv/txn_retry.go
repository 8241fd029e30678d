package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// PrepareForRetry moves a transaction that failed with a retryable error to
// a new epoch: same ID, record and anchor; a fresh read timestamp (now);
// read spans, ignored sequence numbers and savepoints forgotten. Intents
// of the old epoch stay covered by the lock spans and are overwritten or
// discarded when the transaction finishes. It returns ErrTxnAborted if the
// transaction was aborted: the caller must roll it back and start a new
// one.
func (t *Txn) PrepareForRetry(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.state != txnPending {
		return ErrTxnFinished
	}
	if t.mu.hb != nil && t.mu.hb.abortedErr() != nil {
		t.mu.aborted = true
	}
	if t.mu.aborted {
		return ErrTxnAborted
	}
	if t.mu.retryErr == nil {
		return nil
	}
	ts := t.db.clock.Now().Forward(t.mu.proto.WriteTimestamp)
	t.mu.proto.Epoch++
	t.mu.proto.ReadTimestamp = ts
	t.mu.proto.WriteTimestamp = ts
	// The uncertainty limit stays: it is about values written before the
	// transaction started in real time, which a restart does not change.
	t.mu.proto.GlobalUncertaintyLimit = t.mu.proto.GlobalUncertaintyLimit.Forward(ts)
	// Every write of the old epoch is discarded at commit anyway, and the
	// savepoints taken in it are void (ErrSavepointInvalid).
	t.mu.proto.IgnoredSeqNums = nil
	t.mu.readSpans.reset()
	t.mu.created = nil
	t.mu.afterCommit = nil
	clear(t.mu.validate)
	t.mu.validate, t.mu.validateIdx = nil, nil
	t.mu.validatedAt = hlc.Timestamp{}
	t.mu.retryErr = nil
	// The old epoch's buffered writes are discarded like its intents; a
	// transaction that sent none buffers again.
	t.mu.buf = nil
	t.mu.bufLost = false
	if t.mu.bufWanted && !t.mu.wrote {
		t.mu.buf = newWriteBuffer()
	}
	return nil
}

// priority returns the transaction's priority.
func (t *Txn) priority() int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.proto.Priority
}

// Txn runs fn in a transaction and commits it (unless fn committed it, e.g.
// with CommitInBatch). On a retryable error it retries: at a new epoch of the
// same transaction, or in a new transaction (keeping the old priority as a
// floor) if the old one was aborted. Attempts are bounded by
// Options.MaxRetries, with jittered exponential backoff between them; when
// they run out it returns a *RetriesExhaustedError wrapping the last error.
// On a non-retryable error the transaction is rolled back and the error
// returned. fn must not start goroutines that outlive it, and must be safe
// to run more than once.
func (db *DB) Txn(ctx context.Context, iso IsolationLevel, fn func(ctx context.Context, txn *Txn) error) error {
	return db.runTxn(ctx, iso, false, fn)
}

// BackgroundTxn is Txn for work no client waits on (a schema-change job's
// steps and copies): its first transaction has the lowest ordinary
// priority, so in a deadlock with a client's transaction it is the victim
// (tablet's deadlockVictim picks the lower priority) and the client's
// statement goes on: an online change keeps its promise that writers do
// not fail because of it. Its retries keep that priority (Txn's floor
// rule would give them a random one, which could deadlock with the same
// client again and win); a job that keeps losing runs out of retries and
// fails, to be rolled back and run again, rather than fail a client.
func (db *DB) BackgroundTxn(ctx context.Context, iso IsolationLevel, fn func(ctx context.Context, txn *Txn) error) error {
	return db.runTxn(ctx, iso, true, fn)
}

func (db *DB) runTxn(ctx context.Context, iso IsolationLevel, background bool, fn func(ctx context.Context, txn *Txn) error) error {
	txn := db.NewTxn(ctx, "", iso)
	if background {
		txn.lowestPriority()
	}
	for attempt := 1; ; attempt++ {
		err := fn(ctx, txn)
		if err == nil {
			err = txn.commitIfPending(ctx)
		}
		if err == nil {
			return nil
		}
		if !kvpb.IsRetryable(err) {
			if rbErr := txn.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, ErrTxnFinished) {
				return errors.Join(err, rbErr)
			}
			return err
		}
		if attempt > db.opts.MaxRetries {
			_ = txn.Rollback(ctx)
			return &RetriesExhaustedError{Attempts: attempt, Last: err}
		}
		if berr := db.backoff(ctx, attempt); berr != nil {
			_ = txn.Rollback(ctx)
			return fmt.Errorf("kv: gave up waiting to retry after %w: %w", err, berr)
		}
		switch perr := txn.PrepareForRetry(ctx); {
		case perr == nil:
		case errors.Is(perr, ErrTxnAborted), errors.Is(perr, ErrTxnFinished):
			// Finished covers a commit that failed after the
			// transaction was marked done; both need a new transaction.
			prio := txn.priority()
			_ = txn.Rollback(ctx)
			txn = db.newTxn(ctx, "", iso, prio)
			if background {
				txn.lowestPriority()
			}
		default:
			return perr
		}
	}
}

// lowestPriority gives a transaction that has sent nothing yet the
// lowest ordinary priority (BackgroundTxn).
func (t *Txn) lowestPriority() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.proto.Priority = 1
}

// commitIfPending commits unless the closure already finished the
// transaction.
func (t *Txn) commitIfPending(ctx context.Context) error {
	t.mu.Lock()
	state := t.mu.state
	t.mu.Unlock()
	if state == txnCommitted {
		return nil
	}
	return t.Commit(ctx)
}

// backoff sleeps before attempt+1: exponential from RetryBackoff, capped at
// MaxRetryBackoff, with full jitter so contenders spread out.
func (db *DB) backoff(ctx context.Context, attempt int) error {
	d := db.opts.RetryBackoff << min(attempt-1, 20)
	d = min(d, db.opts.MaxRetryBackoff)
	d = time.Duration(rand.Int64N(int64(d)) + 1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
