package tablet

import (
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// Cleanup: ResolveIntent, ResolveIntentRange and GC. They run outside any
// transaction and change no user-visible value except as the transaction
// they settle already decided.

func (ec *evalCtx) resolveIntent(req *kvpb.ResolveIntentRequest) (kvpb.Response, error) {
	if req.UnreplicatedOnly {
		ec.prop.unreplReleased = append(ec.prop.unreplReleased, LockRelease{Span: req.Span(), Txn: req.Txn.ID})
		return &kvpb.ResolveIntentResponse{}, nil
	}
	if _, err := mvcc.ResolveIntent(ec.b, kvpb.Intent{Key: req.Key, Txn: req.Txn}, req.Status, req.IgnoredSeqNums...); err != nil {
		return nil, wrapEval(req, err)
	}
	ec.released(req.Span(), req.Txn, req.Status)
	return &kvpb.ResolveIntentResponse{}, nil
}

func (ec *evalCtx) resolveIntentRange(req *kvpb.ResolveIntentRangeRequest) (kvpb.Response, error) {
	if req.UnreplicatedOnly {
		ec.prop.unreplReleased = append(ec.prop.unreplReleased, LockRelease{Span: req.Span(), Txn: req.Txn.ID})
		return &kvpb.ResolveIntentRangeResponse{}, nil
	}
	n, _, err := mvcc.ResolveIntentRange(ec.b, req.Key, req.EndKey, req.Txn, req.Status, 0, req.IgnoredSeqNums...)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	ec.released(req.Span(), req.Txn, req.Status)
	return &kvpb.ResolveIntentRangeResponse{Resolved: n}, nil
}

// released notes the lock-table effect of a resolution: a final status
// removes the locks; a pending one (a pushed timestamp) keeps them, moved
// up, but still wakes their waiters so readers re-evaluate and pass.
func (ec *evalCtx) released(span kvpb.Span, txn kvpb.TxnMeta, status kvpb.TxnStatus) {
	rel := LockRelease{Span: span, Txn: txn.ID}
	if status == kvpb.Pending {
		ec.prop.LocksUpdated = append(ec.prop.LocksUpdated, rel)
		return
	}
	ec.prop.LocksReleased = append(ec.prop.LocksReleased, rel)
}

func (ec *evalCtx) gc(req *kvpb.GCRequest) (kvpb.Response, error) {
	if req.Census {
		return ec.census(req)
	}
	recs, err := ec.gcTxnRecords(req)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if req.Threshold.IsEmpty() {
		return &kvpb.GCResponse{TxnRecordsRemoved: recs}, nil
	}
	st, resume, err := mvcc.GCWith(ec.b, req.Key, req.EndKey, req.Threshold, mvcc.GCOptions{MaxVersions: req.MaxVersions, Repacker: ec.r.cfg.Repacker})
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if ec.r.gcThreshold().Less(req.Threshold) {
		if err := ec.r.writeGCThreshold(ec.b, ec.desc.TabletID, req.Threshold); err != nil {
			return nil, wrapEval(req, err)
		}
		ec.prop.GCThreshold = req.Threshold
	}
	return &kvpb.GCResponse{Removed: st.Versions, RemovedBytes: st.Bytes, ResumeKey: resume, Repacked: st.Repacked, TxnRecordsRemoved: recs}, nil
}

// census answers a census request (kvpb.GCRequest.Census): it reads the
// span's values through the tablet's row repacker and writes nothing.
func (ec *evalCtx) census(req *kvpb.GCRequest) (kvpb.Response, error) {
	rf, ok := ec.r.cfg.Repacker.(mvcc.RowFormats)
	if !ok || !req.Threshold.IsEmpty() || len(req.TxnRecords) > 0 {
		return nil, wrapEval(req, invalidArg("census of [%q, %q): needs a tablet that knows row formats, and no threshold or records", req.Key, req.EndKey))
	}
	out, resume, err := mvcc.Census(ec.b, req.Key, req.EndKey, req.MaxVersions, rf)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	return &kvpb.GCResponse{Census: out, ResumeKey: resume}, nil
}

// gcTxnRecords deletes the final records among req.TxnRecords (the
// sender resolved their intents first) and keeps tombstones for them
// (invariant 8). A pending record stays: it is the GC queue's to push.
func (ec *evalCtx) gcTxnRecords(req *kvpb.GCRequest) (int, error) {
	n := 0
	for _, t := range req.TxnRecords {
		if !ec.desc.ContainsKey(t.Key) {
			return n, invalidArg("GC of the record of %s anchored outside %s", t.Short(), &ec.desc)
		}
		rec, found, err := mvcc.GetTxnRecord(ec.b, t.Key, t.ID)
		if err != nil {
			return n, err
		}
		if !found || !rec.Status.IsFinal() {
			continue
		}
		if err := mvcc.DeleteTxnRecord(ec.b, t.Key, t.ID); err != nil {
			return n, err
		}
		ec.prop.TxnTombstones = append(ec.prop.TxnTombstones, kvpb.Transaction{TxnMeta: rec.TxnMeta, Status: rec.Status})
		n++
	}
	return n, nil
}
