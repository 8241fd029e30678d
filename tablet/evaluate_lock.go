package tablet

import (
	"bytes"
	"errors"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
)

// lock evaluates a LockRequest (a row lock: mvcc.AcquireLock). The lock
// lands at the transaction's write timestamp as it is: it holds no value,
// so no read can be invalidated by it and the timestamp cache has no say.
// A conflict under SkipLocked is answered, not waited on.
func (ec *evalCtx) lock(req *kvpb.LockRequest) (kvpb.Response, error) {
	if err := ec.checkUnreplicated(req); err != nil {
		if req.SkipLocked {
			return &kvpb.LockResponse{Skipped: true}, nil
		}
		return nil, err
	}
	if req.Unreplicated {
		return ec.lockUnreplicated(req)
	}
	ts := ec.ba.Timestamp
	if ec.txn != nil {
		ts = ec.txn.WriteTimestamp
	}
	opts, err := ec.spanWriteOpts(req.Key, req.EndKey)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if ec.txn == nil && opts.NoLock && !ec.opts.follower && (ec.b == nil || ec.b.Empty()) {
		// A lock outside a transaction (a one-phase commit's row lock,
		// evalOnePCWrites) only checks: no lock in the span (the lock
		// table says so) and no version at or above ts. The validation
		// cache may know the span's newest version from the row's
		// locking read (invariant 12); the batch has written nothing the
		// engine would show above it.
		if newest, ok := ec.r.valid.spanNewest(req.Key, req.EndKey); ok && newest.Less(ts) {
			return &kvpb.LockResponse{}, nil
		}
	}
	acquired, err := mvcc.AcquireLockOpts(ec.b, req.Key, req.EndKey, ts, ec.txn, opts)
	if err != nil {
		if wie := (*kvpb.WriteIntentError)(nil); req.SkipLocked && errors.As(err, &wie) {
			return &kvpb.LockResponse{Skipped: true}, nil
		}
		return nil, wrapEval(req, err)
	}
	if acquired {
		ec.wrote(req.Key)
	}
	return &kvpb.LockResponse{}, nil
}

// lockUnreplicated evaluates an unreplicated lock (kvpb.LockRequest): the
// checks of a row lock at the transaction's read timestamp, writing
// nothing; the lock itself enters the lock table once the batch is done
// (applyUnreplicated).
func (ec *evalCtx) lockUnreplicated(req *kvpb.LockRequest) (kvpb.Response, error) {
	if ec.txn == nil {
		return nil, wrapEval(req, errors.New("unreplicated lock outside a transaction"))
	}
	opts, err := ec.spanWriteOpts(req.Key, req.EndKey)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	// The newest version of each key of the span, read from the engine
	// alone (this batch wrote nothing yet): the commit's check of the row
	// (a refresh from this read's timestamp, kv's checkBuffered) then
	// passes without a read while nothing writes the key (validcache.go,
	// invariant 12). Installed only once the checks passed.
	// Most spans are one row of one key: its entry lives in seenArr,
	// on the stack (note is only called, never kept).
	var seenArr [2]validSeen
	seen := seenArr[:0]
	var note func(key []byte, newest hlc.Timestamp)
	rd := ec.reader()
	if (ec.b == nil || ec.b.Empty()) && !ec.opts.follower {
		note = func(key []byte, newest hlc.Timestamp) {
			if len(seen) < maxSeenPerLock {
				seen = append(seen, validSeen{key: string(key), newest: newest})
			}
		}
	}
	var held, whole bool
	var newest hlc.Timestamp
	if sc := ec.scanAfterLock(req); sc != nil {
		// The batch scans the span next (an UPDATE's locking read): the
		// check's pass over the span's versions reads the scan's rows.
		var rows []kvpb.KeyValue
		held, newest, whole, rows, err = mvcc.CheckLockScan(rd, req.Key, req.EndKey, ec.txn, opts, note)
		if err == nil && whole && (sc.MaxKeys == 0 || int64(len(rows)) < sc.MaxKeys) {
			ec.lockScan, ec.lockRows = sc, rows
		}
	} else {
		held, newest, whole, err = mvcc.CheckLockSpanNewest(rd, req.Key, req.EndKey, ec.txn, opts, note)
	}
	if err == nil && note != nil {
		for _, v := range seen {
			ec.r.valid.install(v.key, v.newest, ec.validGen)
		}
		if whole && len(req.EndKey) > 0 {
			// And the row span's as a whole: the commit's check of the
			// lock's span passes without a read too.
			ec.r.valid.installSpan(req.Key, req.EndKey, newest, ec.validGen)
		}
	}
	if err != nil {
		var wie *kvpb.WriteIntentError
		if req.SkipLocked && errors.As(err, &wie) {
			return &kvpb.LockResponse{Skipped: true}, nil
		}
		return nil, wrapEval(req, err)
	}
	if held {
		// Its own lock or intent on the key is already stronger.
		return &kvpb.LockResponse{}, nil
	}
	ec.prop.unreplAcquired = append(ec.prop.unreplAcquired, kvpb.Intent{Key: req.Key, Txn: ec.txn.TxnMeta})
	return &kvpb.LockResponse{}, nil
}

// scanAfterLock returns the scan of req's span that follows req in a batch
// of reads and unreplicated locks (locksOnRead), read at the transaction's
// read timestamp, forward and unlimited but by keys: the scan that
// mvcc.CheckLockScan answers (nil: none).
func (ec *evalCtx) scanAfterLock(req *kvpb.LockRequest) *kvpb.ScanRequest {
	if ec.b != nil || len(req.EndKey) == 0 || ec.opts.follower {
		return nil
	}
	after := false
	for _, r := range ec.ba.Requests {
		if r == kvpb.Request(req) {
			after = true
			continue
		}
		sc, ok := r.(*kvpb.ScanRequest)
		if !after || !ok {
			continue
		}
		if bytes.Equal(sc.Key, req.Key) && bytes.Equal(sc.EndKey, req.EndKey) && !sc.Reverse &&
			sc.MaxBytes == 0 && len(sc.CountTags) == 0 && sc.ReadsOnTo == nil {
			return sc
		}
		return nil
	}
	return nil
}

// reader is what the batch reads through: its evaluation batch, or the
// engine when it writes nothing (a batch of reads and unreplicated locks:
// evaluate).
func (ec *evalCtx) reader() storage.Reader {
	if ec.b != nil {
		return ec.b
	}
	return ec.rd
}
