package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// The commit protocol.
//
//  1. Read-only: nothing to send. The transaction committed at its read
//     timestamp.
//  2. One phase: when every write of the transaction is in the committing
//     batch and all of it lies on one tablet, [writes..., EndTxn] goes as
//     one batch and the tablet writes committed values directly: no intents,
//     no record (BatchResponse.OnePhaseCommit). If the tablet refuses
//     because the write timestamp would move, the writes are sent as
//     intents and the commit goes on as below; a READ COMMITTED
//     transaction lets it move instead (EndTxn.MayMoveCommit).
//  3. Two phases: the intents are already written (they were sent as the
//     transaction went). EndTxn{Commit} goes to the anchor's tablet, which
//     flips the record to COMMITTED (creating it if no heartbeat did) and
//     resolves the intents it holds. The commit is durable at that point;
//     the coordinator answers the caller and resolves the remaining intents
//     in the background (ResolveIntentRange per lock span, bounded
//     concurrency). A failed resolution is harmless: a reader meeting the
//     intent finds the record committed and resolves it itself.
//
// Rollback is the same with EndTxn{Commit: false} and aborted resolution.

// committing EndTxn timeouts: a Rollback must finish even when the caller's
// context is already done.
const rollbackTimeout = 10 * time.Second

// Commit commits the transaction. A retryable error means it did not commit
// and may be retried (DB.Txn does); any other error after EndTxn was sent
// (notably *kvpb.AmbiguousResultError) means the outcome is unknown.
func (t *Txn) Commit(ctx context.Context) error {
	if err := t.commit(ctx, nil); err != nil {
		return err
	}
	t.runAfterCommit(ctx)
	return nil
}

// CommitInBatch sends b's operations and commits in the same round. When b
// holds every write of the transaction and lies on one tablet, the commit
// takes one phase. b must hold only writes.
func (t *Txn) CommitInBatch(ctx context.Context, b *Batch) error {
	for _, r := range b.reqs {
		if !r.Method().IsTxnWrite() || r.Method() == kvpb.MethodDeleteRange {
			return fmt.Errorf("kv: CommitInBatch takes puts and deletes only, not %s", r.Method())
		}
	}
	// The buffer goes out first, as intents: b's writes come after it.
	if err := t.flushBuffer(ctx); err != nil {
		return err
	}
	if err := t.commit(ctx, b.reqs); err != nil {
		return err
	}
	t.runAfterCommit(ctx)
	// Writes committed in one phase answer with empty responses.
	b.Results = make([]Result, len(b.reqs))
	return nil
}

func (t *Txn) commit(ctx context.Context, writes []kvpb.Request) error {
	var wb *writeBuffer
	if len(writes) == 0 && t.buffering() {
		// The buffered writes commit as the committing batch: in one phase
		// if they are all the transaction wrote and lie on one tablet.
		t.mu.Lock()
		err := t.usableLocked()
		t.mu.Unlock()
		if err != nil {
			return err
		}
		writes, wb = t.takeBufferForCommit()
	}
	fromBuffer := wb != nil
	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	if len(writes) == 0 && !t.mu.wrote && !t.mu.memLockSent {
		t.finishLocked(txnCommitted)
		t.mu.commitTS = t.mu.proto.ReadTimestamp
		t.mu.Unlock()
		return nil
	}
	firstWrites := !t.mu.wrote
	t.mu.Unlock()
	// A transaction that holds unreplicated locks but has nothing left to
	// write (a savepoint rolled it all back) goes on to commitTwoPhase: its
	// EndTxn releases them.

	if len(writes) > 0 {
		if firstWrites {
			done, err := t.tryOnePhase(ctx, writes, wb)
			if err != nil && fromBuffer {
				err = t.bufferedSendErr(err)
			}
			if done || err != nil {
				return err
			}
		} else {
			if fromBuffer {
				if err := t.checkBufferedAndValidate(ctx, wb); err != nil {
					return err
				}
			}
			if _, err := t.send(ctx, writes, sendOpts{}); err != nil {
				if fromBuffer {
					err = t.bufferedSendErr(err)
				}
				return err
			}
		}
	}
	return t.commitTwoPhase(ctx)
}

