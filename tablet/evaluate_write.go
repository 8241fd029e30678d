package tablet

import (
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// Writes: Put, ConditionalPut, Delete, DeleteRange. In a transaction they
// lay intents at the transaction's write timestamp; outside one they write
// committed versions at the batch timestamp. Either way the timestamp is
// first moved above the timestamp cache (writeTS).

// writeOpts lets a write of key skip reading its lock record when the lock
// table proves there is none (invariant 11: the writer holds key's latch)
// and no earlier request of this batch laid one (those are only in the
// evaluation batch until Apply). A COPY batch of a thousand new rows saves
// a thousand engine lookups. With Config.VerifyLockTable the engine is
// checked too.
func (ec *evalCtx) writeOpts(key []byte) (mvcc.WriteOptions, error) {
	if _, ok := ec.wroteKeys[string(key)]; ok || !ec.r.locks.noneIn(key, nil) {
		return mvcc.WriteOptions{}, nil
	}
	if ec.r.cfg.VerifyLockTable {
		in, err := mvcc.ScanIntents(ec.reader(), key, keys.Next(key), 1)
		if err != nil {
			return mvcc.WriteOptions{}, err
		}
		if len(in) > 0 {
			return mvcc.WriteOptions{}, fmt.Errorf("%w: intent of %s on %q", ErrLockTableInexact, in[0].Txn.Short(), in[0].Key)
		}
	}
	return mvcc.WriteOptions{NoLock: true}, nil
}

// spanWriteOpts is writeOpts for the span [key, end) (end empty: key
// alone) of a lock request: noLocksIn's proof, as reads use it.
func (ec *evalCtx) spanWriteOpts(key, end []byte) (mvcc.WriteOptions, error) {
	if len(end) == 0 {
		return ec.writeOpts(key)
	}
	none, err := ec.noLocksIn(key, end)
	return mvcc.WriteOptions{NoLock: none}, err
}

func (ec *evalCtx) put(req *kvpb.PutRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	opts, err := ec.writeOpts(req.Key)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if opts.NoLock && !ec.opts.follower && ec.noOtherWriteOf(req, req.Key) {
		// The engine alone (no other request of this batch writes key)
		// holds key's versions, and the validation cache may know the
		// newest (invariant 12): an UPDATE's row, its span read by the
		// row's lock check, is written without reading it again.
		opts.Newest, opts.NewestKnown = ec.r.valid.newestOf(req.Key)
	}
	if err := mvcc.PutOpts(ec.b, req.Key, ts, req.Value, ec.txn, opts); err != nil {
		return nil, wrapEval(req, err)
	}
	ec.wrote(req.Key)
	return &kvpb.PutResponse{}, nil
}

func (ec *evalCtx) conditionalPut(req *kvpb.ConditionalPutRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	opts, err := ec.writeOpts(req.Key)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	if err := mvcc.ConditionalPutOpts(ec.b, req.Key, ts, req.Value, req.Expected, req.ExpectExists, ec.txn, opts); err != nil {
		return nil, wrapEval(req, err)
	}
	ec.wrote(req.Key)
	return &kvpb.ConditionalPutResponse{}, nil
}

func (ec *evalCtx) delete(req *kvpb.DeleteRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	opts, err := ec.writeOpts(req.Key)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	found, err := mvcc.DeleteOpts(ec.b, req.Key, ts, ec.txn, opts)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	ec.wrote(req.Key)
	return &kvpb.DeleteResponse{Found: found}, nil
}

func (ec *evalCtx) deleteRange(req *kvpb.DeleteRangeRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	// The lock table's proof that the span holds no lock record saves the
	// range its reads of the lock keyspace (the whole-row rewrite's
	// DeleteRange of the rest of its row's span, under simple-update).
	opts, err := ec.spanWriteOpts(req.Key, req.EndKey)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	deleted, err := mvcc.DeleteRangeOpts(ec.b, req.Key, req.EndKey, ts, ec.txn, opts)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	for _, k := range deleted {
		ec.wrote(k)
	}
	return &kvpb.DeleteRangeResponse{Keys: deleted}, nil
}

// noOtherWriteOf reports whether no request of the batch but req may
// write a version of key: reads, refreshes and locks write none, and an
// EndTxn as the batch's last request resolves its intents after req.
func (ec *evalCtx) noOtherWriteOf(req kvpb.Request, key []byte) bool {
	for i, r := range ec.ba.Requests {
		if r == req {
			continue
		}
		switch r.(type) {
		case *kvpb.GetRequest, *kvpb.ScanRequest, *kvpb.RefreshRequest, *kvpb.LockRequest:
			continue
		case *kvpb.EndTxnRequest:
			if i == len(ec.ba.Requests)-1 {
				continue
			}
			return false
		}
		if spansOverlap(r.Span(), kvpb.Span{Key: key}) {
			return false
		}
	}
	return true
}
