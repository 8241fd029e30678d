package tablet

import (
	"errors"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
)

// One-phase commit: a transaction whose every write is in one batch on one
// tablet, ending with EndTxn{Commit: true}, commits by writing its values
// as committed versions at its write timestamp: no intents, no record
// (DESIGN §6; this is what colocation buys).
//
// The conflict checks are those of transactional writes. Since there is no
// record or intent for a coordinator to fix up afterwards, any movement of
// the write timestamp (by the timestamp cache) fails the whole batch with a
// retryable *kvpb.TransactionRetryError and nothing is written; and the
// fast path is only taken when the write timestamp equals the read
// timestamp, so "no committed version above the read timestamp" and "no
// committed version at or above the write timestamp" are the same check.
//
// The batch may begin with RefreshRequests (the coordinator's checks of
// its buffered keys and its validation of the keys its writes depend on,
// kv.Txn.tryOnePhase): they are evaluated first, as they would have been
// in a batch of their own just before, under this batch's latches, and a
// failed one fails the batch with nothing written. A strict one leaves
// its key in the timestamp cache at the commit timestamp
// (Replica.recordReads), where a separate validation would have left it.

// isOnePC reports whether ba has the shape of a one-phase commit on desc.
func isOnePC(ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor) bool {
	n := len(ba.Requests)
	if ba.Txn == nil || n < 2 || ba.Txn.WriteTimestamp != ba.Txn.ReadTimestamp || ba.Txn.Status != kvpb.Pending {
		return false
	}
	et, ok := ba.Requests[n-1].(*kvpb.EndTxnRequest)
	if !ok || !et.Commit {
		return false
	}
	writes := ba.Requests[onePCChecks(ba) : n-1]
	if len(writes) == 0 {
		return false
	}
	for _, req := range writes {
		if !req.Method().IsTxnWrite() {
			return false
		}
	}
	for _, ls := range et.LockSpans {
		if !desc.ContainsSpan(ls) || !coveredByWrites(ls, writes) {
			return false
		}
	}
	return true
}

// onePCChecks is the number of RefreshRequests leading ba.
func onePCChecks(ba *kvpb.BatchRequest) int {
	for i, req := range ba.Requests {
		if _, ok := req.(*kvpb.RefreshRequest); !ok {
			return i
		}
	}
	return len(ba.Requests)
}

// coveredByWrites reports whether one of the batch's writes spans all of s.
func coveredByWrites(s kvpb.Span, writes []kvpb.Request) bool {
	for _, w := range writes {
		ws := w.Span()
		if string(ws.Key) <= string(s.Key) && string(spanEnd(s)) <= string(spanEnd(ws)) {
			return true
		}
	}
	return false
}

