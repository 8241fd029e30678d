package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// DistSender is the router: it sends a BatchRequest whose keys may lie on
// many tablets by cutting it into one sub-batch per tablet, sending those in
// parallel, and merging the answers back into one response per request, in
// request order (invariant 1). It is itself a kvpb.Sender. Safe for
// concurrent use.
//
// Three shapes of batch get special treatment:
//
//   - A scan with a limit (MaxKeys or MaxBytes) that crosses tablets cannot
//     be answered in parallel without reading too much, so such a batch is
//     walked tablet by tablet in scan order until every limit is met; the
//     scans that stop early get a resume span over the rest. While one
//     tablet is asked, the next is asked ahead when its lease is on
//     another node (dist_sender_prefetch.go).
//   - A batch ending in EndTxn whose requests all land on one tablet is sent
//     whole, so the tablet can commit it in one phase. If it spans tablets,
//     the other requests go first (in parallel) and EndTxn is sent after they
//     all succeed, carrying the transaction as they left it.
//   - A sub-batch refused for stale routing (TabletKeyMismatchError,
//     TabletNotFoundError) evicts the cache entry it was routed by and is
//     divided again from scratch (bounded by maxRoutingRetries; invariant 2).
type DistSender struct {
	sender            kvpb.Sender
	cache             *TabletCache
	clock             *hlc.Clock
	maxRoutingRetries int
	// remote, when set, reports whether a tablet's lease is known to be on
	// another node: a walk over tablets then reads such a tablet ahead
	// (dist_sender_prefetch.go).
	remote     func(kvpb.TabletID) bool
	prefetches prefetchStats
}

// NewDistSender returns a router sending through sender, resolving tablets
// through cache and stamping batches with clock.
func NewDistSender(sender kvpb.Sender, cache *TabletCache, clock *hlc.Clock, maxRoutingRetries int) *DistSender {
	if maxRoutingRetries <= 0 {
		maxRoutingRetries = defaultMaxRoutingRetries
	}
	return &DistSender{sender: sender, cache: cache, clock: clock, maxRoutingRetries: maxRoutingRetries}
}

// Send implements kvpb.Sender. The caller's batch is not modified; the
// responses hold rows owned by the caller.
//
// A non-transactional read-only batch without a timestamp that lies on
// one tablet goes out unstamped, and the tablet's leaseholder reads it at
// its own clock, which is at or above every value it has acknowledged: a
// read stamped by this node's clock instead could miss a write that
// finished before it began, whenever the write's timestamp ran ahead of
// this clock (the leaseholder's clock takes the timestamps of pushed and
// refreshed transactions, up to the maximum offset ahead), as
// testcluster's TestLinearizableRegisters found. One that spans several
// tablets is stamped here so that all of them read at one timestamp; it
// has no uncertainty interval, so it may miss such a write (a transaction
// does not).
func (ds *DistSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if len(ba.Requests) == 0 {
		return &kvpb.BatchResponse{Txn: ba.Txn.Clone()}, nil
	}
	b := *ba
	b.Now = ds.clock.Now()
	if b.LockTimeout == 0 {
		b.LockTimeout = lockTimeoutOf(ctx)
	}
	br, err := ds.divideAndSend(ctx, &b, 0)
	if err != nil {
		return nil, err
	}
	// The tablet already checked our clock against its own; an offset error
	// here could only come from a remote clock far ahead of ours, and
	// refusing a response whose writes are already done would help nobody.
	_ = ds.clock.Update(br.Now)
	return br, nil
}

// piece is the part of request reqIdx that lies on one tablet.
type piece struct {
	reqIdx int
	// seq orders the pieces of one request by key.
	seq int
	req kvpb.Request
}

// tabletGroup is the sub-batch bound for one tablet.
type tabletGroup struct {
	desc   kvpb.TabletDescriptor
	pieces []piece
}

