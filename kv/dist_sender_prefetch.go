package kv

import (
	"bytes"
	"context"
	"slices"
	"sync/atomic"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// Reading the next tablet ahead of a walk (issue 19: "scans over many
// tablets prefetch the next tablet").
//
// The sequential walk (dist_sender_seq.go) sends a limited scan to one
// tablet at a time and waits for it before asking the next. When the next
// tablet is on the same node, that node's storage already reads its files
// ahead (kvpb.ScanRequest.ReadsOnTo). When its lease is on another node,
// nothing overlapped: each tablet's read began when the previous one had
// answered. Now, while a tablet is asked, the walk also sends the next
// tablet its part as it will be if the current tablet answers all of its
// part without meeting the limit, which is the only case in which the
// walk reaches the next tablet at all:
//
//  1. At most one tablet ahead: a prefetch is started when the walk sends
//     to a tablet, for the tablet after it, and is taken or dropped before
//     the walk sends anything to the tablet after that. It starts only
//     once the walk has gone past a tablet, from its second tablet on: a
//     walk's first tablet usually holds its whole page (a SQL scan pages
//     through a large tablet 256 to 8,192 keys at a time, a count 65,536
//     values at a time, each page a walk of its own that stops inside the
//     tablet), and reading the next tablet ahead of every such page would
//     read it once per page for nothing. A walk that has gone past a
//     tablet reads tablets smaller than its page, where the next one is
//     likely needed.
//  2. An answer is used only if it is what the tablet would have answered
//     to the request the walk then makes: the same tablet descriptor and
//     the same pieces, each the same span, direction, count tags and
//     ReadsOnTo. A row limit can only have shrunk (the current tablet's
//     rows count against it); the prefetched rows are then cut to the
//     limit and the resume span starts at the first row cut, which is
//     what a tablet's scan with that limit returns, up to where its resume
//     span starts among keys with no visible value. A count cannot be cut,
//     and its limit does not shrink (a count's pieces return no rows), so
//     a count is used only unchanged. Anything else, an error included,
//     drops the prefetch and the walk sends as before.
//  3. It never waits on a lock and never pushes (kvpb.WaitError): a
//     prefetch that meets another transaction's lock fails at once and
//     the walk's own request meets the lock as before. A prefetch reads,
//     and marks read in the tablet's timestamp cache, at most the part of
//     the next tablet that the scan's limit allows, which the walk would
//     read if the current tablet fell short of it.
//  4. It is cancelled with the walk: its context is the statement's,
//     cancelled when the walk takes no more of it (a limit met, an error,
//     the statement cancelled), and the walk returns only after its
//     goroutine has ended.
//
// Only read-only batches whose pieces on the next tablet are all scans
// without a byte limit and with no row limit or one of at least
// prefetchMinKeys rows are read ahead (a LIMIT 1 does not read a second
// tablet for nothing), and only when the DistSender knows the next
// tablet's lease is on another node (Options.Leaseholder).

// prefetchMinKeys is the smallest row limit a walked scan reads ahead for:
// a SQL scan's first page (sql/exec firstPage).
const prefetchMinKeys = 256

// prefetchStats counts the walk's prefetches (DistSender.ScanPrefetches).
type prefetchStats struct {
	sent, used atomic.Int64
}

// scanPrefetch is one tablet's part of a walk, sent ahead.
type scanPrefetch struct {
	cancel context.CancelFunc
	done   chan struct{}
	// Set by the goroutine before done is closed.
	sent bool
	desc kvpb.TabletDescriptor
	idx  []int
	reqs []kvpb.Request
	br   *kvpb.BatchResponse
	err  error
}

// prefetchAfter starts reading ahead the tablet after desc in the walk's
// direction, for the walk's state as it will be if desc's tablet answers
// without meeting any limit; nil when there is nothing to read ahead. end
// is where the walk stops (hi forward, lo reverse).
func (ds *DistSender) prefetchAfter(ctx context.Context, ba *kvpb.BatchRequest, state []*seqReq, desc kvpb.TabletDescriptor, reverse bool, end []byte) *scanPrefetch {
	if ds.remote == nil || !ba.IsReadOnly() {
		return nil
	}
	var at []byte
	if reverse {
		if bytes.Compare(desc.StartKey, end) <= 0 {
			return nil
		}
		at = desc.StartKey
	} else {
		if bytes.Compare(desc.EndKey, end) >= 0 {
			return nil
		}
		at = desc.EndKey
	}
	// The state after desc answered in full, copied: the walk goes on
	// changing its own while the goroutine cuts the next pieces.
	next := make([]*seqReq, len(state))
	left := false
	for i, st := range state {
		c := &seqReq{req: st.req, rest: st.rest, done: st.done, keysLeft: st.keysLeft, bytesLeft: st.bytesLeft}
		if st.pieceIn(desc) != nil {
			c.done = c.pass(desc, reverse)
		}
		left = left || !c.done
		next[i] = c
	}
	if !left {
		return nil
	}
	h := ba.Header
	h.Txn = ba.Txn.Clone()
	// Invariant 3: a prefetch neither waits on a lock nor pushes.
	h.WaitPolicy = kvpb.WaitError
	pctx, cancel := context.WithCancel(ctx)
	p := &scanPrefetch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		d, err := ds.cache.Lookup(pctx, at, reverse)
		if err != nil || !ds.remote(d.TabletID) {
			return
		}
		var reqs []kvpb.Request
		var idx []int
		for i, st := range next {
			r := st.pieceIn(d)
			if r == nil {
				continue
			}
			sc, ok := r.(*kvpb.ScanRequest)
			if !ok || sc.MaxBytes > 0 || (sc.MaxKeys > 0 && sc.MaxKeys < prefetchMinKeys) {
				return
			}
			reqs = append(reqs, r)
			idx = append(idx, i)
		}
		if len(reqs) == 0 {
			return
		}
		sub := &kvpb.BatchRequest{Header: h, Requests: reqs}
		sub.TabletID = d.TabletID
		traceTablet(pctx, d.TabletID)
		ds.prefetches.sent.Add(1)
		p.sent, p.desc, p.idx, p.reqs = true, d, idx, reqs
		p.br, p.err = ds.sender.Send(pctx, sub)
	}()
	return p
}