// tryOnePhase attempts a one-phase commit of writes, the transaction's only
// writes; wb is the buffer they came from (nil: they were never buffered),
// whose keys must be checked before they are written (checkBuffered).
// done reports the transaction committed; !done with a nil error means
// the writes are now intents and the two-phase commit must follow.
//
// When the buffer's checks (RefreshRequests of its keys from their
// statements' snapshots) and the validation of the keys the writes depend
// on (strict RefreshRequests, txn_validate.go) lie on the writes' tablet,
// as on a node whose catalog and tables share one, they go in the
// committing batch itself, ahead of the writes: [checks..., writes...,
// EndTxn]. The tablet evaluates them under the batch's latches, before
// the writes and in the same evaluation, so they prove what the separate
// round trips proved (no version of a buffered key after its statement's
// snapshot up to the read timestamp, where the writes' own conflict check
// takes over; no version of a validated key above its registration at
// all, nor another transaction's intent), and it leaves the validated keys
// in its timestamp cache at the timestamp it commits at. A commit then
// makes one round trip, not two, while it holds its row locks. If the
// tablet refuses the one-phase commit the checks are made on their own,
// as when they lie elsewhere, before the writes go out as intents.
func (t *Txn) tryOnePhase(ctx context.Context, writes []kvpb.Request, wb *writeBuffer) (done bool, err error) {
	anchor := writes[0].Span().Key
	t.mu.Lock()
	if t.mu.proto.Key != nil {
		// Fixed when the first unreplicated lock was taken: a pusher that
		// met one aborts the record there, and a one-phase commit must
		// look there to find out.
		anchor = t.mu.proto.Key
	}
	t.mu.Unlock()
	// READ COMMITTED's reads need no refresh, and its buffered writes were
	// checked from their statements' snapshots up to the timestamp sent
	// (checkBuffered); the tablet checks from there up. So a read that
	// followed ours on one of the keys may move the commit above it.
	endTxn := &kvpb.EndTxnRequest{Key: anchor, Commit: true, MayMoveCommit: t.iso == ReadCommitted}
	endTxn.LockSpans = make([]kvpb.Span, 0, len(writes))
	for _, w := range writes {
		endTxn.LockSpans = append(endTxn.LockSpans, w.Span())
	}
	// checked: the buffer's keys were checked on their own (or need no
	// check), and the validation too if it was due.
	checked := wb == nil
	var reqs []kvpb.Request
	if checked {
		reqs = append(append(make([]kvpb.Request, 0, len(writes)+1), writes...), endTxn)
	} else {
		if err := t.serializableCheck(ctx); err != nil {
			return false, err
		}
		// One slice holds the batch with its checks folded in, [checks...,
		// writes..., EndTxn], and reqs is its tail (three slices were
		// made for the checks and one for the batch before).
		t.mu.Lock()
		size := len(wb.keys) + len(wb.ranges) + len(wb.locks) + len(t.mu.validate) + len(writes) + 1
		t.mu.Unlock()
		_, folded := t.bufferChecks(wb, false, make([]kvpb.Request, 0, size))
		_, folded = t.validationChecks(false, folded)
		checks := len(folded)
		folded = append(append(folded, writes...), endTxn)
		reqs = folded[checks:]
		if checks > 0 {
			single, err := t.db.ds.SingleTablet(ctx, folded)
			if err != nil {
				return false, err
			}
			if single {
				return t.sendOnePhase(ctx, writes, folded, endTxn, wb)
			}
		}
		if err := t.checkBufferedAndValidate(ctx, wb); err != nil {
			return false, err
		}
		checked = true
	}
	single, err := t.db.ds.SingleTablet(ctx, reqs)
	if err != nil {
		return false, err
	}
	if !single {
		_, err := t.send(ctx, writes, sendOpts{})
		return false, err
	}
	if err := t.serializableCheck(ctx); err != nil {
		return false, err
	}
	if err := t.validateAtCommit(ctx); err != nil {
		return false, err
	}
	t.mu.Lock()
	if len(t.mu.validate) > 0 {
		// Validated on their own, the keys are in their tablets' timestamp
		// caches at the timestamp sent, not above: a commit moved above
		// it could land above a schema change that writes a key after
		// the validation and reads the table at its own timestamp. So it
		// may not move; a refused one goes the two-phase way, which
		// validates again at the timestamp it commits at.
		endTxn.MayMoveCommit = false
	}
	t.mu.Unlock()
	return t.sendOnePhase(ctx, writes, reqs, endTxn, nil)
}