func (ds *DistSender) divideAndSend(ctx context.Context, ba *kvpb.BatchRequest, attempt int) (*kvpb.BatchResponse, error) {
	if attempt > ds.maxRoutingRetries {
		return nil, fmt.Errorf("%w after %d attempts", ErrRoutingRetriesExhausted, attempt)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	endTxnIdx := -1
	for i, r := range ba.Requests {
		if r.Method() == kvpb.MethodEndTxn {
			if i != len(ba.Requests)-1 {
				return nil, &kvpb.InvalidArgumentError{Msg: "EndTxn must be the last request of a batch"}
			}
			endTxnIdx = i
		}
	}
	if d, ok, err := ds.oneTablet(ctx, ba.Requests); err != nil {
		return nil, err
	} else if ok {
		return ds.sendWhole(ctx, ba, d, attempt)
	}
	if sst, ok := ba.Requests[0].(*kvpb.AddSSTableRequest); ok && len(ba.Requests) == 1 {
		return ds.sendSSTPieces(ctx, ba, sst, attempt)
	}
	groups, err := ds.divide(ctx, ba.Requests)
	if err != nil {
		return nil, err
	}
	if ba.Txn == nil && ba.Timestamp.IsEmpty() && ba.IsReadOnly() && len(groups) > 1 {
		// Several tablets must read at one timestamp, so it is chosen
		// here. (Nothing was read at an earlier attempt: a routing retry
		// follows a refusal.)
		ba.Timestamp = ds.clock.Now()
	}
	if endTxnIdx > 0 && len(groups) > 1 {
		return ds.sendWritesThenEndTxn(ctx, ba, attempt)
	}
	if needsSequential(ba.Requests, groups) {
		return ds.sendSequential(ctx, ba, attempt)
	}
	return ds.sendParallel(ctx, ba, groups, attempt)
}

// oneTablet reports whether every request of reqs lies wholly inside one
// cached tablet, and which: the common case of a point read or write, sent
// with no grouping, truncation or merging (the answer is what
// sendParallel would build from a single group).
func (ds *DistSender) oneTablet(ctx context.Context, reqs []kvpb.Request) (kvpb.TabletDescriptor, bool, error) {
	var d kvpb.TabletDescriptor
	for i, r := range reqs {
		s := r.Span()
		if i == 0 {
			var err error
			if d, err = ds.cache.Lookup(ctx, s.Key, false); err != nil {
				return d, false, err
			}
		} else if !d.ContainsKey(s.Key) {
			return d, false, nil
		}
		if len(s.EndKey) > 0 && bytes.Compare(d.EndKey, s.EndKey) < 0 {
			return d, false, nil
		}
	}
	return d, true, nil
}

// sendWhole sends ba unchanged to desc's tablet, the single-tablet case of
// sendParallel.
func (ds *DistSender) sendWhole(ctx context.Context, ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor, attempt int) (*kvpb.BatchResponse, error) {
	br, err := ds.sendToTablet(ctx, ba.Header, desc, ba.Requests, attempt)
	if err != nil {
		return nil, err
	}
	if len(br.Responses) != len(ba.Requests) {
		return nil, fmt.Errorf("kv: tablet %d answered %d responses to %d requests", desc.TabletID, len(br.Responses), len(ba.Requests))
	}
	out := &kvpb.BatchResponse{Responses: br.Responses, Now: br.Now, OnePhaseCommit: br.OnePhaseCommit, Txn: br.Txn}
	if out.Txn == nil && ba.Txn != nil {
		out.Txn = ba.Txn.Clone()
	}
	// The one answer's transaction is out's as it is (mergeHeader would
	// copy it): the tablet answers with its own copy (tablet.evaluate's),
	// which nothing else holds, and out is merged with nothing else. One
	// copy per batch, two objects (TestSendWholeCopiesNoTxn).
	return out, nil
}

// divide resolves every request to the tablets it touches and groups the
// pieces by tablet, groups in the order their tablets are first met.
func (ds *DistSender) divide(ctx context.Context, reqs []kvpb.Request) ([]tabletGroup, error) {
	var groups []tabletGroup
	index := map[kvpb.TabletID]int{}
	for i, r := range reqs {
		seq := 0
		err := ds.forEachTablet(ctx, r.Span(), func(d kvpb.TabletDescriptor, s kvpb.Span) {
			g, ok := index[d.TabletID]
			if !ok {
				g = len(groups)
				index[d.TabletID] = g
				groups = append(groups, tabletGroup{desc: d})
			}
			groups[g].pieces = append(groups[g].pieces, piece{reqIdx: i, seq: seq, req: truncate(r, s)})
			seq++
		})
		if err != nil {
			return nil, err
		}
	}
	return groups, nil
}

// sendSSTPieces sends an AddSSTable whose span covers several tablets
// (cut before a split, or for a span the caller did not cut at tablet
// bounds): each tablet gets the part of the SST inside it, in parallel,
// and tablets whose part holds no key get nothing. A piece refused
// because its tablet split meanwhile comes back here through
// sendToTablet and is cut again.
func (ds *DistSender) sendSSTPieces(ctx context.Context, ba *kvpb.BatchRequest, sst *kvpb.AddSSTableRequest, attempt int) (*kvpb.BatchResponse, error) {
	var groups []tabletGroup
	var cutErr error
	err := ds.forEachTablet(ctx, sst.Span(), func(d kvpb.TabletDescriptor, s kvpb.Span) {
		if cutErr != nil {
			return
		}
		data, n, err := storage.CutSST(sst.Data, s.Key, s.EndKey)
		if err != nil {
			cutErr = fmt.Errorf("kv: cutting an SST at tablet %d's bounds: %w", d.TabletID, err)
			return
		}
		if n == 0 {
			return
		}
		req := &kvpb.AddSSTableRequest{Key: s.Key, EndKey: s.EndKey, Data: data}
		groups = append(groups, tabletGroup{desc: d, pieces: []piece{{reqIdx: 0, seq: len(groups), req: req}}})
	})
	if err == nil {
		err = cutErr
	}
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return &kvpb.BatchResponse{Responses: []kvpb.Response{&kvpb.AddSSTableResponse{}}}, nil
	}
	return ds.sendParallel(ctx, ba, groups, attempt)
}

