package tablet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	"github.com/google/uuid"
)

// Replica is one tablet's replica: its span, its in-memory concurrency
// state and the evaluation of batches against the store's engine. All
// methods are safe for concurrent use.
type Replica struct {
	eng     *storage.Engine
	clock   *hlc.Clock
	cfg     Config
	latches *latchManager
	tscache *tsCache
	locks   *lockTable
	// valid remembers the newest version of keys that strict refreshes
	// validate (validcache.go, invariant 12).
	valid   validCache
	txnWait *txnWaitQueue
	metrics Metrics
	// tombs guards deleted transaction records (txntombstone.go).
	tombs *txnTombstones
	// recMarks names the transactions that may have a record here
	// (txnrecordmarks.go, invariant 14).
	recMarks *txnRecordMarks
	// samples holds request keys for load-based splits (loadsample.go).
	samples loadSampler
	// raft is set when the replica is one of a raft group's (raft.go).
	raft raftState
	// closed is the highest closed timestamp applied (closedts.go) and
	// proposed, the highest this replica proposed as leaseholder;
	// advanced, when set, is closed when ts moves.
	// trailing is CloseTrailing's closing in progress (closedts.go).
	trailing struct {
		mu      sync.Mutex
		pending trailingClosing
	}
	closed struct {
		mu       sync.Mutex
		ts       hlc.Timestamp
		proposed hlc.Timestamp
		advanced chan struct{}
		// applied is the highest raft index applied here; pending a
		// side-transport closing waiting for it (closedts.go).
		applied uint64
		pending sideClosed
		// trailing: ts came from the side transport.
		trailing bool
	}

	// async tracks background intent resolution so Close can wait for it.
	asyncMu     sync.Mutex
	asyncClosed bool
	async       sync.WaitGroup
	ctx         context.Context
	cancel      context.CancelFunc

	// descView and gcView are copies of mu.desc and mu.gcThreshold, each
	// replaced whole under mu's write lock whenever the field changes
	// (setDescLocked, setGCThresholdLocked), so that every batch reads
	// them without mu: a point read read-locked mu four times (Desc in
	// validate and twice in executeOnce, the GC threshold in its scan),
	// eight atomic read-modify-writes on the line every batch of the
	// tablet shares (invariant 13).
	descView atomic.Pointer[kvpb.TabletDescriptor]
	gcView   atomic.Pointer[hlc.Timestamp]

	mu struct {
		sync.RWMutex
		desc kvpb.TabletDescriptor
		// abortReasons remembers why transactions whose records live here
		// were aborted, so a later EndTxn or waiter can say. It is a cache:
		// after a restart the reason falls back to AbortPushed. A split
		// moves the reasons of records anchored on the right to the right
		// side (split.go).
		abortReasons map[uuid.UUID]abortReason
		// gcThreshold mirrors the persisted GC threshold (gcthreshold.go).
		gcThreshold hlc.Timestamp
	}
}

// abortReason is why a transaction was aborted, and its record's anchor
// key (which side of a split the record lives on).
type abortReason struct {
	reason kvpb.AbortReason
	anchor []byte
}

// maxAbortReasons bounds the abort-reason cache.
const maxAbortReasons = 1 << 14

