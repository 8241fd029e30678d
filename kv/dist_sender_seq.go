package kv

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
)

// seqReq is the progress of one request while a batch is walked tablet by
// tablet.
type seqReq struct {
	req  kvpb.Request
	rest kvpb.Span // the part not yet sent (ranged requests)
	done bool
	// Accumulated answers.
	resps     []kvpb.Response // per piece, in walk order
	keysLeft  int64           // limited scans: rows still wanted (0: no limit)
	bytesLeft int64           // limited scans: bytes still wanted (0: no limit)
	resume    *kvpb.Span
}

// sendSequential walks the batch's tablets in scan order (forward, or
// reverse when its limited scans are reverse), sending each tablet the part
// of every unfinished request it holds, until every request is done. A
// limited scan is done once its limit is met; the rest of its span becomes
// its resume span.
func (ds *DistSender) sendSequential(ctx context.Context, ba *kvpb.BatchRequest, attempt int) (*kvpb.BatchResponse, error) {
	reverse, err := scanDirection(ba.Requests)
	if err != nil {
		return nil, err
	}
	state := make([]*seqReq, len(ba.Requests))
	var lo, hi []byte
	for i, r := range ba.Requests {
		s := r.Span()
		st := &seqReq{req: r, rest: s}
		// An empty range has nothing to send; it is answered empty.
		st.done = len(s.EndKey) > 0 && bytes.Compare(s.Key, s.EndKey) >= 0
		if sc, ok := r.(*kvpb.ScanRequest); ok {
			st.keysLeft, st.bytesLeft = sc.MaxKeys, sc.MaxBytes
		}
		state[i] = st
		if lo == nil || bytes.Compare(s.Key, lo) < 0 {
			lo = s.Key
		}
		if end := spanEnd(s); hi == nil || bytes.Compare(end, hi) > 0 {
			hi = end
		}
	}
	out := &kvpb.BatchResponse{Responses: make([]kvpb.Response, len(ba.Requests))}
	cursor := lo
	if reverse {
		cursor = hi
	}
	// retries counts routing refusals since the last answer.
	retries := attempt
	// pf is the current tablet's part sent ahead, ahead the next one's
	// (dist_sender_prefetch.go); neither outlives the walk. walked: a
	// tablet has answered and the walk went on, so the next ones may be
	// read ahead.
	var pf, ahead *scanPrefetch
	walked := false
	defer func() {
		pf.drop()
		ahead.drop()
	}()
	end := hi
	if reverse {
		end = lo
	}
	for !allDone(state) {
		if (!reverse && bytes.Compare(cursor, hi) >= 0) || (reverse && bytes.Compare(cursor, lo) <= 0) {
			return nil, fmt.Errorf("kv: walked past the batch's span with requests unfinished")
		}
		desc, err := ds.cache.Lookup(ctx, cursor, reverse)
		if err != nil {
			return nil, err
		}
		var reqs []kvpb.Request
		var idx []int
		for i, st := range state {
			if r := st.pieceIn(desc); r != nil {
				reqs = append(reqs, r)
				idx = append(idx, i)
			}
		}
		if len(reqs) > 0 {
			if walked {
				ahead = ds.prefetchAfter(ctx, ba, state, desc, reverse, end)
			}
			var br *kvpb.BatchResponse
			if pf != nil {
				br = pf.take(ds, desc, idx, reqs)
				pf = nil
			}
			if br == nil {
				sub := &kvpb.BatchRequest{Header: ba.Header, Requests: reqs}
				sub.Txn = ba.Txn.Clone()
				sub.TabletID = desc.TabletID
				traceTablet(ctx, desc.TabletID)
				br, err = ds.sender.Send(ctx, sub)
			}
			if err != nil {
				// The walk asks this tablet again, and reads ahead
				// afresh from there.
				ahead.drop()
				ahead = nil
				if !ds.handleRoutingError(desc, err) {
					return nil, err
				}
				if retries++; retries > ds.maxRoutingRetries {
					return nil, fmt.Errorf("%w after %d attempts: %w", ErrRoutingRetriesExhausted, retries, err)
				}
				if err := routingBackoff(ctx, retries-1); err != nil {
					return nil, err
				}
				continue
			}
			if len(br.Responses) != len(reqs) {
				return nil, fmt.Errorf("kv: tablet %d answered %d responses to %d requests", desc.TabletID, len(br.Responses), len(reqs))
			}
			// The budget bounds refusals in a row, as the parallel path's
			// does: a walk over many tablets while they split is refused
			// now and then all along, and made progress since the last.
			retries = attempt
			for j, i := range idx {
				state[i].absorb(desc, reqs[j], br.Responses[j], reverse)
			}
			mergeHeader(out, br, ba.Txn)
			pf, ahead = ahead, nil
			walked = true
		}
		if reverse {
			cursor = desc.StartKey
		} else {
			cursor = desc.EndKey
		}
	}
	for i, st := range state {
		resp, err := st.result(reverse)
		if err != nil {
			return nil, err
		}
		out.Responses[i] = resp
	}
	return out, nil
}

func scanDirection(reqs []kvpb.Request) (reverse bool, err error) {
	var fwd, rev bool
	for _, r := range reqs {
		if s, ok := r.(*kvpb.ScanRequest); ok && isLimited(s) {
			if s.Reverse {
				rev = true
			} else {
				fwd = true
			}
		}
	}
	if fwd && rev {
		return false, ErrMixedScanDirections
	}
	return rev, nil
}

