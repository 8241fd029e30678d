package exec

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"slices"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// count(*) at the tablets. A GROUP BY without group columns whose
// aggregates all count every row (count(*), count(1), count of a
// primary-key column; no DISTINCT, FILTER or ORDER BY), over a
// scan of a table's primary index with no filter, limit or lock, needs
// no row: it needs how many rows the scan's spans hold. Each tablet
// counts the row keys of its part (kv.Batch.Count with
// rowenc.RowKeyTags: a row key's value tells it from a column entry's),
// so no key or value is copied into a response and nothing is decoded;
// the KV layer reads, waits on locks and records the read exactly as the
// scan would, and a transaction's buffered writes count as the scan
// would have seen them (kv's write buffer). A hash-sharded (bucketed)
// index, a distributed fragment's scan and every other shape go the
// usual way.
//
// A count of many pages runs them in parallel: once a page of a span has
// come back, the rest of the span is cut into pieces about as wide in key
// space as that page held (countSplit), and the next batch asks for all of
// them; the tablet runs a transaction's batch of counts on all its
// cores, each page under latches of its own (tablet.Replica.sendCounts).
// Where the keys are dense as in the first page each piece is about a
// page; where they are not, a piece comes back short or resumes and is
// cut again. The pieces partition the span whatever the cut points, so
// the total is exact.

// countable reports whether n has the shape of such a count (its index
// is checked by countPushdown).
func (r *runner) countable(n *plan.GroupBy) bool {
	if r.fragSpan != nil || r.x.Txn == nil || len(n.GroupCols) > 0 || len(n.Aggs) == 0 {
		return false
	}
	s, ok := n.Input.(*plan.Scan)
	if !ok || s.Filter != nil || s.Inverted != nil || s.HardLimit > 0 || s.Lock != plan.LockNone || s == r.lockOnRead ||
		(s.Index != nil && s.Index.ID != s.Table.PrimaryIndex.ID) {
		return false
	}
	for _, a := range n.Aggs {
		if a.Distinct || a.Filter != nil || len(a.OrderBy) > 0 || aggBaseName(a.Name) != "count" || !countsRows(s, a) {
			return false
		}
	}
	return true
}

// countsRows reports whether a, a count over s's rows, counts every row:
// count(*), count of a constant that is not NULL (count(1)), or count of
// a primary-key column (never NULL).
func countsRows(s *plan.Scan, a plan.Aggregate) bool {
	if a.Star {
		return len(a.Args) == 0
	}
	if len(a.Args) != 1 {
		return false
	}
	switch e := a.Args[0].(type) {
	case *sem.Const:
		return !types.IsNull(e.Datum)
	case *sem.ColRef:
		for i, c := range s.Cols {
			if c.ID == e.ID {
				return slices.Contains(s.Table.PrimaryIndex.KeyColumnIDs, s.TableCols[i])
			}
		}
	}
	return false
}

// countPushdown returns the operator for n if n is such a count, or nil.
func (r *runner) countPushdown(n *plan.GroupBy) (op, error) {
	if !r.countable(n) {
		return nil, nil
	}
	s := n.Input.(*plan.Scan)
	l, err := r.tableLayout(s.Table)
	if err != nil {
		return nil, err
	}
	idx, err := indexLayout(l, s.Table, s.Index)
	if err != nil {
		return nil, err
	}
	if !idx.IsPrimary() || bucketed(l, idx) {
		return nil, nil
	}
	spans, err := indexSpans(l, idx, 0, s.Spans)
	if err != nil {
		return nil, err
	}
	return &countOp{r: r, node: n, spans: spans, aggs: len(n.Aggs)}, nil
}

// countPage bounds the rows one count request examines. A tablet holds
// a read latch over the request's span while it counts, and read latches
// hold writers back: unlimited, a count of a 512 MiB tablet would stall
// every write to the table for as long as it took. 16,384 rows take about
// a millisecond. The tablet runs a transaction's batch of counts as one
// request at a time per core, each under its own latches
// (tablet.Replica.sendCounts), so a batch of many pages holds no latch
// longer than one page. (The price of a limit: a limited request walks a
// span's tablets one after another instead of in parallel, kv's
// dist_sender_seq.go.)
var countPage int64 = 1 << 14 // a variable for tests

// countWidth is the number of resumed spans below which a batch's
// resumed spans are cut (countPieces): this node's core count, at least 2
// and at most 8. (A variable for tests.)
var countWidth = min(max(runtime.GOMAXPROCS(0), 2), 8)

