package tablet

import (
	"bytes"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// bulkPut evaluates a kvpb.BulkPutRequest: a committed version at exactly
// the batch timestamp, with no timestamp-cache push, intent or lock
// (kvpb.BulkPutRequest says why that is sound for the storage it is used
// on). What the tablet can check, it does: the batch is not
// transactional, carries its timestamp, the value fits, and the write
// lands above the GC threshold (a version at or below it could be
// collected under a reader's feet).
//
// The first BulkPut of a batch checks every MustNotExist key of the batch
// at once (checkBulkKeys), before any of them is written; each request
// then only writes.
func (ec *evalCtx) bulkPut(req *kvpb.BulkPutRequest) (kvpb.Response, error) {
	if ec.txn != nil {
		return nil, invalidArg("BulkPut cannot run in a transaction")
	}
	ts := ec.ba.Timestamp
	if ts.IsEmpty() {
		return nil, invalidArg("BulkPut needs the batch timestamp")
	}
	if len(req.Value) > ec.r.cfg.MaxValueSize {
		return nil, invalidArg("BulkPut: value of %d bytes exceeds the limit of %d", len(req.Value), ec.r.cfg.MaxValueSize)
	}
	if !ec.bulkChecked {
		ec.r.mu.RLock()
		th := ec.r.mu.gcThreshold
		ec.r.mu.RUnlock()
		if ts.LessEq(th) {
			return nil, invalidArg("BulkPut at %s is at or below the GC threshold %s", ts, th)
		}
		// Nor at or below a closed timestamp: it bypasses the timestamp
		// cache that keeps other writes above one (closedts.go, rule 1).
		if c := ec.r.closedProposed(); ts.LessEq(c) {
			return nil, invalidArg("BulkPut at %s is at or below the tablet's closed timestamp %s", ts, c)
		}
		if err := ec.checkBulkKeys(); err != nil {
			return nil, wrapEval(req, err)
		}
		ec.bulkChecked = true
	}
	if err := mvcc.BulkPut(ec.b, req.Key, ts, req.Value, false); err != nil {
		return nil, wrapEval(req, err)
	}
	return &kvpb.BulkPutResponse{}, nil
}

// checkBulkKeys fails with *kvpb.ConditionFailedError when a MustNotExist
// key of the batch appears twice in it, has a committed version, or holds
// an intent. The keys are sorted once and checked with one forward
// iterator (mvcc.FirstExisting); intents are ruled out for the whole
// batch's span by the lock table when it can prove none is there (every
// key is latched, which is what its exactness needs), else by one
// forward iterator over the lock keyspace (mvcc.FirstLocked).
func (ec *evalCtx) checkBulkKeys() error {
	var ks [][]byte
	for _, r := range ec.ba.Requests {
		if bp, ok := r.(*kvpb.BulkPutRequest); ok && bp.MustNotExist {
			ks = append(ks, bp.Key)
		}
	}
	if len(ks) == 0 {
		return nil
	}
	slices.SortFunc(ks, bytes.Compare)
	for i := 1; i < len(ks); i++ {
		if bytes.Equal(ks[i-1], ks[i]) {
			return &kvpb.ConditionFailedError{Key: append([]byte(nil), ks[i]...)}
		}
	}
	if !ec.r.locks.noneIn(ks[0], keys.Next(ks[len(ks)-1])) {
		i, err := mvcc.FirstLocked(ec.b, ks)
		if err != nil {
			return err
		}
		if i >= 0 {
			return &kvpb.ConditionFailedError{Key: append([]byte(nil), ks[i]...)}
		}
	}
	i, err := mvcc.FirstExisting(ec.b, ks)
	if err != nil {
		return err
	}
	if i >= 0 {
		return &kvpb.ConditionFailedError{Key: append([]byte(nil), ks[i]...)}
	}
	return nil
}

// clearRange evaluates a kvpb.ClearRangeRequest: one range deletion of the
// span's user keys in the batch (replicated with it, as any write is).
// Lock records live in their own keyspace and stay; only table data may
// be cleared, so no catalog or system key can be lost this way.
func (ec *evalCtx) clearRange(req *kvpb.ClearRangeRequest) (kvpb.Response, error) {
	if ec.txn != nil {
		return nil, invalidArg("ClearRange cannot run in a transaction")
	}
	if bytes.Compare(req.Key, keys.TableDataMin) < 0 {
		return nil, invalidArg("ClearRange of %s: only table data can be cleared", req.Span())
	}
	if err := ec.b.ClearRange(req.Key, req.EndKey); err != nil {
		return nil, wrapEval(req, err)
	}
	return &kvpb.ClearRangeResponse{}, nil
}