// New opens the replica of desc over eng, rebuilding its lock table from the
// intents stored in its span.
func New(eng *storage.Engine, clock *hlc.Clock, desc kvpb.TabletDescriptor, cfg Config) (*Replica, error) {
	cfg = cfg.withDefaults()
	if cfg.Sender == nil {
		return nil, errors.New("tablet: Config.Sender is required")
	}
	th, err := loadGCThreshold(eng, desc.TabletID)
	if err != nil {
		return nil, fmt.Errorf("tablet: load GC threshold of %s: %w", &desc, err)
	}
	// Writes must land above both every read served before a restart
	// (which the clock, never going backwards, bounds) and the GC
	// threshold.
	closed, err := loadClosedTS(eng, desc.TabletID)
	if err != nil {
		return nil, fmt.Errorf("tablet: load closed timestamp of %s: %w", &desc, err)
	}
	// ... and every closed timestamp any replica may have served reads
	// under (closedts.go, rule 2).
	r := newReplica(eng, clock, desc, cfg, newTSCache(clock.Now().Forward(th).Forward(closed), cfg.TSCacheMaxEntries), newLockTable())
	r.setGCThresholdLocked(th)
	r.closed.ts = closed
	intents, err := mvcc.ScanIntents(eng, desc.StartKey, desc.EndKey, 0)
	if err != nil {
		return nil, fmt.Errorf("tablet: rebuild lock table of %s: %w", &desc, err)
	}
	for _, in := range intents {
		r.locks.acquire(in.Key, in.Txn)
	}
	return r, nil
}

func newReplica(eng *storage.Engine, clock *hlc.Clock, desc kvpb.TabletDescriptor, cfg Config, tc *tsCache, lt *lockTable) *Replica {
	tc.reads = cfg.Reads
	r := &Replica{
		eng:     eng,
		clock:   clock,
		cfg:     cfg,
		latches: newLatchManager(),
		tscache: tc,
		locks:   lt,
		txnWait: newTxnWaitQueue(),
		tombs:   newTxnTombstones(clock.Now()),
		// Records already in the engine (before a restart, or written
		// through the left side of a split) were written for
		// transactions that began by now.
		recMarks: newTxnRecordMarks(horizon(clock)),
	}
	if o := cfg.Observe; o != nil && o.LockHold != nil {
		lt.observeHold = o.LockHold
	}
	r.valid.budget = cfg.RowCache
	if o := cfg.Observe; o != nil && o.ValidInstall != nil {
		r.valid.observe = o.ValidInstall
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.raft.leave = func() { r.raft.active.Add(-1) }
	r.setDescLocked(desc)
	r.setGCThresholdLocked(hlc.Timestamp{})
	r.mu.abortReasons = make(map[uuid.UUID]abortReason)
	return r
}

// Desc returns the replica's current descriptor.
func (r *Replica) Desc() kvpb.TabletDescriptor {
	return *r.descView.Load()
}

// setDescLocked sets the descriptor; r.mu is held for writing (or r is
// not shared yet).
func (r *Replica) setDescLocked(d kvpb.TabletDescriptor) {
	r.mu.desc = d
	r.descView.Store(&d)
}

// setGCThresholdLocked sets the GC threshold; r.mu is held for writing
// (or r is not shared yet).
func (r *Replica) setGCThresholdLocked(th hlc.Timestamp) {
	r.mu.gcThreshold = th
	r.gcView.Store(&th)
}

// Metrics returns the replica's counters.
func (r *Replica) Metrics() *Metrics { return &r.metrics }

// LockWaiters reports how many requests are queued on the replica's locks
// right now (a gauge for contention views, and for tests to wait on).
func (r *Replica) LockWaiters() int { return r.locks.numWaiters() }

// Close stops background intent resolution and waits for it.
func (r *Replica) Close() {
	r.asyncMu.Lock()
	r.asyncClosed = true
	r.asyncMu.Unlock()
	r.cancel()
	r.async.Wait()
	// Give the row cache's bytes back to the node's budget.
	r.valid.reset()
}

func (r *Replica) abortReason(id uuid.UUID) kvpb.AbortReason {
	return r.abortReasonOr(id, kvpb.AbortPushed)
}

// abortReasonOr is abortReason with def when the replica does not know.
func (r *Replica) abortReasonOr(id uuid.UUID, def kvpb.AbortReason) kvpb.AbortReason {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if reason, ok := r.mu.abortReasons[id]; ok {
		return reason.reason
	}
	return def
}

// Send evaluates and applies ba, waiting on locks and pushing their holders
// as needed (see the package doc for the path of a request).
func (r *Replica) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if r.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if err := r.refuseIfFollower(); err != nil {
		if br, served, ferr := r.followerRead(ctx, ba); served {
			return br, ferr
		}
		return nil, err
	}
	if err := r.validate(ba); err != nil {
		return nil, err
	}
	if ba.IsReadOnly() || onlyUnreplicatedLocks(ba) {
		r.maybeSample(r.metrics.ReadBatches.Add(1), ba)
	} else {
		r.maybeSample(r.metrics.WriteBatches.Add(1), ba)
	}
	if ba.Txn != nil && len(ba.Requests) > 1 && countsOnly(ba) {
		return r.sendCounts(ctx, ba)
	}
	return r.send(ctx, ba)
}