// forEachTablet calls fn for every tablet the span touches, in key order,
// with the part of the span inside it. The parts are disjoint and tile the
// span: each is cut from what is left of the span (from key on), never
// from the whole span. The descriptors come from separate lookups, which
// need not agree: the one for key may be an older generation starting
// before key (the directory of a node that has not yet applied a split
// the cache already learnt of from a tablet's refusal), and the part of
// the span before key has already gone to another tablet. Cut from the
// whole span, that part went out twice, both answers were correct for
// what was asked, and their rows were concatenated: scans racing splits
// returned rows twice (testcluster.TestClusterScansRacingSplits).
func (ds *DistSender) forEachTablet(ctx context.Context, s kvpb.Span, fn func(kvpb.TabletDescriptor, kvpb.Span)) error {
	if len(s.EndKey) == 0 {
		d, err := ds.cache.Lookup(ctx, s.Key, false)
		if err != nil {
			return err
		}
		fn(d, s)
		return nil
	}
	for key := s.Key; bytes.Compare(key, s.EndKey) < 0; {
		d, err := ds.cache.Lookup(ctx, key, false)
		if err != nil {
			return err
		}
		fn(d, intersect(kvpb.Span{Key: key, EndKey: s.EndKey}, d))
		key = d.EndKey
	}
	return nil
}

// needsSequential reports whether a limited scan crosses tablets.
func needsSequential(reqs []kvpb.Request, groups []tabletGroup) bool {
	counts := make([]int, len(reqs))
	for _, g := range groups {
		for _, p := range g.pieces {
			counts[p.reqIdx]++
		}
	}
	for i, r := range reqs {
		if s, ok := r.(*kvpb.ScanRequest); ok && isLimited(s) && counts[i] > 1 {
			return true
		}
	}
	return false
}

func isLimited(s *kvpb.ScanRequest) bool { return s.MaxKeys > 0 || s.MaxBytes > 0 }