// evaluateOnePC evaluates a one-phase commit, or returns errNot1PC when the
// transaction already has a record or meets its own intent (an earlier
// batch wrote), in which case the caller evaluates the batch normally.
//
// A read of one of its written keys above its timestamp (a timestamp-cache
// entry) would move the commit timestamp; a read of a key it only locks
// would not, since a lock writes no version. Without EndTxn.MayMoveCommit that fails
// the batch (TransactionRetryError, nothing written). With it (a READ
// COMMITTED transaction, whose reads need no refresh) the writes are first
// evaluated at the batch's timestamp and thrown away, which fails the
// batch if another transaction committed a version of a key at or above
// it or holds a lock there, and then evaluated for real just above the
// highest such read: a contended row's one-phase commit need not fall back
// to intents, a record and a second phase, holding its locks all the
// while, because another session read the row a moment later.
func (r *Replica) evaluateOnePC(ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor) (*Proposal, *kvpb.BatchResponse, error) {
	n := len(ba.Requests)
	et := ba.Requests[n-1].(*kvpb.EndTxnRequest)
	// The record is read only if one may exist (txnrecordmarks.go): a
	// Pebble Get of a key that is almost never there, a tenth of the
	// commit's evaluation.
	if r.recMarks.mayExist(ba.Txn.ID, ba.Txn.MinTimestamp) {
		r.metrics.OnePCRecordReads.Add(1)
		if _, found, err := mvcc.GetTxnRecord(r.eng, et.Key, ba.Txn.ID); err != nil {
			return nil, nil, wrapEval(et, err)
		} else if found {
			return nil, nil, errNot1PC
		}
	}
	if !r.tombs.canCreate(ba.Txn.ID, ba.Txn.MinTimestamp) {
		// Its record was deleted, or may have been (txntombstone.go): a
		// pusher that finds no record for it takes it for aborted, so it
		// must never commit. The two-phase path's EndTxn says how it
		// ended (TestOnePCRefusedRecord).
		return nil, nil, errNot1PC
	}
	checks := onePCChecks(ba)
	// The answer, its responses (up to onePCInline), the committed
	// transaction and the writes' evaluation context are one object.
	o := &onePC{}
	br := &o.br
	if n <= len(o.resps) {
		br.Responses = o.resps[:0:n]
	} else {
		br.Responses = make([]kvpb.Response, 0, n)
	}
	if checks > 0 {
		cc := &o.checks
		*cc = evalCtx{r: r, rd: r.eng, ba: ba, desc: desc, txn: ba.Txn, self: ba.Txn.ID, validGen: r.valid.generation()}
		cc.prop = &cc.propBuf
		if checks > 1 {
			// One iterator, its bounds reset per check, instead of one
			// built per check (a third of a check's CPU): as for a
			// read-only batch of many reads (evaluate), the latches
			// cover every checked key, so the view fixed when the
			// iterator opens is what each check would have seen.
			// Built at the first read: the validation cache answers
			// most checks without one (simple-update's two).
			o.lazy = lazyReader{eng: r.eng}
			defer o.lazy.close()
			cc.rd = &o.lazy
		}
		for _, req := range ba.Requests[:checks] {
			resp, err := cc.refresh(req.(*kvpb.RefreshRequest))
			if err != nil {
				return nil, nil, err
			}
			br.Responses = append(br.Responses, resp)
		}
	}
	ts := ba.Txn.WriteTimestamp
	var above hlc.Timestamp
	for _, req := range ba.Requests[checks : n-1] {
		if _, ok := req.(*kvpb.LockRequest); ok {
			// A lock writes no version, so no read of its span can be
			// invalidated by it: the timestamp cache has no say over it
			// (as in ec.lock, the two-phase path). The keys the batch
			// does write are looked up below, each for every read
			// covering it, the lock's span included. The lookup of a
			// lock's span was a span lookup (SQL's UPDATE locks its
			// row's span), which indexed every point and row read since
			// the last one: most of the one-phase commit's look-ups
			// under simple-update (bench/README.md, thirteenth session).
			continue
		}
		if rts, rtxn := r.tscache.getMaxFrom(req.Span(), ts); ts.LessEq(rts) && rtxn != ba.Txn.ID {
			if !et.MayMoveCommit {
				return nil, nil, &kvpb.TransactionRetryError{
					Reason: kvpb.RetrySerializable,
					Detail: "one-phase commit of " + ba.Txn.Short() + " would be pushed above " + rts.String() + " by a read of " + req.Span().String(),
				}
			}
			above = above.Forward(rts.Next())
		}
	}
	if !above.IsEmpty() {
		// Thrown away: its own context and answers.
		ec, _, err := r.evalOnePCWrites(ba, desc, ts, &onePC{}, nil)
		ec.close()
		if err != nil {
			return nil, nil, err
		}
		ts = above
	}
	ec, resps, err := r.evalOnePCWrites(ba, desc, ts, o, br.Responses)
	defer ec.close()
	if err != nil {
		return nil, nil, err
	}
	br.Responses = append(resps, &kvpb.EndTxnResponse{})
	committed := &o.committed
	ba.Txn.CloneInto(committed)
	committed.Status = kvpb.Committed
	committed.WriteTimestamp = ts
	committed.LockSpans = append([]kvpb.Span(nil), et.LockSpans...)
	br.Txn = committed
	br.OnePhaseCommit = true
	ec.prop.OnePhaseCommit = true
	// Committed: its unreplicated locks here are released once the values
	// are applied, so their waiters find the new versions.
	ec.prop.unreplEnded = ba.Txn.ID
	// A commit moved above a closed timestamp lands in the future; its
	// answer waits for it (closedts.go, rule 3).
	ec.prop.wroteAt = ts
	if !ec.b.Empty() {
		ec.prop.Repr = append([]byte(nil), ec.b.Repr()...)
	}
	return ec.prop, br, nil
}