// countPieces is how many pieces the resumed spans of a batch are cut
// into for the next batch: as many as a batch carries, so that a count of
// a million rows is two round trips (the first page, then 64 pages), and
// the tablet's goroutines, taking pages as they free up, all stay busy
// until the last page, which a batch of one page per core did not: each
// round ended when its slowest page did, and between rounds the cores
// waited for the next batch (bench/README.md, "Issue 22, ninth session").
// (A variable for tests.)
var countPieces = spansPerBatch

// countPageInOrder is how many pages (countPage) one request of a count
// read front to back (countOp.inOrder) examines: its pages cannot run
// in parallel, so fewer, larger ones save round trips, as many as 65,536
// rows (a few milliseconds of one core) did before the pages ran
// concurrently under latches of their own.
const countPageInOrder = 4

// countOp yields the one row of a count(*) GROUP BY (countPushdown).
type countOp struct {
	r     *runner
	node  *plan.GroupBy
	spans []kvpb.Span
	aggs  int
	done  bool
	// inOrder: the count reads its spans front to back, a page per round
	// trip, since the node's disk seeks (Context.ReadInOrder) and a page
	// read from it (kv.Result.DiskBytes).
	inOrder bool
}

func (o *countOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.done {
		return nil, nil
	}
	o.done = true
	tags := rowenc.RowKeyTags()
	var n int64
	for len(o.spans) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := &kv.Batch{}
		k := min(len(o.spans), spansPerBatch)
		page := countPage
		if o.inOrder {
			page = countPageInOrder * countPage
		}
		for _, sp := range o.spans[:k] {
			b.Count(sp.Key, sp.EndKey, tags, page)
		}
		tctx, tr := o.r.x.Stats.trace(ctx)
		if err := o.r.x.Txn.Run(tctx, b); err != nil {
			return nil, err
		}
		// EXPLAIN ANALYZE shows the requests on the aggregate, which
		// made them; the scan below it never ran.
		o.r.x.Stats.addKV(o.node, k)
		o.r.x.Stats.addRead(o.node, tr, b.Results)
		var rest []kvpb.Span
		for i := range b.Results[:k] {
			n += b.Results[i].Count
			if sp := b.Results[i].ResumeSpan; sp != nil {
				rest = append(rest, *sp)
			}
			o.inOrder = o.inOrder || (o.r.x.ReadInOrder && b.Results[i].DiskBytes > 0)
		}
		if !o.inOrder && len(rest) > 0 && len(rest) < countWidth && len(o.spans) <= k {
			// Few spans left: cut each by the width of the page that
			// stopped it, so the next batch counts in parallel (not
			// from a disk that seeks, o.inOrder: what the block cache
			// holds may be read in any order).
			var cut []kvpb.Span
			for i, j := 0, 0; i < k; i++ {
				sp := b.Results[i].ResumeSpan
				if sp == nil {
					continue
				}
				cut = append(cut, countSplit(o.spans[i].Key, rest[j], max(countPieces/len(rest), 2))...)
				j++
			}
			rest = cut
		}
		o.spans = append(rest, o.spans[k:]...)
	}
	row := make([]types.Datum, o.aggs)
	for i := range row {
		row[i] = types.DInt(n)
	}
	return row, nil
}

func (o *countOp) Close() {}

// countSplit cuts rest, the unread part of a span whose page began at
// start and stopped at rest.Key, into at most n spans: rest.Key, then cut
// points as far apart in key space as start is from rest.Key, the last
// span ending at rest.EndKey. Keys are compared as numbers: 8 bytes big
// endian, from 4 bytes before the first in which start and rest.Key
// differ, zeros past a key's end. When no cut point falls inside rest it returns rest alone.
func countSplit(start []byte, rest kvpb.Span, n int) []kvpb.Span {
	from := rest.Key
	c := 0
	for c < len(start) && c < len(from) && start[c] == from[c] {
		c++
	}
	// The word starts a few shared bytes before the first that differs,
	// so that multiples of the distance still fit in it.
	c = max(c-4, 0)
	word := func(k []byte) uint64 {
		var w [8]byte
		if c < len(k) {
			copy(w[:], k[c:])
		}
		return binary.BigEndian.Uint64(w[:])
	}
	a, b := word(start), word(from)
	out := []kvpb.Span{rest}
	if b <= a {
		return out
	}
	d := b - a
	for i := 1; i < n; i++ {
		if d > (math.MaxUint64-b)/uint64(i) { // past the largest word
			break
		}
		v := b + uint64(i)*d
		key := binary.BigEndian.AppendUint64(slices.Clone(from[:c]), v)
		last := &out[len(out)-1]
		if bytes.Compare(key, last.Key) <= 0 || (len(rest.EndKey) > 0 && bytes.Compare(key, rest.EndKey) >= 0) {
			break
		}
		last.EndKey = key
		out = append(out, kvpb.Span{Key: key, EndKey: rest.EndKey})
	}
	return out
}
