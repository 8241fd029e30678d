package tablet

import (
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// Reads: Get, Scan and Refresh. They write nothing; the timestamp cache
// learns about them after evaluation (Replica.recordReads).

func (ec *evalCtx) get(req *kvpb.GetRequest) (kvpb.Response, error) {
	if err := ec.checkReadAboveGC(req, ec.readTS()); err != nil {
		return nil, err
	}
	noLocks, err := ec.noLocksIn(req.Key, nil)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	res, err := mvcc.Get(ec.rd, req.Key, ec.readTS(), mvcc.ReadOptions{Txn: ec.txn, LocalUncertaintyLimit: ec.opts.localLimit, NoLocksInSpan: noLocks})
	if err != nil {
		return nil, wrapEval(req, err)
	}
	return &kvpb.GetResponse{Value: res.Value, Timestamp: res.Timestamp}, nil
}

func (ec *evalCtx) scan(req *kvpb.ScanRequest) (kvpb.Response, error) {
	if err := ec.checkReadAboveGC(req, ec.readTS()); err != nil {
		return nil, err
	}
	if ec.lockScan == req {
		// Read by the lock's check of the span before it, in one pass
		// (lockUnreplicated), under the same latches and from the same
		// view of the engine.
		rows := ec.lockRows
		ec.lockScan, ec.lockRows = nil, nil
		return &kvpb.ScanResponse{Rows: rows}, nil
	}
	noLocks, err := ec.noLocksIn(req.Key, req.EndKey)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	// The only request of its batch (a point read) has its response and
	// room for one row in the evaluation's answer (evalOut).
	only := len(ec.ba.Requests) == 1
	var rows []kvpb.KeyValue
	if only {
		rows = ec.out.scanOne.row[:0]
	}
	// The row cache (rowcache.go): a read of a row span alone in its
	// batch, with no lock in the span.
	cached := ec.plainRead && noLocks && ec.r.valid.budget != nil && !req.Reverse && req.MaxBytes == 0 &&
		len(req.CountTags) == 0 && rowSpan(req.Key, req.EndKey)
	if cached {
		if hit, ok := ec.r.valid.rowsAt(req.Key, ec.readTS()); ok && (req.MaxKeys == 0 || int64(len(hit)) <= req.MaxKeys) {
			ec.out.scanOne.resp = kvpb.ScanResponse{Rows: copyRows(hit, rows)}
			return &ec.out.scanOne.resp, nil
		}
	}
	res, err := mvcc.Scan(ec.rd, req.Key, req.EndKey, ec.readTS(), mvcc.ScanOptions{
		ReadOptions: mvcc.ReadOptions{Txn: ec.txn, LocalUncertaintyLimit: ec.opts.localLimit, NoLocksInSpan: noLocks},
		Reverse:     req.Reverse,
		MaxKeys:     req.MaxKeys,
		MaxBytes:    req.MaxBytes,
		CountTags:   req.CountTags,
		ReadsOnTo:   req.ReadsOnTo,
		Rows:        rows,
		TrackNewest: cached,
	})
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if cached && res.NewestKnown && res.ResumeSpan == nil && res.Newest.LessEq(ec.readTS()) {
		ec.r.valid.installRows(req.Key, res.Newest, res.Rows, ec.validGen)
	}
	// Two literals: a variable whose address one branch returns would
	// be on the heap in both.
	if only {
		ec.out.scanOne.resp = kvpb.ScanResponse{Rows: res.Rows, ResumeSpan: res.ResumeSpan, Count: res.Count, DiskBytes: res.DiskBytes}
		return &ec.out.scanOne.resp, nil
	}
	return &kvpb.ScanResponse{Rows: res.Rows, ResumeSpan: res.ResumeSpan, Count: res.Count, DiskBytes: res.DiskBytes}, nil
}

// refresh checks that the transaction's earlier reads of the span are still
// valid at its current read timestamp; recordReads then protects the span
// at that timestamp.
func (ec *evalCtx) refresh(req *kvpb.RefreshRequest) (kvpb.Response, error) {
	// The refresh checks (From, ReadTimestamp]: versions at or below From
	// that GC removed are not in question, but a From below the threshold
	// means the original reads may have seen versions now gone.
	if err := ec.checkReadAboveGC(req, req.From); err != nil {
		return nil, err
	}
	end := req.EndKey
	if len(end) == 0 {
		end = spanEnd(req.Span())
	}
	to := ec.txn.ReadTimestamp
	if req.Strict {
		to = hlc.MaxTimestamp
	}
	none, err := ec.noLocksIn(req.Key, end)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if len(req.EndKey) == 0 && !ec.opts.follower && none && ec.r.valid.passes(req.Key, req.From) {
		// The key's newest version is remembered (validcache.go,
		// invariant 12) and lies at or below From, and the lock table
		// shows no intent on it (invariant 11): nothing to read.
		return &kvpb.RefreshResponse{}, nil
	}
	if len(req.EndKey) > 0 && !ec.opts.follower && none && ec.r.valid.passesSpan(req.Key, req.EndKey, req.From) {
		// The same for every key of a row's span (an UPDATE's row lock,
		// whose check read them all).
		return &kvpb.RefreshResponse{}, nil
	}
	if req.Strict && len(req.EndKey) == 0 && !ec.opts.follower {
		// A validation (kv/txn_validate.go): its key, a table's writer
		// key, is rarely written, so its newest version is remembered.
		newest, known, err := mvcc.CheckRefreshNewest(ec.rd, req.Key, req.From, to, ec.txn.ID, mvcc.WriteOptions{NoLock: none})
		if err != nil {
			return nil, wrapEval(req, err)
		}
		if known && (ec.b == nil || ec.b.Empty()) {
			// Read from the engine alone (not through this batch's own
			// writes), after validGen was taken.
			ec.r.valid.install(string(req.Key), newest, ec.validGen)
		}
		return &kvpb.RefreshResponse{}, nil
	}
	if err := mvcc.CheckRefreshOpts(ec.rd, req.Key, end, req.From, to, ec.txn.ID, mvcc.WriteOptions{NoLock: none}); err != nil {
		return nil, wrapEval(req, err)
	}
	return &kvpb.RefreshResponse{}, nil
}

// noLocksIn reports whether a read of [start, end) (end nil: the key start)
// may skip the lock keyspace: the lock table shows no lock there (invariant
// 11) and this batch has laid no intent yet (its own intents are only in
// the evaluation batch until Apply). With Config.VerifyLockTable the engine
// is checked too.
func (ec *evalCtx) noLocksIn(start, end []byte) (bool, error) {
	if ec.opts.follower || len(ec.prop.LocksAcquired) > 0 || !ec.r.locks.noneIn(start, end) {
		return false, nil
	}
	if ec.r.cfg.VerifyLockTable {
		in, err := mvcc.ScanIntents(ec.rd, start, end, 1)
		if err != nil {
			return false, err
		}
		if len(in) > 0 {
			return false, fmt.Errorf("%w: intent of %s on %q", ErrLockTableInexact, in[0].Txn.Short(), in[0].Key)
		}
	}
	return true, nil
}