// onePC is what a one-phase commit's evaluation allocates, in one object:
// its answer and the answer's first responses, the committed transaction,
// the context of its leading checks, and the context of its writes with
// the non-transactional header they are evaluated under. The Proposal
// (the writes context's propBuf) keeps it alive until it is applied.
type onePC struct {
	br        kvpb.BatchResponse
	resps     [onePCInline]kvpb.Response
	committed kvpb.Transaction
	checks    evalCtx
	writes    evalCtx
	nonTxn    kvpb.BatchRequest
	lazy      lazyReader
}

// lazyReader reads eng through a ReusingReader it builds at its first
// read.
type lazyReader struct {
	eng *storage.Engine
	rr  *storage.ReusingReader
}

func (l *lazyReader) reader() *storage.ReusingReader {
	if l.rr == nil {
		l.rr = l.eng.NewReusingReader()
	}
	return l.rr
}

// Get implements storage.Reader.
func (l *lazyReader) Get(key storage.MVCCKey) ([]byte, bool, error) { return l.reader().Get(key) }

// NewIter implements storage.Reader.
func (l *lazyReader) NewIter(opts storage.IterOptions) (*storage.Iterator, error) {
	return l.reader().NewIter(opts)
}

// close closes the ReusingReader, if one was built.
func (l *lazyReader) close() {
	if l.rr != nil {
		l.rr.Close()
		l.rr = nil
	}
}

// onePCInline is how many responses a one-phase answer holds without a
// slice of its own: simple-update's commit has 6 requests (2 checks, a
// lock, 2 writes and EndTxn), tpcb-like's 10.
const onePCInline = 12

// evalOnePCWrites evaluates the writes of the one-phase batch ba (not its
// leading checks) as non-transactional writes landing exactly at ts: a
// committed version at or above ts is WriteTooOld and any other
// transaction's lock a conflict. Its context is o.writes, and it appends
// the writes' responses to resps.
// The caller closes the returned context's batch.
func (r *Replica) evalOnePCWrites(ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor, ts hlc.Timestamp, o *onePC, resps []kvpb.Response) (*evalCtx, []kvpb.Response, error) {
	n := len(ba.Requests)
	o.nonTxn = *ba
	o.nonTxn.Txn = nil
	o.nonTxn.Timestamp = ts
	// Under the batch's latches: its iterators may be reused (as in
	// evaluate).
	b := r.eng.NewReusingBatch()
	ec := &o.writes
	*ec = evalCtx{r: r, b: b, rd: b, ba: &o.nonTxn, desc: desc, fixedTS: true, self: ba.Txn.ID}
	ec.prop = &ec.propBuf
	for _, req := range ba.Requests[onePCChecks(ba) : n-1] {
		resp, err := ec.evalRequest(req)
		if err != nil {
			var wie *kvpb.WriteIntentError
			if errors.As(err, &wie) {
				for _, in := range wie.Intents {
					if in.Txn.ID == ba.Txn.ID {
						return ec, nil, errNot1PC
					}
				}
			}
			return ec, nil, err
		}
		resps = append(resps, resp)
	}
	return ec, resps, nil
}

// close releases the evaluation batch, if any.
func (ec *evalCtx) close() {
	if ec != nil && ec.b != nil {
		ec.b.Close()
		ec.b = nil
	}
}
