package tablet

import (
	"errors"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// lock evaluates a LockRequest (a row lock: mvcc.AcquireLock). The lock
// lands at the transaction's write timestamp as it is: it holds no value,
// so no read can be invalidated by it and the timestamp cache has no say.
// A conflict under SkipLocked is answered, not waited on.
func (ec *evalCtx) lock(req *kvpb.LockRequest) (kvpb.Response, error) {
	ts := ec.ba.Timestamp
	if ec.txn != nil {
		ts = ec.txn.WriteTimestamp
	}
	acquired, err := mvcc.AcquireLock(ec.b, req.Key, req.EndKey, ts, ec.txn)
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
