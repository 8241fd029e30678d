package tablet

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/google/uuid"
)

// evalOptions are evaluation inputs that do not come from the batch.
type evalOptions struct {
	// forceAbort makes a PushTxn abort its pending pushee regardless of
	// priority: the waiter chose it as a deadlock victim.
	forceAbort bool
	// serverTS: the tablet chose the batch's timestamp (Send), so it may
	// move it up to the start of the lease it is evaluated under.
	serverTS bool
	// localLimit is the transaction's uncertainty limit on this
	// leaseholder under the lease evaluated under (uncertainty.go); zero:
	// the global one.
	localLimit hlc.Timestamp
	// follower: a follower serves the batch below its closed timestamp
	// (closedts.go): its lock table is not the leaseholder's, so reads
	// always look at the lock keyspace.
	follower bool
}

// evalCtx is the state of one batch's evaluation. txn is the batch's
// transaction as evaluation moves it (its WriteTimestamp may be pushed);
// prop collects the side effects Apply will perform.
type evalCtx struct {
	r *Replica
	// b collects the batch's writes; nil for a read-only batch.
	b *storage.Batch
	// rd is what reads go through: b, so a request sees the writes of the
	// requests before it, or for a read-only batch the engine itself, which
	// saves building an indexed batch (reads are under latches either way,
	// and an indexed batch reads the live engine too, not a snapshot).
	rd   storage.Reader
	ba   *kvpb.BatchRequest
	desc kvpb.TabletDescriptor
	txn  *kvpb.Transaction
	prop *Proposal
	opts evalOptions
	// propBuf is what prop points to when evaluate made it: one
	// allocation for both.
	propBuf Proposal
	// out holds the answer of a batch of one request (evalOut): never
	// memory of the evalCtx itself, which a read's evaluation recycles.
	out *evalOut
	// fixedTS makes writes land exactly at ba.Timestamp (one-phase commit,
	// which has checked the timestamp cache itself).
	fixedTS bool
	// bulkChecked: the batch's BulkPuts had their timestamp and keys
	// checked (evaluate_bulk.go).
	bulkChecked bool
	// wroteKeys are the keys of LocksAcquired, for writeOpts.
	wroteKeys map[string]struct{}
	// self is the batch's transaction (also in a one-phase commit, which
	// evaluates its writes without one): its own unreplicated locks are
	// no conflict.
	self uuid.UUID
	// validGen is the validation cache's generation before the batch
	// read anything: what a refresh that reads installs at (validcache.go).
	validGen uint64
	// plainRead: the batch is one read of the leaseholder's engine (not
	// a follower's), the only batches the row cache serves and fills.
	plainRead bool
	// lockScan is a scan of the batch that an unreplicated lock's check
	// of its span answered (mvcc.CheckLockScan), with lockRows its rows.
	lockScan *kvpb.ScanRequest
	lockRows []kvpb.KeyValue
}

// Evaluate evaluates ba against the engine without changing anything: it
// returns the Proposal that Apply will commit and the response the batch
// gets once it has. The caller must hold latches covering ba (Send does)
// and, for a non-transactional batch, set ba.Timestamp.
func (r *Replica) Evaluate(ba *kvpb.BatchRequest) (*Proposal, *kvpb.BatchResponse, error) {
	return r.evaluate(ba, r.Desc(), evalOptions{}, nil)
}

