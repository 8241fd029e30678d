package tablet

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
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

// clearRange evaluates a kvpb.ClearRangeRequest: a deletion of every
// entry (every version) with a user key in the span, in the batch
// (replicated with it, as any write is). Lock records live in their own
// keyspace and stay; only table data may be cleared, so no catalog or
// system key can be lost this way.
//
// A span holding at most clearPointMax entries (an empty table's, as
// TRUNCATE and DROP of pgbench's fresh tables at `pgbench -i` clear) is
// cleared by deleting each entry; a larger one by one range deletion. A
// range deletion stays in its memtable until the memtable is flushed, and
// until then Pebble builds a range-deletion iterator over that memtable
// for every iterator and Get of any key (as CockroachDB's ClearRange,
// which clears small spans by point deletions). The latches of the
// request (a write of its span) keep the entries read here from changing
// before the batch applies.
func (ec *evalCtx) clearRange(req *kvpb.ClearRangeRequest) (kvpb.Response, error) {
	if ec.txn != nil {
		return nil, invalidArg("ClearRange cannot run in a transaction")
	}
	if bytes.Compare(req.Key, keys.TableDataMin) < 0 {
		return nil, invalidArg("ClearRange of %s: only table data can be cleared", req.Span())
	}
	few, err := fewEntries(ec.b, req.Key, req.EndKey, clearPointMax)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if few != nil {
		for _, k := range few {
			if err := ec.b.Delete(k); err != nil {
				return nil, wrapEval(req, err)
			}
		}
		return &kvpb.ClearRangeResponse{}, nil
	}
	if err := ec.b.ClearRange(req.Key, req.EndKey); err != nil {
		return nil, wrapEval(req, err)
	}
	return &kvpb.ClearRangeResponse{}, nil
}

// clearPointMax is the most entries a ClearRange deletes one by one.
const clearPointMax = 64

// fewEntries returns the entries (copies of their keys, with their
// versions) with a user key in [start, end) that rd holds, or nil if it
// holds more than max. An empty span gives an empty, non-nil slice.
func fewEntries(rd storage.Reader, start, end []byte, max int) ([]storage.MVCCKey, error) {
	it, err := rd.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := []storage.MVCCKey{}
	for ok := it.SeekGE(storage.MVCCKey{Key: start}); ok; ok = it.Next() {
		if len(out) == max {
			return nil, nil
		}
		k := it.UnsafeKey()
		out = append(out, storage.MVCCKey{Key: append([]byte(nil), k.Key...), Timestamp: k.Timestamp})
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// maxSSTSize bounds the SST an AddSSTable may carry: it travels in the
// raft entry, and so in every append message to a follower, which must
// stay well within one RPC (each replica's log keeps it in a file beside
// it: raftnode's side-loading).
const maxSSTSize = 32 << 20

// addSSTable evaluates a kvpb.AddSSTableRequest: it checks the SST
// (mvcc.CheckSST: committed versions at exactly the batch timestamp,
// inside the request's span, which validate placed inside the tablet)
// and hands it to the proposal, whose every replica ingests it when
// applying (applySST). Nothing is written to the evaluation batch: the
// versions reach the engine only by ingestion. As for BulkPut, the
// timestamp must lie above the GC threshold.
func (ec *evalCtx) addSSTable(req *kvpb.AddSSTableRequest) (kvpb.Response, error) {
	if ec.txn != nil {
		return nil, invalidArg("AddSSTable cannot run in a transaction")
	}
	if len(ec.ba.Requests) != 1 {
		return nil, invalidArg("AddSSTable must be alone in its batch")
	}
	ts := ec.ba.Timestamp
	if ts.IsEmpty() {
		return nil, invalidArg("AddSSTable needs the batch timestamp")
	}
	if bytes.Compare(req.Key, keys.TableDataMin) < 0 {
		return nil, invalidArg("AddSSTable of %s: only table data can be ingested", req.Span())
	}
	if len(req.Data) > maxSSTSize {
		return nil, invalidArg("AddSSTable: an SST of %d bytes exceeds the limit of %d", len(req.Data), maxSSTSize)
	}
	ec.r.mu.RLock()
	th := ec.r.mu.gcThreshold
	ec.r.mu.RUnlock()
	if ts.LessEq(th) {
		return nil, invalidArg("AddSSTable at %s is at or below the GC threshold %s", ts, th)
	}
	n, err := mvcc.CheckSST(req.Data, req.Key, req.EndKey, ts, ec.r.cfg.MaxValueSize)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if n > 0 {
		ec.prop.SST = req.Data
	}
	return &kvpb.AddSSTableResponse{Versions: int64(n)}, nil
}

// applySST ingests the SST of an applied proposal into the replica's
// engine. Applying an entry again (a restart before its applied index was
// persisted) ingests the same versions again: the engine ends up holding
// exactly what it held after the first time, since only identical
// versions can meet (mvcc.CheckSST allows nothing else into an SST).
//
// When the raft log keeps the SST in a file (file set: raftnode's
// side-loading), the file is hard-linked into the engine; otherwise sst is
// written to a staging file first.
//
// It runs with a context of its own: a committed entry must be applied
// whole even while the replica closes (a failure stops the raft node,
// which applies the entry again when it restarts).
func (r *Replica) applySST(sst []byte, file string) error {
	if file != "" {
		if err := r.eng.IngestFile(context.Background(), file); err != nil {
			return fmt.Errorf("tablet %d: ingesting the side-loaded SST %s (%d bytes): %w", r.Desc().TabletID, file, len(sst), err)
		}
	} else if err := r.eng.IngestBytes(context.Background(), sst); err != nil {
		return fmt.Errorf("tablet %d: ingesting an SST of %d bytes: %w", r.Desc().TabletID, len(sst), err)
	}
	r.metrics.SSTsIngested.Add(1)
	r.metrics.SSTBytesIngested.Add(int64(len(sst)))
	return nil
}
