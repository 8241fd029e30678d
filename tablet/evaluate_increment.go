package tablet

import (
	"math"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// increment evaluates an IncrementRequest: read the newest value at the
// write timestamp, add, and write the sum there with a ConditionalPut
// against what was read. The batch holds the key's write latch, so no
// other request of this tablet runs between the read and the write; a
// committed version above the write timestamp makes the ConditionalPut a
// WriteTooOldError, which the replica retries at a later timestamp for a
// batch whose timestamp it chose, and another transaction's intent is the
// usual conflict the request waits on. The request is refused inside a
// transaction (validateRequest): its whole point is to commit at once.
func (ec *evalCtx) increment(req *kvpb.IncrementRequest) (kvpb.Response, error) {
	ts := ec.writeTS(req.Span())
	res, err := mvcc.Get(ec.b, req.Key, ts, mvcc.ReadOptions{})
	if err != nil {
		return nil, wrapEval(req, err)
	}
	cur, err := kvpb.DecodeIncrementValue(res.Value)
	if err != nil {
		return nil, invalidArg("Increment of %q: %v", req.Key, err)
	}
	if (req.Increment > 0 && cur > math.MaxInt64-req.Increment) || (req.Increment < 0 && cur < math.MinInt64-req.Increment) {
		return nil, invalidArg("Increment of %q: %d + %d overflows int64", req.Key, cur, req.Increment)
	}
	next := cur + req.Increment
	if err := mvcc.ConditionalPut(ec.b, req.Key, ts, kvpb.EncodeIncrementValue(next), res.Value, res.Value != nil, nil); err != nil {
		return nil, wrapEval(req, err)
	}
	ec.wrote(req.Key)
	return &kvpb.IncrementResponse{NewValue: next}, nil
}