// send is Send for a batch that was checked (validate) and counted.
func (r *Replica) send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	// A non-transactional batch without a timestamp gets one here, once,
	// so every retry after waiting reads and writes at the same time (and
	// a reader's push asks for the timestamp it will read at).
	//
	// The copy, the latch guard of the first pass and the answer are one
	// object (sendState): a point read allocates it once, not three.
	st := &sendState{exec: *ba}
	exec := &st.exec
	r.stampObservation(exec)
	serverTS := ba.Txn == nil && ba.Timestamp.IsEmpty()
	if serverTS {
		exec.Timestamp = r.clock.Now()
	}
	guard := &st.guard
	for wtoRetries := 0; ; {
		// A pass after the first gets a new guard: guards that waited on
		// the released one may still hold it.
		g := guard
		guard = nil
		br, wroteAt, w, err := r.executeOnce(ctx, exec, g, &st.out, evalOptions{serverTS: serverTS})
		if err != nil {
			// Declared here, not above: errors.As needs its address, which
			// moves it to the heap, and the success path should not pay.
			var wto *kvpb.WriteTooOldError
			if serverTS && errors.As(err, &wto) && wtoRetries < maxWriteTooOldRetries {
				// The tablet chose the timestamp, so it may choose a later
				// one: nobody has observed the earlier.
				wtoRetries++
				exec.Timestamp = r.clock.Now().Forward(wto.ActualTimestamp)
				continue
			}
			if wto != nil || errors.As(err, &wto) {
				// The writer retries at the version's timestamp, which a
				// closed timestamp may have put in the future.
				if werr := r.waitPhysical(ctx, wto.ActualTimestamp, false); werr != nil {
					return nil, werr
				}
			}
			return nil, err
		}
		if w == nil {
			if err := r.waitPhysical(ctx, wroteAt, true); err != nil {
				return nil, err
			}
			if err := r.commitWait(ctx, !ba.IsReadOnly()); err != nil {
				return nil, err
			}
			if serverTS && readOnly(exec) {
				// Reads at a timestamp the tablet took from its clock
				// (exec's: send's reading, or executeOnce's past a new
				// lease's start) reveal nothing above it: the answer's
				// Now is that reading, which moves the sender's clock
				// past everything the answer shows, as a new reading
				// would, without a fourth reading of the physical clock
				// per point read (TestPointReadClockReadings).
				br.Now = exec.Timestamp
			} else {
				br.Now = r.clock.Now()
			}
			return br, nil
		}
		var pr *kvpb.PushTxnResponse
		switch {
		case w.locks != nil:
			err = r.waitForLocks(ctx, exec, w.locks)
		case w.push != nil:
			pr, err = r.waitForPush(ctx, exec, w.push)
		}
		if err != nil {
			return nil, err
		}
		if pr != nil {
			return &kvpb.BatchResponse{Responses: []kvpb.Response{pr}, Now: r.clock.Now()}, nil
		}
	}
}