// SingleTablet reports whether every request lies on one tablet (per the
// cache), which is when a batch ending in EndTxn can commit in one phase.
// It asks oneTablet, which is what Send asks first too: every request
// wholly inside the tablet of the first one's key is exactly the case in
// which dividing them would make one group holding each request whole,
// and it allocates nothing (every commit asks, once or twice).
func (ds *DistSender) SingleTablet(ctx context.Context, reqs []kvpb.Request) (bool, error) {
	_, ok, err := ds.oneTablet(ctx, reqs)
	return ok, err
}

// sendParallel sends one sub-batch per group concurrently and merges.
func (ds *DistSender) sendParallel(ctx context.Context, ba *kvpb.BatchRequest, groups []tabletGroup, attempt int) (*kvpb.BatchResponse, error) {
	type result struct {
		br  *kvpb.BatchResponse
		err error
	}
	results := make([]result, len(groups))
	send := func(i int) {
		g := groups[i]
		reqs := make([]kvpb.Request, len(g.pieces))
		for j, p := range g.pieces {
			reqs[j] = p.req
		}
		br, err := ds.sendToTablet(ctx, ba.Header, g.desc, reqs, attempt)
		results[i] = result{br, err}
	}
	if len(groups) == 1 {
		send(0)
	} else {
		var wg sync.WaitGroup
		for i := range groups {
			wg.Go(func() { send(i) })
		}
		wg.Wait()
	}
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if len(errs) > 0 {
		return nil, pickError(errs)
	}
	perReq := make([][]kvpb.Response, len(ba.Requests))
	for _, g := range groups {
		for _, p := range g.pieces {
			perReq[p.reqIdx] = append(perReq[p.reqIdx], nil)
		}
	}
	out := &kvpb.BatchResponse{Responses: make([]kvpb.Response, len(ba.Requests))}
	for i, g := range groups {
		br := results[i].br
		if len(br.Responses) != len(g.pieces) {
			return nil, fmt.Errorf("kv: tablet %d answered %d responses to %d requests", g.desc.TabletID, len(br.Responses), len(g.pieces))
		}
		for j, p := range g.pieces {
			perReq[p.reqIdx][p.seq] = br.Responses[j]
		}
		mergeHeader(out, br, ba.Txn)
	}
	for i, r := range ba.Requests {
		resp, err := combine(r, perReq[i])
		if err != nil {
			return nil, err
		}
		out.Responses[i] = resp
	}
	return out, nil
}

// sendToTablet sends reqs to desc's tablet; on stale routing it evicts desc
// and divides the sub-batch again.
func (ds *DistSender) sendToTablet(ctx context.Context, h kvpb.Header, desc kvpb.TabletDescriptor, reqs []kvpb.Request, attempt int) (*kvpb.BatchResponse, error) {
	// The sub-batch shares h's transaction, as its sub-batches sent at
	// once share it: nothing below the DistSender writes a request's
	// transaction (a tablet evaluates with its own copy and stamps its
	// observation on another: tablet.Replica.evaluate and
	// stampObservation), and the caller's batch
	// is not modified until Send returns. The copy made here was one per
	// batch, two objects (TestSendWholeCopiesNoTxn).
	sub := &kvpb.BatchRequest{Header: h, Requests: reqs}
	sub.TabletID = desc.TabletID
	traceTablet(ctx, desc.TabletID)
	br, err := ds.sender.Send(ctx, sub)
	if err == nil {
		return br, nil
	}
	if !ds.handleRoutingError(desc, err) {
		return nil, err
	}
	if err := routingBackoff(ctx, attempt); err != nil {
		return nil, err
	}
	sub.TabletID = 0
	return ds.divideAndSend(ctx, sub, attempt+1)
}