// drop cancels the prefetch and waits for its goroutine (invariant 4).
// Nil-safe.
func (p *scanPrefetch) drop() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}

// take waits for the prefetch and returns its answer to the walk's
// request for desc (the pieces reqs of the requests idx), or nil when it
// is not that answer (invariant 2). The prefetch is over either way.
func (p *scanPrefetch) take(ds *DistSender, desc kvpb.TabletDescriptor, idx []int, reqs []kvpb.Request) *kvpb.BatchResponse {
	<-p.done
	p.cancel()
	if !p.sent || p.err != nil || p.br == nil || !sameDesc(p.desc, desc) || !slices.Equal(p.idx, idx) || len(p.br.Responses) != len(reqs) {
		return nil
	}
	out := &kvpb.BatchResponse{Txn: p.br.Txn, Now: p.br.Now, OnePhaseCommit: p.br.OnePhaseCommit, Responses: make([]kvpb.Response, len(reqs))}
	for j, r := range reqs {
		resp, ok := answerFor(p.reqs[j].(*kvpb.ScanRequest), r, p.br.Responses[j])
		if !ok {
			return nil
		}
		out.Responses[j] = resp
	}
	ds.prefetches.used.Add(1)
	return out
}

func sameDesc(a, b kvpb.TabletDescriptor) bool {
	return a.TabletID == b.TabletID && a.Generation == b.Generation &&
		bytes.Equal(a.StartKey, b.StartKey) && bytes.Equal(a.EndKey, b.EndKey)
}

// answerFor turns the answer to the prefetched scan sent into the answer
// to want, or reports that it cannot (invariant 2).
func answerFor(sent *kvpb.ScanRequest, want kvpb.Request, resp kvpb.Response) (kvpb.Response, bool) {
	w, ok := want.(*kvpb.ScanRequest)
	sr, rok := resp.(*kvpb.ScanResponse)
	if !ok || !rok || !bytes.Equal(sent.Key, w.Key) || !bytes.Equal(sent.EndKey, w.EndKey) || sent.Reverse != w.Reverse ||
		!bytes.Equal(sent.CountTags, w.CountTags) || !bytes.Equal(sent.ReadsOnTo, w.ReadsOnTo) || sent.MaxBytes != w.MaxBytes {
		return nil, false
	}
	switch {
	case sent.MaxKeys == w.MaxKeys:
		return sr, true
	case w.MaxKeys == 0 || (sent.MaxKeys > 0 && w.MaxKeys > sent.MaxKeys) || len(w.CountTags) > 0 || sr.Count != 0:
		// A limit that grew, or a count, which cannot be cut.
		return nil, false
	case int64(len(sr.Rows)) <= w.MaxKeys:
		// The smaller limit would have stopped no earlier: the same
		// rows, and the same resume span, if any (a tablet that stopped
		// at the larger limit had more rows than the smaller one).
		return sr, true
	}
	cut := sr.Rows[w.MaxKeys]
	out := &kvpb.ScanResponse{Rows: sr.Rows[:w.MaxKeys:w.MaxKeys]}
	if w.Reverse {
		out.ResumeSpan = &kvpb.Span{Key: w.Key, EndKey: keys.Next(cut.Key)}
	} else {
		out.ResumeSpan = &kvpb.Span{Key: cut.Key, EndKey: w.EndKey}
	}
	return out, true
}

// ScanPrefetches reports how many times walks over tablets sent a
// tablet's part ahead, and how many of those answers they used.
func (ds *DistSender) ScanPrefetches() (sent, used int64) {
	return ds.prefetches.sent.Load(), ds.prefetches.used.Load()
}