// sendOnePhase sends the one-phase batch reqs (writes and endTxn, led by
// checks of wb's keys if wb is not nil). If the tablet would have had to
// move the commit timestamp, which one phase cannot do, it writes intents
// instead (after checking wb's keys on their own) and leaves the decision
// whether the move is allowed to the two-phase path.
func (t *Txn) sendOnePhase(ctx context.Context, writes, reqs []kvpb.Request, endTxn *kvpb.EndTxnRequest, wb *writeBuffer) (done bool, err error) {
	t.markCommitSent()
	br, err := t.send(ctx, reqs, sendOpts{noHeartbeat: true})
	var retry *kvpb.TransactionRetryError
	if errors.As(err, &retry) && !t.isAborted() {
		t.clearRetryable()
		if wb != nil {
			// The refusal may have been one of the checks: made on their
			// own, they fail again if so, and nothing is written.
			if err := t.checkBufferedAndValidate(ctx, wb); err != nil {
				return false, err
			}
		}
		_, err = t.send(ctx, writes, sendOpts{})
		return false, err
	}
	if err != nil {
		return false, err
	}
	if err := t.finishCommitted(br); err != nil {
		return true, err
	}
	t.releaseUncovered(endTxn.LockSpans)
	return true, nil
}

// releaseUncovered releases, in the background, the unreplicated locks a
// transaction committed in one phase holds outside what it wrote (keys
// whose writes a savepoint rolled back, possibly on other tablets): the
// committing EndTxn released only those on its own tablet.
func (t *Txn) releaseUncovered(written []kvpb.Span) {
	t.mu.Lock()
	if !t.mu.memLockSent {
		t.mu.Unlock()
		return
	}
	meta := t.mu.proto.TxnMeta
	var rest []kvpb.Span
	for _, s := range t.mu.lockSpans.list() {
		if !slices.ContainsFunc(written, func(w kvpb.Span) bool { return spanCovers(w, s) }) {
			rest = append(rest, s)
		}
	}
	t.mu.Unlock()
	if len(rest) == 0 {
		return
	}
	t.db.goBackground(func() {
		ctx, cancel := context.WithTimeout(t.db.stopCtx, rollbackTimeout)
		defer cancel()
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: t.db.clock.Now()}}
		for _, s := range rest {
			if len(s.EndKey) == 0 {
				ba.Add(&kvpb.ResolveIntentRequest{Key: s.Key, Txn: meta, Status: kvpb.Committed, UnreplicatedOnly: true})
			} else {
				ba.Add(&kvpb.ResolveIntentRangeRequest{Key: s.Key, EndKey: s.EndKey, Txn: meta, Status: kvpb.Committed, UnreplicatedOnly: true})
			}
		}
		// Best effort: a lock left behind is removed by the first
		// transaction that meets it and finds this one committed... or,
		// without a record, expired.
		_, _ = t.db.ds.Send(ctx, ba)
	})
}

// spanCovers reports whether w covers all of s.
func spanCovers(w, s kvpb.Span) bool {
	wEnd, sEnd := w.EndKey, s.EndKey
	if len(wEnd) == 0 {
		return len(sEnd) == 0 && bytes.Equal(w.Key, s.Key)
	}
	if len(sEnd) == 0 {
		sEnd = keys.Next(s.Key)
	}
	return bytes.Compare(w.Key, s.Key) <= 0 && bytes.Compare(sEnd, wEnd) <= 0
}