// commitWait holds an answer until this node's physical clock has passed
// its hybrid clock, which bounds every timestamp the batch wrote or read
// at. A write may land ahead of the leaseholder's physical clock (a
// transaction pushed to a reader's uncertainty limit, a timestamp cache
// entry or lease start from a clock that runs ahead), up to the maximum
// offset. Acknowledged at once — or shown to a reader at once, which is
// as good as acknowledged — a reader on a node whose clock is behind this
// one's (by less than the maximum offset) could start after that answer
// and still place its read, uncertainty interval included, below the
// write: a stale read. (That gateway does not catch up by the answer's
// timestamp either: its clock refuses one more than the maximum offset
// ahead of it.) Waiting makes every timestamp an answer reveals at most
// this node's physical clock at the answer, so the pairwise offset alone
// bounds how far ahead of a later reader's clock it can be. Found by
// testcluster's TestLinearizableRegistersClockOffset with one clock 0.8 ×
// the maximum offset ahead (writes answered at once) and behind (a read
// saw a write still waiting to be answered). While the hybrid clock is
// not ahead of the physical one it costs one clock reading.
func (r *Replica) commitWait(ctx context.Context, wrote bool) error {
	if r.clock.MaxOffset() == 0 {
		return nil
	}
	d := r.clock.Lead()
	if d <= 0 {
		return nil
	}
	d = min(d, r.clock.MaxOffset())
	r.metrics.CommitWaits.Add(1)
	r.metrics.CommitWaitNanos.Add(int64(d))
	if d >= r.clock.MaxOffset()/4 {
		r.metrics.LongCommitWaits.Add(1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		err := fmt.Errorf("tablet %d: waiting out the clock before answering: %w", r.Desc().TabletID, ctx.Err())
		if wrote {
			// Applied, but the caller gives up before hearing so.
			return &kvpb.AmbiguousResultError{Cause: err}
		}
		return err
	case <-t.C:
		return nil
	}
}

// maxWriteTooOldRetries bounds how often a batch whose timestamp the tablet
// chose is retried higher after meeting a newer committed version.
const maxWriteTooOldRetries = 3

// waitFor says what executeOnce registered to wait on before releasing its
// latches.
type waitFor struct {
	locks *lockWait
	push  *pushWaiter
}

// sendState is what send allocates for a batch: the copy of the request
// it stamps, the latch guard of its first pass, and the answer of a batch
// of one request (a later pass overwrites it: only the last pass's answer
// is returned).
type sendState struct {
	exec  kvpb.BatchRequest
	guard latchGuard
	out   evalOut
}

// executeOnce runs one pass of ba under latches: evaluate, then apply. A
// non-transactional ba must carry its timestamp. g is the pass's latch
// guard, zero and never acquired before (nil: executeOnce allocates one);
// out is where the answer of a batch of one request goes (evaluate).
// wroteAt is the highest timestamp the batch wrote a user key at (zero:
// none). A conflict it may wait on is registered (under the latches, so
// no release can be missed) and returned instead of an error.
func (r *Replica) executeOnce(ctx context.Context, ba *kvpb.BatchRequest, g *latchGuard, out *evalOut, opts evalOptions) (br *kvpb.BatchResponse, wroteAt hlc.Timestamp, w *waitFor, err error) {
	desc := r.Desc()
	if g == nil {
		g = &latchGuard{}
	}
	g, err = r.latches.acquireBatchInto(ctx, g, ba, desc)
	if err != nil {
		return nil, hlc.Timestamp{}, nil, err
	}
	// handedOff: a proposal the caller gave up on is still in flight, and
	// its latches and lease hold go when its fate is known (commitOr).
	handedOff := false
	defer func() {
		if !handedOff {
			r.latches.release(g)
		}
	}()
	// The span may have shrunk (split) while we waited.
	desc = r.Desc()
	if err := checkKeys(ba, desc); err != nil {
		return nil, hlc.Timestamp{}, nil, err
	}
	// Under latches: a lease lost from here on fails the proposal, never
	// lets another leaseholder's conflicting write in between.
	term, done, err := r.leaseTerm(ctx)
	if err != nil {
		return nil, hlc.Timestamp{}, nil, err
	}
	defer func() {
		if !handedOff {
			done()
		}
	}()
	if opts.serverTS {
		// Stamped before a new lease's start was waited out: the previous
		// leaseholder may have acknowledged writes above that stamp (its
		// clock ahead of ours), and a read there would miss them. Nobody
		// has seen the stamp, so it may move; ba is the caller's copy, so
		// its retries keep the new one.
		if start := r.leaseStartOf(term); ba.Timestamp.Less(start) {
			ba.Timestamp = r.clock.Now()
		}
	}
	if ba.Txn != nil {
		opts.localLimit = ba.Txn.LocalUncertaintyLimit(r.nodeID(), r.leaseStartOf(term))
	}
	prop, br, err := r.evaluate(ba, desc, opts, out)
	if err != nil {
		if w := r.registerWait(ba, err); w != nil {
			return nil, hlc.Timestamp{}, w, nil
		}
		return nil, hlc.Timestamp{}, nil, err
	}
	if err := r.commitOr(ctx, term, prop, func(settled <-chan struct{}) {
		handedOff = true
		go func() {
			<-settled
			done()
			r.latches.release(g)
		}()
	}); err != nil {
		return nil, hlc.Timestamp{}, nil, err
	}
	r.applyUnreplicated(prop)
	r.recordReads(ba, br)
	wroteAt = prop.wroteAt
	if localOnly(prop) {
		// Applied in place, not through the log (every read's is): nothing
		// holds the Proposal or its evalCtx any more.
		out.recycle()
	}
	return br, wroteAt, nil, nil
}

// registerWait decides whether err is a conflict to wait on and, if so,
// registers the wait.
func (r *Replica) registerWait(ba *kvpb.BatchRequest, err error) *waitFor {
	if ba.WaitPolicy == kvpb.WaitError {
		return nil
	}
	var wie *kvpb.WriteIntentError
	if errors.As(err, &wie) && len(wie.Intents) > 0 {
		waiter := uuid.Nil
		if ba.Txn != nil {
			waiter = ba.Txn.ID
			for _, in := range wie.Intents {
				if in.Txn.ID == ba.Txn.ID {
					// Meeting our own intent at another epoch or similar
					// is not something waiting can fix.
					return nil
				}
			}
		}
		lw := &lockWait{intents: wie.Intents, waiter: waiter}
		for _, in := range wie.Intents {
			lw.released = append(lw.released, r.locks.enqueue(in, waiter))
		}
		return &waitFor{locks: lw}
	}
	var pe *kvpb.TransactionPushError
	if errors.As(err, &pe) && len(ba.Requests) == 1 {
		if req, ok := ba.Requests[0].(*kvpb.PushTxnRequest); ok {
			r.metrics.PushesWaited.Add(1)
			return &waitFor{push: r.txnWait.enqueue(req.Pusher.TxnMeta, req.Pushee.ID)}
		}
	}
	return nil
}

// recordReads adds the spans ba read to the timestamp cache (invariant 4).
// It runs after the reads were evaluated and before the latches are
// released, so no conflicting write can evaluate in between.
func (r *Replica) recordReads(ba *kvpb.BatchRequest, br *kvpb.BatchResponse) {
	ts, txnID := ba.Timestamp, uuid.Nil
	if ba.Txn != nil {
		ts, txnID = ba.Txn.ReadTimestamp, ba.Txn.ID
	}
	for i, req := range ba.Requests {
		switch req := req.(type) {
		case *kvpb.GetRequest:
			r.tscache.add(req.Span(), ts, txnID)
		case *kvpb.ScanRequest:
			span := req.Span()
			if resp, ok := br.Responses[i].(*kvpb.ScanResponse); ok && resp.ResumeSpan != nil {
				// Only the part actually read is protected.
				if req.Reverse {
					span.Key = resp.ResumeSpan.EndKey
				} else {
					span.EndKey = resp.ResumeSpan.Key
				}
			}
			if len(span.EndKey) > 0 && string(span.Key) < string(span.EndKey) {
				r.tscache.add(span, ts, txnID)
			}
		case *kvpb.RefreshRequest:
			rts := ts
			if req.Strict && br.Txn != nil {
				// A validation (kv/txn_validate.go) protects its key up
				// to the commit timestamp: in a committing batch that is
				// the one the tablet committed at, which a one-phase
				// commit may have moved above the read timestamp.
				rts = rts.Forward(br.Txn.WriteTimestamp)
			}
			r.tscache.add(req.Span(), rts, txnID)
		}
	}
}

// appendLatchSpans appends the latches ba needs to out: user-key spans for
// data, record keys for transaction records, and for EndTxn the part of
// its lock spans on this tablet, which it resolves. With out nil it
// allocates room for one span per request.
func appendLatchSpans(out []latchSpan, ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor) []latchSpan {
	if out == nil {
		// One span per request in most batches; a bulk load's carry
		// thousands, which growing the slice would copy again and
		// again.
		out = make([]latchSpan, 0, len(ba.Requests))
	}
	add := func(s kvpb.Span, write bool) { out = append(out, latchSpan{span: s, write: write}) }
	record := func(anchor []byte, id uuid.UUID) kvpb.Span {
		return kvpb.Span{Key: keys.TxnRecord(anchor, id)}
	}
	for _, req := range ba.Requests {
		switch req := req.(type) {
		case *kvpb.EndTxnRequest:
			if ba.Txn != nil {
				add(record(req.Key, ba.Txn.ID), true)
			}
			for _, s := range req.LockSpans {
				if c, ok := clipSpan(s, desc); ok {
					add(c, true)
				}
			}
		case *kvpb.HeartbeatTxnRequest:
			if ba.Txn != nil {
				add(record(req.Key, ba.Txn.ID), true)
			}
		case *kvpb.PushTxnRequest:
			add(record(req.Key, req.Pushee.ID), true)
		case *kvpb.QueryTxnRequest:
			add(record(req.Key, req.Txn.ID), false)
		case *kvpb.GCRequest:
			add(req.Span(), true)
			for _, t := range req.TxnRecords {
				add(record(t.Key, t.ID), true)
			}
		default:
			add(req.Span(), req.Method().IsWrite())
		}
	}
	return out
}

// clipSpan intersects s with the tablet's span.
func clipSpan(s kvpb.Span, desc kvpb.TabletDescriptor) (kvpb.Span, bool) {
	if len(s.EndKey) == 0 {
		return s, desc.ContainsKey(s.Key)
	}
	start, end := maxKey(s.Key, desc.StartKey), minKey(s.EndKey, desc.EndKey)
	if string(start) >= string(end) {
		return kvpb.Span{}, false
	}
	return kvpb.Span{Key: start, EndKey: end}, true
}

// applyUnreplicated applies a committed batch's unreplicated lock effects
// (see Proposal) on this leaseholder, still under the batch's latches.
func (r *Replica) applyUnreplicated(p *Proposal) {
	for _, in := range p.unreplAcquired {
		r.locks.acquireUnreplicated(in.Key, in.Txn)
	}
	for i := range p.unreplReleased {
		r.locks.releaseUnreplicated(p.unreplReleased[i].Txn, &p.unreplReleased[i].Span)
	}
	if p.unreplEnded != uuid.Nil {
		r.locks.releaseUnreplicated(p.unreplEnded, nil)
	}
}

// onlyUnreplicatedLocks reports whether ba's only writes are unreplicated
// locks (with reads, as a buffered statement sends them): it writes
// nothing to storage or raft, so it counts as a read batch.
func onlyUnreplicatedLocks(ba *kvpb.BatchRequest) bool {
	for _, req := range ba.Requests {
		if l, ok := req.(*kvpb.LockRequest); ok && l.Unreplicated {
			continue
		}
		if req.Method().IsWrite() {
			return false
		}
	}
	return true
}
