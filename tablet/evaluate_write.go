package tablet

import (
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// Writes: Put, ConditionalPut, Delete, DeleteRange. In a transaction they
// lay intents at the transaction's write timestamp; outside one they write
// committed versions at the batch timestamp. Either way the timestamp is
// first moved above the timestamp cache (writeTS).

func (ec *evalCtx) put(req *kvpb.PutRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	if err := mvcc.Put(ec.b, req.Key, ts, req.Value, ec.txn); err != nil {
		return nil, wrapEval(req, err)
	}
	ec.wrote(req.Key)
	return &kvpb.PutResponse{}, nil
}

func (ec *evalCtx) conditionalPut(req *kvpb.ConditionalPutRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	if err := mvcc.ConditionalPut(ec.b, req.Key, ts, req.Value, req.Expected, req.ExpectExists, ec.txn); err != nil {
		return nil, wrapEval(req, err)
	}
	ec.wrote(req.Key)
	return &kvpb.ConditionalPutResponse{}, nil
}

func (ec *evalCtx) delete(req *kvpb.DeleteRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	found, err := mvcc.Delete(ec.b, req.Key, ts, ec.txn)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	ec.wrote(req.Key)
	return &kvpb.DeleteResponse{Found: found}, nil
}

func (ec *evalCtx) deleteRange(req *kvpb.DeleteRangeRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	deleted, err := mvcc.DeleteRange(ec.b, req.Key, req.EndKey, ts, ec.txn)
	if err != nil {
		return nil, wrapEval(req, err)
	}
	for _, k := range deleted {
		ec.wrote(k)
	}
	return &kvpb.DeleteRangeResponse{Keys: deleted}, nil
}