// commitTwoPhase sends EndTxn{Commit} to the anchor and, once the record is
// committed, resolves the other intents in the background.
//
// The tablet commits only at the write timestamp we send. If a reader pushed
// the record higher, EndTxn fails with a TransactionRetryError; rather than
// restart, the coordinator reads the pushed timestamp back with a heartbeat
// and tries again, refreshing first under Serializable.
func (t *Txn) commitTwoPhase(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		if err := t.serializableCheck(ctx); err != nil {
			return err
		}
		if err := t.validateAtCommit(ctx); err != nil {
			return err
		}
		t.mu.Lock()
		endTxn := &kvpb.EndTxnRequest{Key: t.mu.proto.Key, Commit: true, LockSpans: append([]kvpb.Span(nil), t.mu.lockSpans.list()...)}
		t.mu.commitSent = true
		t.mu.Unlock()
		br, err := t.send(ctx, []kvpb.Request{endTxn}, sendOpts{})
		if err == nil {
			return t.finishCommitted(br)
		}
		var retry *kvpb.TransactionRetryError
		if !errors.As(err, &retry) || t.isAborted() {
			return err
		}
		t.db.pushedCommits.Add(1)
		if attempt >= maxInPlaceRetries {
			return err
		}
		t.clearRetryable()
		if err := t.learnRecordTimestamp(ctx, endTxn.Key); err != nil {
			return err
		}
	}
}

// learnRecordTimestamp heartbeats the record, which answers with the
// transaction's write timestamp as pushers left it.
func (t *Txn) learnRecordTimestamp(ctx context.Context, anchor []byte) error {
	_, err := t.send(ctx, []kvpb.Request{&kvpb.HeartbeatTxnRequest{Key: anchor, Now: t.db.clock.Now()}}, sendOpts{})
	return err
}

// serializableCheck refreshes a Serializable transaction's reads up to its
// write timestamp if that was pushed; a failed refresh restarts it.
func (t *Txn) serializableCheck(ctx context.Context) error {
	if t.iso != Serializable {
		return nil
	}
	t.mu.Lock()
	read, write := t.mu.proto.ReadTimestamp, t.mu.proto.WriteTimestamp
	t.mu.Unlock()
	if write.LessEq(read) {
		return nil
	}
	if err := t.refresh(ctx, write); err != nil {
		if !kvpb.IsRetryable(err) {
			return err
		}
		return t.setRetryable(err)
	}
	return nil
}

// finishCommitted records a successful commit and starts resolving intents.
func (t *Txn) finishCommitted(br *kvpb.BatchResponse) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The record is updated in place, under the lock: the batches sent
	// carried copies of it (send), so nothing else holds it. A copy here
	// was two objects per commit (TestFinishCommittedCopiesNoTxn).
	commitTS := t.mu.proto.WriteTimestamp
	if br.Txn != nil {
		commitTS = commitTS.Forward(br.Txn.WriteTimestamp)
		if br.Txn.Status == kvpb.Aborted {
			t.mu.aborted = true
			t.mu.retryErr = &kvpb.TransactionAbortedError{Reason: kvpb.AbortPushed}
			return t.mu.retryErr
		}
	}
	if t.iso == Serializable && t.mu.proto.ReadTimestamp.Less(commitTS) {
		// The tablet committed above the timestamp we read at (a push of
		// the record we could not see). Reads were refreshed up to the
		// timestamp we sent, so this is a broken contract below us.
		return fmt.Errorf("kv: serializable txn %s committed at %s above its read timestamp %s", t.mu.proto.Short(), commitTS, t.mu.proto.ReadTimestamp)
	}
	t.mu.proto.WriteTimestamp = commitTS
	t.mu.proto.Status = kvpb.Committed
	t.mu.commitTS = commitTS
	t.mu.onePC = br.OnePhaseCommit
	t.finishLocked(txnCommitted)
	// No resolution here: a committed EndTxn resolves every lock span
	// itself (kvpb's contract), the anchor's at once and the others in the
	// background. Resolving them from here too made every intent on another
	// tablet resolve twice, the second attempt queuing on the first's
	// latches.
	return nil
}