// evaluate evaluates ba into a Proposal and its answer. out, when not nil,
// holds the answer of a batch of one request, and for a batch that only
// reads (or reads and takes unreplicated locks) it gets the evaluation's
// evalCtx to hand back (evalOut.recycle) once the caller is done with the
// Proposal; nil: evaluate allocates both.
func (r *Replica) evaluate(ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor, opts evalOptions, out *evalOut) (*Proposal, *kvpb.BatchResponse, error) {
	if isOnePC(ba, desc) {
		prop, br, err := r.evaluateOnePC(ba, desc)
		if !errors.Is(err, errNot1PC) {
			return prop, br, err
		}
	}
	ro := readOnly(ba)
	reads := ro || locksOnRead(ba)
	var ec *evalCtx
	if out != nil && reads {
		// A read's Proposal never leaves the replica (localOnly: no raft
		// entry holds it), so its evalCtx, 728 bytes and the largest
		// object a point read allocated, can serve the next read.
		ec = evalCtxPool.Get().(*evalCtx)
		out.ec = ec
	} else {
		ec = &evalCtx{}
		if out == nil {
			out = &evalOut{}
		}
	}
	*ec = evalCtx{r: r, ba: ba, desc: desc, txn: ba.Txn.Clone(), opts: opts, validGen: r.valid.generation(), out: out}
	ec.prop = &ec.propBuf
	if ba.Txn != nil {
		ec.self = ba.Txn.ID
	}
	ec.plainRead = ro && len(ba.Requests) == 1 && !opts.follower
	if reads {
		// A batch that reads, or reads and takes unreplicated locks
		// (which write nothing: applyUnreplicated), reads the engine
		// alone: no indexed batch, whose every iterator is built anew
		// over it and the engine. An UPDATE's locking read (the lock's
		// check of its row, then the scan of the row) then reads through
		// one iterator.
		ec.rd = r.eng
		if len(ba.Requests) > 1 && countsOnly(ba) {
			resps, err := ec.evalCounts()
			if err != nil {
				return nil, nil, err
			}
			return ec.prop, &kvpb.BatchResponse{Responses: resps, Txn: ec.txn}, nil
		}
		if len(ba.Requests) > 1 {
			// Many reads (a lookup join's batch, sorted by key): one
			// iterator walks them forward, keeping the blocks it holds
			// (storage.ReusingReader). Latches cover the whole batch, so
			// its view, fixed when the first iterator opens, is what
			// each read would have seen.
			rr := r.eng.NewReusingReader()
			defer rr.Close()
			ec.rd = rr
		}
	} else {
		// Its iterators are built once and reused (storage's
		// NewReusingBatch): the latches keep every other writer off
		// the keys the batch reads, so the engine's view the first one
		// takes is what each later read would have seen.
		ec.b = r.eng.NewReusingBatch()
		defer ec.b.Close()
		ec.rd = ec.b
	}
	var br *kvpb.BatchResponse
	if len(ba.Requests) == 1 {
		br = &out.one.br
		br.Responses = out.one.resp[:0]
	} else {
		br = newBatchResponse(len(ba.Requests))
	}
	for _, req := range ba.Requests {
		resp, err := ec.evalRequest(req)
		if err != nil {
			return nil, nil, err
		}
		br.Responses = append(br.Responses, resp)
	}
	br.Txn = ec.txn
	if ec.b != nil && !ec.b.Empty() {
		ec.prop.Repr = append([]byte(nil), ec.b.Repr()...)
	}
	return ec.prop, br, nil
}

// oneResponse is a BatchResponse of one request with room for its
// response: a batch of one (a point read) is one allocation, not two.
type oneResponse struct {
	br   kvpb.BatchResponse
	resp [1]kvpb.Response
}

// evalOut is the answer of a batch of one request: its BatchResponse, and
// when the request is a Scan (a point read's) its ScanResponse and room
// for its row. Replica.send keeps one in its sendState, so that a point
// read's request copy, latch guard and answer are one allocation. ec is
// the evaluation to recycle once its Proposal is done with (nil: none).
type evalOut struct {
	one     oneResponse
	scanOne struct {
		resp kvpb.ScanResponse
		row  [1]kvpb.KeyValue
	}
	ec *evalCtx
}

// evalCtxPool holds the evalCtxs of evaluations that only read
// (evaluate): a point read allocated one per request.
var evalCtxPool = sync.Pool{New: func() any { return new(evalCtx) }}

// recycle hands the evaluation back once nothing uses its Proposal: after
// the Proposal was applied without the log (every read's is localOnly),
// under the latches of the batch. The answer lives in out, not in the
// evalCtx, so it is the caller's still.
func (out *evalOut) recycle() {
	if out == nil || out.ec == nil {
		return
	}
	ec := out.ec
	out.ec = nil
	*ec = evalCtx{}
	evalCtxPool.Put(ec)
}

// newBatchResponse returns an empty BatchResponse with room for n
// responses.
func newBatchResponse(n int) *kvpb.BatchResponse {
	if n == 1 {
		o := &oneResponse{}
		o.br.Responses = o.resp[:0]
		return &o.br
	}
	return &kvpb.BatchResponse{Responses: make([]kvpb.Response, 0, n)}
}

// countsOnly reports whether every request of ba is a counting scan
// (kvpb.ScanRequest.CountTags).
func countsOnly(ba *kvpb.BatchRequest) bool {
	for _, req := range ba.Requests {
		if sc, ok := req.(*kvpb.ScanRequest); !ok || len(sc.CountTags) == 0 {
			return false
		}
	}
	return true
}

