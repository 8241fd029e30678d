package tablet

import (
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// Transaction records: EndTxn, HeartbeatTxn, PushTxn, QueryTxn. A record
// lives on the tablet holding its anchor key. A final record (committed or
// aborted) lives only as long as intents it names may remain: EndTxn
// writes none when it resolves every intent in its own batch, and deletes
// the one there is; otherwise the record stays until the intents elsewhere
// are resolved (resolveAsync, or the GC queue's cleanup) and a GC request
// deletes it. Either way the leaseholder keeps a tombstone
// (txntombstone.go), so a late or replayed HeartbeatTxn or EndTxn cannot
// create the record again and revive the transaction, and a pusher that
// finds no record knows the transaction can never commit (invariant 8).

// canCreateTxnRecord reports whether a record may be created for txn
// (anchored on this tablet): not if one was deleted, or may have been.
func (ec *evalCtx) canCreateTxnRecord(txn kvpb.TxnMeta) bool {
	return ec.r.tombs.canCreate(txn.ID, txn.MinTimestamp)
}

// putTxnRecord writes rec in the evaluation's batch, marking its
// transaction first as one that may have a record (txnrecordmarks.go):
// every record this replica writes is written here.
func (ec *evalCtx) putTxnRecord(rec *kvpb.Transaction) error {
	ec.r.recMarks.mark(rec.ID, ec.r.clock)
	return mvcc.PutTxnRecord(ec.b, rec)
}

func (ec *evalCtx) endTxn(req *kvpb.EndTxnRequest) (kvpb.Response, error) {
	txn := ec.txn
	rec, found, err := mvcc.GetTxnRecord(ec.b, req.Key, txn.ID)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if found {
		switch rec.Status {
		case kvpb.Aborted:
			if req.Commit {
				return nil, &kvpb.TransactionAbortedError{Reason: ec.r.abortReason(txn.ID)}
			}
			// Rolling back an aborted transaction is idempotent; it still
			// cleans up the intents the client names.
			final := rec.Clone()
			if len(req.LockSpans) > 0 {
				final.LockSpans = append([]kvpb.Span(nil), req.LockSpans...)
			}
			if err := ec.finish(final, kvpb.AbortClient); err != nil {
				return nil, wrapEval(req, err)
			}
			return &kvpb.EndTxnResponse{}, nil
		case kvpb.Committed:
			return nil, &kvpb.TransactionStatusError{Txn: txn.TxnMeta, Status: kvpb.Committed, Msg: "already committed"}
		}
		if txn.Epoch < rec.Epoch {
			return nil, &kvpb.TransactionStatusError{Txn: txn.TxnMeta, Status: rec.Status,
				Msg: fmt.Sprintf("EndTxn at epoch %d but the record is at epoch %d", txn.Epoch, rec.Epoch)}
		}
		txn.WriteTimestamp = txn.WriteTimestamp.Forward(rec.WriteTimestamp)
	} else if !ec.canCreateTxnRecord(txn.TxnMeta) {
		// Its record was finalised and deleted (or may have been): a
		// commit cannot happen now; a rollback still resolves the intents
		// the client names, as aborted, without a record.
		if st, ok := ec.r.tombs.status(txn.ID); ok && st == kvpb.Committed {
			return nil, &kvpb.TransactionStatusError{Txn: txn.TxnMeta, Status: kvpb.Committed, Msg: "already committed"}
		}
		if req.Commit {
			return nil, &kvpb.TransactionAbortedError{Reason: ec.r.abortReasonOr(txn.ID, kvpb.AbortTimestampCache)}
		}
		final := txn.Clone()
		final.Status = kvpb.Aborted
		final.LockSpans = append([]kvpb.Span(nil), req.LockSpans...)
		if err := ec.finish(final, kvpb.AbortClient); err != nil {
			return nil, wrapEval(req, err)
		}
		return &kvpb.EndTxnResponse{}, nil
	}
	final := txn.Clone()
	final.LockSpans = append([]kvpb.Span(nil), req.LockSpans...)
	if req.Commit {
		// Commit only at the timestamp the coordinator asked for: if this
		// batch or a pusher moved it, the coordinator must decide (refresh
		// or restart) before committing higher.
		if asked := ec.ba.Txn.WriteTimestamp; asked.Less(final.WriteTimestamp) {
			return nil, &kvpb.TransactionRetryError{
				Reason: kvpb.RetrySerializable,
				Detail: fmt.Sprintf("commit of %s asked at %s but its write timestamp was pushed to %s", txn.Short(), asked, final.WriteTimestamp),
			}
		}
		final.Status = kvpb.Committed
	} else {
		final.Status = kvpb.Aborted
	}
	if err := ec.finish(final, kvpb.AbortClient); err != nil {
		return nil, wrapEval(req, err)
	}
	return &kvpb.EndTxnResponse{}, nil
}

// finish resolves the transaction's intents, those on this tablet in the
// same batch, the others after Apply, and leaves its final record only if
// there are others: with none, the record (if any) is deleted and a
// tombstone kept instead (invariant 8).
func (ec *evalCtx) finish(final *kvpb.Transaction, reason kvpb.AbortReason) error {
	var foreign []kvpb.Span
	for _, s := range final.LockSpans {
		if local, ok := clipSpan(s, ec.desc); ok {
			if _, _, err := mvcc.ResolveIntentRange(ec.b, local.Key, local.EndKey, final.TxnMeta, final.Status, 0, final.IgnoredSeqNums...); err != nil {
				return err
			}
			ec.prop.LocksReleased = append(ec.prop.LocksReleased, LockRelease{Span: local, Txn: final.ID})
		}
		foreign = append(foreign, subtractSpan(s, ec.desc)...)
	}
	if len(foreign) > 0 {
		if err := ec.putTxnRecord(final); err != nil {
			return err
		}
		ec.prop.ResolveAsync = append(ec.prop.ResolveAsync, AsyncResolve{Txn: final.TxnMeta, Status: final.Status, Spans: foreign, IgnoredSeqNums: final.IgnoredSeqNums})
	} else {
		if err := mvcc.DeleteTxnRecord(ec.b, final.Key, final.ID); err != nil {
			return err
		}
		ec.prop.TxnTombstones = append(ec.prop.TxnTombstones, kvpb.Transaction{TxnMeta: final.TxnMeta, Status: final.Status})
	}
	ec.prop.TxnUpdates = append(ec.prop.TxnUpdates, TxnUpdate{ID: final.ID, Status: final.Status, AbortReason: reason, Key: final.Key})
	// The transaction's unreplicated locks on this tablet go with it.
	ec.prop.unreplEnded = final.ID
	ec.txn = final
	return nil
}

// subtractSpan returns the parts of s outside the tablet.
func subtractSpan(s kvpb.Span, desc kvpb.TabletDescriptor) []kvpb.Span {
	if len(s.EndKey) == 0 {
		if desc.ContainsKey(s.Key) {
			return nil
		}
		return []kvpb.Span{s}
	}
	var out []kvpb.Span
	if string(s.Key) < string(desc.StartKey) {
		out = append(out, kvpb.Span{Key: s.Key, EndKey: minKey(s.EndKey, desc.StartKey)})
	}
	if string(desc.EndKey) < string(s.EndKey) {
		out = append(out, kvpb.Span{Key: maxKey(s.Key, desc.EndKey), EndKey: s.EndKey})
	}
	return out
}

func (ec *evalCtx) heartbeatTxn(req *kvpb.HeartbeatTxnRequest) (kvpb.Response, error) {
	now := req.Now
	if now.IsEmpty() {
		now = ec.r.clock.Now()
	}
	rec, found, err := mvcc.GetTxnRecord(ec.b, req.Key, ec.txn.ID)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if !found {
		if !ec.canCreateTxnRecord(ec.txn.TxnMeta) {
			// Finished and its record deleted: a remembered final status
			// is what the record said; otherwise it can only abort.
			if st, ok := ec.r.tombs.status(ec.txn.ID); ok {
				ec.txn.Status = st
				rec = *ec.txn.Clone()
				return &kvpb.HeartbeatTxnResponse{Txn: rec}, nil
			}
			return nil, &kvpb.TransactionAbortedError{Reason: kvpb.AbortTimestampCache}
		}
		rec = *ec.txn.Clone()
		rec.Status = kvpb.Pending
	}
	if rec.Status == kvpb.Pending {
		rec.LastHeartbeat = rec.LastHeartbeat.Forward(now)
		if err := ec.putTxnRecord(&rec); err != nil {
			return nil, wrapEval(req, err)
		}
	}
	// The coordinator learns of pushes and of a final status here.
	ec.txn.Status = rec.Status
	ec.txn.WriteTimestamp = ec.txn.WriteTimestamp.Forward(rec.WriteTimestamp)
	return &kvpb.HeartbeatTxnResponse{Txn: rec}, nil
}

// pushTxn decides a push (see kvpb.PushTxnRequest): it succeeds against a
// finished pushee, aborts an abandoned (expired) one or a deadlock victim,
// moves a pending one's write timestamp for PushTimestamp, and otherwise
// fails with *kvpb.TransactionPushError so the pusher waits.
func (ec *evalCtx) pushTxn(req *kvpb.PushTxnRequest) (kvpb.Response, error) {
	rec, found, err := mvcc.GetTxnRecord(ec.b, req.Key, req.Pushee.ID)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	// No record yet: the transaction is alive as long as it started
	// recently (its intents carry its MinTimestamp), unless it can no
	// longer create one (its record was deleted, or may have been): then
	// it can never commit, and is aborted here. A record is deleted only
	// once its intents are resolved, so an intent of it a pusher meets is
	// one it never committed.
	gone := false
	if !found {
		rec = kvpb.Transaction{
			TxnMeta:       req.Pushee,
			Status:        kvpb.Pending,
			ReadTimestamp: req.Pushee.MinTimestamp,
			LastHeartbeat: req.Pushee.MinTimestamp,
		}
		gone = !ec.canCreateTxnRecord(req.Pushee)
	}
	if rec.Status.IsFinal() {
		return &kvpb.PushTxnResponse{Pushee: rec}, nil
	}
	now := ec.r.clock.Now()
	var (
		abort  bool
		reason kvpb.AbortReason
	)
	prioWins := (req.Pusher.Priority == MaxPriority || rec.Priority == MinPriority) && req.Pusher.Priority > rec.Priority
	switch {
	case gone:
		abort, reason = true, kvpb.AbortTimestampCache
	case mvcc.IsExpired(rec, now, ec.r.cfg.TxnLivenessThreshold):
		abort, reason = true, kvpb.AbortExpired
	case ec.opts.forceAbort:
		abort, reason = true, kvpb.AbortDeadlock
	case prioWins && req.PushType == kvpb.PushAbort:
		abort, reason = true, kvpb.AbortPushed
	}
	if abort {
		rec.Status = kvpb.Aborted
		if err := ec.putTxnRecord(&rec); err != nil {
			return nil, wrapEval(req, err)
		}
		ec.prop.TxnUpdates = append(ec.prop.TxnUpdates, TxnUpdate{ID: rec.ID, Status: kvpb.Aborted, AbortReason: reason, Key: rec.Key})
		return &kvpb.PushTxnResponse{Pushee: rec}, nil
	}
	if req.PushType != kvpb.PushTimestamp {
		return nil, &kvpb.TransactionPushError{Pushee: rec}
	}
	if req.PushTo.Less(rec.WriteTimestamp) {
		return &kvpb.PushTxnResponse{Pushee: rec}, nil
	}
	rec.WriteTimestamp = req.PushTo.Next()
	if err := ec.putTxnRecord(&rec); err != nil {
		return nil, wrapEval(req, err)
	}
	ec.prop.TxnUpdates = append(ec.prop.TxnUpdates, TxnUpdate{ID: rec.ID, Status: kvpb.Pending})
	return &kvpb.PushTxnResponse{Pushee: rec}, nil
}

func (ec *evalCtx) queryTxn(req *kvpb.QueryTxnRequest) (kvpb.Response, error) {
	rec, found, err := mvcc.GetTxnRecord(ec.b, req.Key, req.Txn.ID)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	resp := &kvpb.QueryTxnResponse{Txn: rec, Found: found, WaitingTxns: ec.r.txnWait.waitingOn(req.Txn.ID)}
	if found && rec.Status == kvpb.Aborted {
		resp.AbortReason = ec.r.abortReason(rec.ID)
	}
	return resp, nil
}