// Rollback aborts the transaction and removes its intents. Rolling back a
// finished transaction is a no-op for a rolled back one and ErrTxnFinished
// for a committed one. It works even when ctx is done, so callers can roll
// back on cancellation.
func (t *Txn) Rollback(ctx context.Context) error {
	t.mu.Lock()
	switch t.mu.state {
	case txnRolledBack:
		t.mu.Unlock()
		return nil
	case txnCommitted:
		t.mu.Unlock()
		return ErrTxnFinished
	}
	// Unreplicated locks (txn_buffer.go) need the EndTxn too: it releases
	// them (their spans are in lockSpans).
	wrote := t.mu.wrote || t.mu.memLockSent
	commitSent := t.mu.commitSent
	t.mu.buf = nil // buffered writes were never sent: nothing to undo
	txn := t.mu.proto.Clone()
	spans := append([]kvpb.Span(nil), t.mu.lockSpans.list()...)
	t.finishLocked(txnRolledBack)
	t.mu.Unlock()
	if !wrote {
		return nil
	}

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	ba := &kvpb.BatchRequest{}
	ba.Txn = txn
	ba.Add(&kvpb.EndTxnRequest{Key: txn.Key, Commit: false, LockSpans: spans})
	_, err := t.db.ds.Send(ctx, ba)
	var aborted *kvpb.TransactionAbortedError
	endTxnDone := err == nil
	if err != nil && !errors.As(err, &aborted) {
		err = fmt.Errorf("kv: rolling back txn %s: %w", txn.Short(), err)
	} else {
		err = nil
	}
	if err != nil && commitSent {
		// A committing EndTxn went out and its answer was lost (the
		// caller's context ended, the connection broke): the record may
		// be committed ("already committed" is the abort's answer then),
		// with intents on other tablets still waiting for their committed
		// resolution. Resolving them as aborted here would apply the
		// transaction in part (issue 13's partial transfer). The record
		// decides: readers that meet an intent push and resolve it.
		return err
	}
	// Otherwise the abort is confirmed, or no commit was ever sent: this
	// coordinator knows the transaction did not commit, so removing its
	// intents is safe even if the EndTxn failed.
	t.db.resolveAsync(txn.TxnMeta, kvpb.Aborted, spans, endTxnDone)
	return err
}

// markCommitSent records that a committing EndTxn is about to be sent.
func (t *Txn) markCommitSent() {
	t.mu.Lock()
	t.mu.commitSent = true
	t.mu.Unlock()
}

// finishLocked ends the transaction's life: no more operations, no more
// heartbeats.
func (t *Txn) finishLocked(s txnState) {
	t.mu.state = s
	t.db.active.remove(t)
	if t.mu.hb != nil {
		t.mu.hb.stop()
	}
	if fns := t.mu.onFinish; len(fns) > 0 {
		t.mu.onFinish = nil
		t.db.goBackground(func() {
			ctx, cancel := context.WithTimeout(t.db.stopCtx, afterCommitTimeout)
			defer cancel()
			for _, fn := range fns {
				fn(ctx)
			}
		})
	}
}

func (t *Txn) isAborted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.aborted
}

func (t *Txn) clearRetryable() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.retryErr = nil
}

// resolveAsync resolves meta's intents in spans in the background, except
// (skipAnchor) on the anchor's tablet, whose EndTxn resolved them already.
// Failures are dropped: readers that meet a leftover intent resolve it
// themselves.
func (db *DB) resolveAsync(meta kvpb.TxnMeta, status kvpb.TxnStatus, spans []kvpb.Span, skipAnchor bool) {
	if len(spans) == 0 {
		return
	}
	ba := &kvpb.BatchRequest{}
	anchorDesc, anchorKnown := db.cache.cached(meta.Key, false)
	for _, s := range spans {
		if skipAnchor && anchorKnown && anchorDesc.ContainsSpan(s) {
			continue
		}
		if len(s.EndKey) == 0 {
			ba.Add(&kvpb.ResolveIntentRequest{Key: s.Key, Txn: meta, Status: status})
		} else {
			ba.Add(&kvpb.ResolveIntentRangeRequest{Key: s.Key, EndKey: s.EndKey, Txn: meta, Status: status})
		}
	}
	if len(ba.Requests) == 0 {
		return
	}
	db.goBackground(func() {
		select {
		case db.resolveSem <- struct{}{}:
		case <-db.stopCtx.Done():
			return
		}
		defer func() { <-db.resolveSem }()
		_, _ = db.ds.Send(db.stopCtx, ba)
	})
}