func allDone(state []*seqReq) bool {
	for _, st := range state {
		if !st.done {
			return false
		}
	}
	return true
}

// pieceIn returns the request to send to desc for this request, or nil.
func (st *seqReq) pieceIn(desc kvpb.TabletDescriptor) kvpb.Request {
	if st.done {
		return nil
	}
	if len(st.rest.EndKey) == 0 {
		if desc.ContainsKey(st.rest.Key) {
			return st.req
		}
		return nil
	}
	s := intersect(st.rest, desc)
	if bytes.Compare(s.Key, s.EndKey) >= 0 {
		return nil
	}
	r := truncate(st.req, s)
	if sc, ok := r.(*kvpb.ScanRequest); ok && isLimited(sc) {
		c := *sc
		c.Key, c.EndKey = s.Key, s.EndKey
		c.MaxKeys, c.MaxBytes = st.keysLeft, st.bytesLeft
		if end := st.rest.EndKey; !c.Reverse && bytes.Compare(end, s.EndKey) > 0 && bytes.Compare(end, c.ReadsOnTo) > 0 {
			// The walk goes on past this tablet unless the limit is
			// met here: the node may read the rest ahead (the next
			// tablets' files, when it holds them; storage's scan plans).
			// Only here: the parallel path sends every tablet its part
			// at once, each reading its own.
			c.ReadsOnTo = end
		}
		return &c
	}
	return r
}

// absorb records the answer to the piece sent to desc.
func (st *seqReq) absorb(desc kvpb.TabletDescriptor, sent kvpb.Request, resp kvpb.Response, reverse bool) {
	st.resps = append(st.resps, resp)
	point := len(st.rest.EndKey) == 0
	empty := st.pass(desc, reverse)
	if point {
		st.done = true
		return
	}
	sc, ok := sent.(*kvpb.ScanRequest)
	if !ok || !isLimited(sc) {
		st.done = empty
		return
	}
	sr := resp.(*kvpb.ScanResponse)
	limitMet := false
	if st.keysLeft > 0 {
		st.keysLeft -= int64(len(sr.Rows))
		limitMet = st.keysLeft <= 0
	}
	if st.bytesLeft > 0 {
		for _, kv := range sr.Rows {
			st.bytesLeft -= int64(len(kv.Key) + len(kv.Value))
		}
		limitMet = limitMet || st.bytesLeft <= 0
	}
	switch {
	case sr.ResumeSpan != nil:
		// The tablet stopped inside its piece: resume from there over the
		// rest of the original span.
		r := *sr.ResumeSpan
		if reverse {
			r.Key = st.rest.Key
		} else {
			r.EndKey = st.rest.EndKey
		}
		st.resume = &r
		st.done = true
	case limitMet:
		if !empty {
			r := st.rest
			st.resume = &r
		}
		st.done = true
	default:
		st.done = empty
	}
}

// pass drops the part of the request's span that desc's tablet covers
// and reports whether nothing is left (a point request: always).
func (st *seqReq) pass(desc kvpb.TabletDescriptor, reverse bool) bool {
	if len(st.rest.EndKey) == 0 {
		return true
	}
	if reverse {
		st.rest.EndKey = maxKey(st.rest.Key, desc.StartKey)
	} else {
		st.rest.Key = minKey(st.rest.EndKey, desc.EndKey)
	}
	return bytes.Compare(st.rest.Key, st.rest.EndKey) >= 0
}

// result merges the pieces answered so far.
func (st *seqReq) result(reverse bool) (kvpb.Response, error) {
	if _, ok := st.req.(*kvpb.ScanRequest); ok {
		// Pieces arrived in walk order, which is already scan order.
		out := &kvpb.ScanResponse{ResumeSpan: st.resume}
		for _, r := range st.resps {
			sr := r.(*kvpb.ScanResponse)
			out.Rows = append(out.Rows, sr.Rows...)
			out.Count += sr.Count
			out.DiskBytes += sr.DiskBytes
		}
		return out, nil
	}
	if len(st.resps) == 0 {
		return emptyResponse(st.req)
	}
	if reverse {
		// combine expects key order; a reverse walk met the pieces
		// backwards.
		for i, j := 0, len(st.resps)-1; i < j; i, j = i+1, j-1 {
			st.resps[i], st.resps[j] = st.resps[j], st.resps[i]
		}
	}
	return combine(st.req, st.resps)
}

// emptyResponse answers a ranged request over an empty span.
func emptyResponse(r kvpb.Request) (kvpb.Response, error) {
	switch r.(type) {
	case *kvpb.DeleteRangeRequest:
		return &kvpb.DeleteRangeResponse{}, nil
	case *kvpb.ResolveIntentRangeRequest:
		return &kvpb.ResolveIntentRangeResponse{}, nil
	case *kvpb.GCRequest:
		return &kvpb.GCResponse{}, nil
	case *kvpb.ClearRangeRequest:
		return &kvpb.ClearRangeResponse{}, nil
	case *kvpb.RefreshRequest:
		return &kvpb.RefreshResponse{}, nil
	}
	return nil, fmt.Errorf("kv: no response for %s", r.Method())
}

func minKey(a, b []byte) []byte {
	if bytes.Compare(a, b) < 0 {
		return a
	}
	return b
}

func maxKey(a, b []byte) []byte {
	if bytes.Compare(a, b) > 0 {
		return a
	}
	return b
}