// routingBackoff waits before routing retry attempt+1. The first retry
// goes at once: the refusal usually carried the tablet's new descriptor.
// Later ones wait 1ms, 2ms, 4ms... up to 50ms (about 250ms over the
// default ten retries): what still routes wrong then is a directory that
// lags, a node's replica that has not yet applied a split its leaseholder
// has, and retrying at once would use up the retries before the split
// applies there (TestClusterScansRacingSplits saw that under dozens of
// splits a second).
func routingBackoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	d := min(time.Millisecond<<min(attempt-1, 6), 50*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// handleRoutingError evicts desc if err says it is stale, caching the
// tablet's own descriptor when the error carries one.
func (ds *DistSender) handleRoutingError(desc kvpb.TabletDescriptor, err error) bool {
	var mismatch *kvpb.TabletKeyMismatchError
	var notFound *kvpb.TabletNotFoundError
	switch {
	case errors.As(err, &mismatch):
		ds.cache.Evict(desc)
		if mismatch.Tablet != nil {
			ds.cache.Insert(*mismatch.Tablet)
		}
		return true
	case errors.As(err, &notFound):
		ds.cache.Evict(desc)
		return true
	}
	return false
}

// sendWritesThenEndTxn sends everything but the final EndTxn (which may fan
// out), then EndTxn with the transaction as those requests left it. No one
// phase commit is possible across tablets.
func (ds *DistSender) sendWritesThenEndTxn(ctx context.Context, ba *kvpb.BatchRequest, attempt int) (*kvpb.BatchResponse, error) {
	n := len(ba.Requests) - 1
	first := &kvpb.BatchRequest{Header: ba.Header, Requests: ba.Requests[:n]}
	br1, err := ds.divideAndSend(ctx, first, attempt)
	if err != nil {
		return nil, err
	}
	second := &kvpb.BatchRequest{Header: ba.Header, Requests: ba.Requests[n:]}
	if ba.Txn != nil {
		second.Txn = ba.Txn.Clone()
		if br1.Txn != nil {
			second.Txn.WriteTimestamp = second.Txn.WriteTimestamp.Forward(br1.Txn.WriteTimestamp)
		}
	}
	br2, err := ds.divideAndSend(ctx, second, attempt)
	if err != nil {
		return nil, err
	}
	out := &kvpb.BatchResponse{Responses: append(br1.Responses[:n:n], br2.Responses...)}
	mergeHeader(out, br1, ba.Txn)
	mergeHeader(out, br2, ba.Txn)
	return out, nil
}

// mergeHeader folds a sub-batch's transaction and clock into out: the
// highest write timestamp wins, and a final status (from EndTxn or a
// discovered abort) beats a pending one.
func mergeHeader(out, br *kvpb.BatchResponse, sent *kvpb.Transaction) {
	out.Now = out.Now.Forward(br.Now)
	out.OnePhaseCommit = out.OnePhaseCommit || br.OnePhaseCommit
	if br.Txn == nil {
		if out.Txn == nil && sent != nil {
			out.Txn = sent.Clone()
		}
		return
	}
	if out.Txn == nil {
		out.Txn = br.Txn.Clone()
		return
	}
	out.Txn.WriteTimestamp = out.Txn.WriteTimestamp.Forward(br.Txn.WriteTimestamp)
	for _, o := range br.Txn.ObservedTimestamps {
		out.Txn.UpdateObservedTimestamp(o.NodeID, o.Timestamp)
	}
	if br.Txn.Status.IsFinal() {
		out.Txn.Status = br.Txn.Status
		out.Txn.LockSpans = br.Txn.LockSpans
	}
}

// pickError chooses which of several sub-batch errors to return: an abort
// of the transaction beats everything (no retry at a higher timestamp can
// save it), then a retryable error (so the coordinator retries rather than
// giving up), then the first.
func pickError(errs []error) error {
	var aborted *kvpb.TransactionAbortedError
	for _, err := range errs {
		if errors.As(err, &aborted) {
			return err
		}
	}
	for _, err := range errs {
		if kvpb.IsRetryable(err) {
			return err
		}
	}
	return errs[0]
}

// intersect returns the part of s inside d (s is a range).
func intersect(s kvpb.Span, d kvpb.TabletDescriptor) kvpb.Span {
	out := s
	if bytes.Compare(out.Key, d.StartKey) < 0 {
		out.Key = d.StartKey
	}
	if bytes.Compare(d.EndKey, out.EndKey) < 0 {
		out.EndKey = d.EndKey
	}
	return out
}

// spanEnd returns the exclusive end of s (a point's end is its successor).
func spanEnd(s kvpb.Span) []byte {
	if len(s.EndKey) == 0 {
		return keys.Next(s.Key)
	}
	return s.EndKey
}

// truncate returns r restricted to s, copying r only when s differs from its
// span. Point requests are returned as they are.
func truncate(r kvpb.Request, s kvpb.Span) kvpb.Request {
	rs := r.Span()
	if len(rs.EndKey) == 0 || (bytes.Equal(rs.Key, s.Key) && bytes.Equal(rs.EndKey, s.EndKey)) {
		return r
	}
	if sr, ok := r.(kvpb.SplittableRequest); ok {
		return sr.WithSpan(s)
	}
	panic(fmt.Sprintf("kv: truncate of unexpected ranged request %s", r.Method()))
}

// combine merges the per-tablet responses of one request, given in key
// order.
func combine(r kvpb.Request, resps []kvpb.Response) (kvpb.Response, error) {
	if len(resps) == 1 {
		return resps[0], nil
	}
	if len(resps) == 0 {
		return nil, fmt.Errorf("kv: no response for %s", r.Method())
	}
	switch t := r.(type) {
	case *kvpb.ScanRequest:
		n := 0
		for _, resp := range resps {
			n += len(resp.(*kvpb.ScanResponse).Rows)
		}
		out := &kvpb.ScanResponse{Rows: make([]kvpb.KeyValue, 0, n)}
		for i := range resps {
			j := i
			if t.Reverse {
				j = len(resps) - 1 - i
			}
			sr := resps[j].(*kvpb.ScanResponse)
			out.Rows = append(out.Rows, sr.Rows...)
			out.Count += sr.Count
			out.DiskBytes += sr.DiskBytes
		}
		return out, nil
	case *kvpb.DeleteRangeRequest:
		out := &kvpb.DeleteRangeResponse{}
		for _, resp := range resps {
			out.Keys = append(out.Keys, resp.(*kvpb.DeleteRangeResponse).Keys...)
		}
		return out, nil
	case *kvpb.ResolveIntentRangeRequest:
		out := &kvpb.ResolveIntentRangeResponse{}
		for _, resp := range resps {
			out.Resolved += resp.(*kvpb.ResolveIntentRangeResponse).Resolved
		}
		return out, nil
	case *kvpb.GCRequest:
		out := &kvpb.GCResponse{}
		for _, resp := range resps {
			r := resp.(*kvpb.GCResponse)
			out.Removed += r.Removed
			out.RemovedBytes += r.RemovedBytes
			out.Repacked += r.Repacked
			out.TxnRecordsRemoved += r.TxnRecordsRemoved
			out.Census = kvpb.MergeCensus(out.Census, r.Census...)
			// The lowest resume key: redoing GC above it is harmless.
			if r.ResumeKey != nil && (out.ResumeKey == nil || string(r.ResumeKey) < string(out.ResumeKey)) {
				out.ResumeKey = r.ResumeKey
			}
		}
		return out, nil
	case *kvpb.RefreshRequest:
		return resps[0], nil
	case *kvpb.ClearRangeRequest:
		return resps[0], nil
	case *kvpb.AddSSTableRequest:
		out := &kvpb.AddSSTableResponse{}
		for _, resp := range resps {
			out.Versions += resp.(*kvpb.AddSSTableResponse).Versions
		}
		return out, nil
	case *kvpb.LockRequest:
		out := &kvpb.LockResponse{}
		for _, resp := range resps {
			out.Skipped = out.Skipped || resp.(*kvpb.LockResponse).Skipped
		}
		return out, nil
	}
	return nil, fmt.Errorf("kv: %s answered by %d tablets", r.Method(), len(resps))
}