// evalCounts evaluates a batch of counting scans that reached evaluation
// whole (a non-transactional one; a transaction's goes through
// sendCounts, a request at a time) on up to GOMAXPROCS goroutines. Each only reads the engine, under the batch's
// latches, so no write in their spans lands between them (as for the
// reads of any batch), and returns a number; a count of a large table is
// bound by this walk's CPU. The answer is sequential evaluation's: the
// responses in order, or the error of the first request, in batch order,
// that failed.
func (ec *evalCtx) evalCounts() ([]kvpb.Response, error) {
	reqs := ec.ba.Requests
	resps := make([]kvpb.Response, len(reqs))
	errs := make([]error, len(reqs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(reqs), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) {
					return
				}
				resps[i], errs[i] = ec.scan(reqs[i].(*kvpb.ScanRequest))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return resps, nil
}

// sendCounts runs a transaction's batch of counting scans (count(*) at
// the tablets: sql/exec cuts a large count into such batches) as
// one-request batches, each through send with latches of its own, on up
// to GOMAXPROCS goroutines that take the requests in order as they free
// up. Each request examines at most its page of rows (MaxKeys), so no
// latch is held longer than one page's walk whatever the batch's size,
// and a batch may carry many more requests than there are cores: a
// goroutine that finishes early takes the next instead of waiting for
// the slowest (bench/README.md, "Issue 22, ninth session").
//
// The answer is what sending the requests one by one at the batch's
// transaction, in one round, would give: each is read at the
// transaction's read timestamp and recorded in the timestamp cache
// before its latches go, so no write lands under a piece once it is read;
// the batch's observed timestamp is taken once, before the pieces, so all
// of them have the same uncertainty limit. Nothing holds the pieces at
// one engine state, and nothing needs to: MVCC reads at one timestamp
// whose spans the timestamp cache protects see the same versions
// whenever they run. The error is the first, in batch order, of the
// requests that failed (a request after a failed one is not started).
func (r *Replica) sendCounts(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	exec := *ba
	r.stampObservation(&exec)
	reqs := ba.Requests
	brs := make([]*kvpb.BatchResponse, len(reqs))
	errs := make([]error, len(reqs))
	var next, failed atomic.Int64
	failed.Store(int64(len(reqs)))
	var wg sync.WaitGroup
	for range min(len(reqs), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= failed.Load() {
					return
				}
				one := exec
				one.Requests = reqs[i : i+1]
				brs[i], errs[i] = r.send(ctx, &one)
				if errs[i] != nil {
					for f := failed.Load(); i < f && !failed.CompareAndSwap(f, i); f = failed.Load() {
					}
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f < int64(len(reqs)) {
		return nil, errs[f]
	}
	out := &kvpb.BatchResponse{Responses: make([]kvpb.Response, len(reqs))}
	for i, br := range brs {
		out.Responses[i] = br.Responses[0]
		out.Now = out.Now.Forward(br.Now)
		switch {
		case br.Txn == nil:
		case out.Txn == nil:
			out.Txn = br.Txn
		default:
			// Reads do not move the transaction; should one, the
			// highest write timestamp is where it now stands.
			out.Txn.WriteTimestamp = out.Txn.WriteTimestamp.Forward(br.Txn.WriteTimestamp)
		}
	}
	return out, nil
}

// readOnly reports whether every request of ba only reads user data.
// locksOnRead reports whether every request of ba reads or takes an
// unreplicated lock, with at least one lock (kv's Txn.runLockingRead: an
// UPDATE's read of its row).
func locksOnRead(ba *kvpb.BatchRequest) bool {
	locks := false
	for _, req := range ba.Requests {
		switch req := req.(type) {
		case *kvpb.GetRequest, *kvpb.ScanRequest, *kvpb.RefreshRequest:
		case *kvpb.LockRequest:
			if !req.Unreplicated {
				return false
			}
			locks = true
		default:
			return false
		}
	}
	return locks
}

func readOnly(ba *kvpb.BatchRequest) bool {
	for _, req := range ba.Requests {
		switch req.(type) {
		case *kvpb.GetRequest, *kvpb.ScanRequest, *kvpb.RefreshRequest:
		default:
			return false
		}
	}
	return true
}

func (ec *evalCtx) evalRequest(req kvpb.Request) (kvpb.Response, error) {
	switch req.(type) {
	case *kvpb.PutRequest, *kvpb.ConditionalPutRequest, *kvpb.DeleteRequest, *kvpb.DeleteRangeRequest, *kvpb.IncrementRequest:
		if err := ec.checkUnreplicated(req); err != nil {
			return nil, err
		}
	}
	switch req := req.(type) {
	case *kvpb.GetRequest:
		return ec.get(req)
	case *kvpb.ScanRequest:
		return ec.scan(req)
	case *kvpb.PutRequest:
		return ec.put(req)
	case *kvpb.ConditionalPutRequest:
		return ec.conditionalPut(req)
	case *kvpb.DeleteRequest:
		return ec.delete(req)
	case *kvpb.DeleteRangeRequest:
		return ec.deleteRange(req)
	case *kvpb.EndTxnRequest:
		return ec.endTxn(req)
	case *kvpb.HeartbeatTxnRequest:
		return ec.heartbeatTxn(req)
	case *kvpb.PushTxnRequest:
		return ec.pushTxn(req)
	case *kvpb.QueryTxnRequest:
		return ec.queryTxn(req)
	case *kvpb.ResolveIntentRequest:
		return ec.resolveIntent(req)
	case *kvpb.ResolveIntentRangeRequest:
		return ec.resolveIntentRange(req)
	case *kvpb.GCRequest:
		return ec.gc(req)
	case *kvpb.RefreshRequest:
		return ec.refresh(req)
	case *kvpb.IncrementRequest:
		return ec.increment(req)
	case *kvpb.LockRequest:
		return ec.lock(req)
	case *kvpb.BulkPutRequest:
		return ec.bulkPut(req)
	case *kvpb.ClearRangeRequest:
		return ec.clearRange(req)
	case *kvpb.AddSSTableRequest:
		return ec.addSSTable(req)
	}
	return nil, invalidArg("tablet cannot evaluate %s", req.Method())
}

// readTS is where the batch reads.
func (ec *evalCtx) readTS() hlc.Timestamp {
	if ec.txn != nil {
		return ec.txn.ReadTimestamp
	}
	return ec.ba.Timestamp
}

// writeTS is where a write to span lands: the batch timestamp or the
// transaction's write timestamp, moved above any read of span the
// timestamp cache remembers (invariant 4). A transaction's own reads do
// not push it. For a transaction the push sticks: ec.txn carries it into
// the response, and every later write of the batch lands there too.
func (ec *evalCtx) writeTS(span kvpb.Span) hlc.Timestamp {
	if ec.fixedTS {
		return ec.ba.Timestamp
	}
	// Only reads at or above the write's timestamp move it.
	floor := ec.ba.Timestamp
	if ec.txn != nil {
		floor = ec.txn.WriteTimestamp
	}
	rts, rtxn := ec.r.tscache.getMaxFrom(span, floor)
	if ec.txn == nil {
		ts := ec.ba.Timestamp
		if ts.LessEq(rts) {
			ts = rts.Next()
		}
		ec.prop.wroteAt = ec.prop.wroteAt.Forward(ts)
		return ts
	}
	if ec.txn.WriteTimestamp.LessEq(rts) && rtxn != ec.txn.ID {
		ec.txn.WriteTimestamp = rts.Next()
	}
	ec.prop.wroteAt = ec.prop.wroteAt.Forward(ec.txn.WriteTimestamp)
	return ec.txn.WriteTimestamp
}

// wrote records an intent the batch laid down.
func (ec *evalCtx) wrote(key []byte) {
	if ec.txn != nil {
		ec.prop.LocksAcquired = append(ec.prop.LocksAcquired, kvpb.Intent{Key: append([]byte(nil), key...), Txn: ec.txn.TxnMeta})
		if ec.wroteKeys == nil {
			ec.wroteKeys = make(map[string]struct{})
		}
		ec.wroteKeys[string(key)] = struct{}{}
	}
}

func wrapEval(req kvpb.Request, err error) error {
	return fmt.Errorf("%s %s: %w", req.Method(), req.Span(), err)
}

// checkUnreplicated fails a write (or lock) that meets another
// transaction's unreplicated lock in its span with the *WriteIntentError
// an intent there would give, so the batch waits on it the same way
// (registerWait: the same queue, pushes and deadlock detection).
func (ec *evalCtx) checkUnreplicated(req kvpb.Request) error {
	s := req.Span()
	var end []byte
	if len(s.EndKey) > 0 {
		end = s.EndKey
	}
	if in, ok := ec.r.locks.unreplConflict(s.Key, end, ec.self); ok {
		return &kvpb.WriteIntentError{Intents: []kvpb.Intent{in}}
	}
	return nil
}
