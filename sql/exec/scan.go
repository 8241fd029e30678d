package exec

import (
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// Paging: a scan asks KV for firstPage keys, then doubles up to maxPage,
// so LIMIT 1 reads little and a full scan needs few round trips.
const (
	firstPage = 256
	maxPage   = 8192
	// spansPerBatch is how many spans of a many-span scan (an IN list)
	// share one round trip.
	spansPerBatch = 64
	// lookupBatch is how many input rows an index or lookup join
	// collects before sending one kv.Batch for all of them, unless
	// Context.LookupBatch says otherwise.
	lookupBatch = 1000
)

// Row locking (plan.Scan.Lock): a locking scan runs as a plain one and
// lock.go locks the rows it returns.

// tableLayout returns t's layout, built once per statement.
// The first table's layout is kept outside the map: most statements read
// one table, and the map was two allocations per statement.
func (r *runner) tableLayout(t *catalog.Table) (*rowenc.TableLayout, error) {
	if r.layout1.t == t && t != nil {
		return r.layout1.l, nil
	}
	if l := r.layouts[t]; l != nil {
		return l, nil
	}
	l, err := t.SharedLayout()
	if err != nil {
		return nil, fmt.Errorf("exec: table %q: %w", t.Name, err)
	}
	if r.layout1.t == nil {
		r.layout1.t, r.layout1.l = t, l
		return l, nil
	}
	if r.layouts == nil {
		r.layouts = map[*catalog.Table]*rowenc.TableLayout{}
	}
	r.layouts[t] = l
	return l, nil
}

func indexLayout(l *rowenc.TableLayout, t *catalog.Table, idx *catalog.Index) (*rowenc.IndexLayout, error) {
	if idx == nil || idx.ID == t.PrimaryIndex.ID {
		return &l.Primary, nil
	}
	il := l.Index(uint32(idx.ID))
	if il == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: table %q has no index %d", t.Name, idx.ID)
	}
	return il, nil
}

func bucketed(l *rowenc.TableLayout, idx *rowenc.IndexLayout) bool {
	return l.HashColumns > 0 && idx.Local
}

// tableRowPositions maps table columns to positions in the fetcher's
// full-width rows.
func tableRowPositions(l *rowenc.TableLayout, ids []rowenc.ColumnID) ([]int, error) {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = l.ColumnPos(id)
		if out[i] < 0 {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: table %q has no column %d", l.Name, id)
		}
	}
	return out, nil
}

// project picks the output columns of a full-width fetched row; columns
// the index does not hold read as NULL.
func project(full []types.Datum, pos []int) []types.Datum {
	return projectInto(nil, full, pos)
}

// projectInto is project writing into dst's room when it has enough.
// The row is never nil, even of no columns (nil is the end of rows).
func projectInto(dst, full []types.Datum, pos []int) []types.Datum {
	var out []types.Datum
	if dst != nil && cap(dst) >= len(pos) {
		out = dst[:len(pos):len(pos)]
	} else {
		out = make([]types.Datum, len(pos))
	}
	for i, p := range pos {
		if d := full[p]; d != nil {
			out[i] = d
		} else {
			out[i] = types.DNull
		}
	}
	return out
}

// kvStream reads the rows of a list of kv spans of one index, in order
// (reverse order when reverse), page by page.
type kvStream struct {
	r       *runner
	node    plan.Node
	spans   []kvpb.Span // still to read, in reading order
	reverse bool
	limit   int64
	f       *rowenc.RowFetcher
	buf     [][]types.Datum
	bi      int
	done    bool
	// distCandidate: the scan may read through a distributed flow
	// (distsql.go), decided at the first fill; flow is that flow.
	distCandidate bool
	flow          *distsql.Flow
	// kvBound, when > 0, bounds every KV the scan needs (a HardLimit
	// without a filter): each fragment of a flow gets it.
	kvBound int64
	// lockOnRead, when set, is the row span the first read locks
	// (kv.Batch.LockOnRead; the row of a single-row UPDATE).
	lockOnRead *kvpb.Span
}

func (s *kvStream) next(ctx context.Context) ([]types.Datum, error) {
	for s.bi >= len(s.buf) {
		if s.done {
			return nil, nil
		}
		s.buf, s.bi = s.buf[:0], 0
		if err := s.fill(ctx); err != nil {
			return nil, err
		}
	}
	row := s.buf[s.bi]
	s.buf[s.bi] = nil
	s.bi++
	return row, nil
}

func (s *kvStream) emit(row []types.Datum) error {
	s.buf = append(s.buf, row)
	return nil
}

// fill reads one page: up to spansPerBatch spans in one round trip, each
// limited to the current page size. Results after the first span KV cut
// short are dropped and read again later, so rows stay in order.
func (s *kvStream) fill(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.distCandidate {
		s.distCandidate = false
		flow, err := s.startDist(ctx)
		if err != nil {
			return err
		}
		s.flow = flow
	}
	if s.flow != nil {
		return s.fillDist(ctx)
	}
	if len(s.spans) == 0 {
		s.done = true
		return s.f.Finish(s.emit)
	}
	b := &kv.Batch{}
	n := s.stage(b)
	if s.lockOnRead != nil {
		b.LockOnRead(s.lockOnRead.Key, s.lockOnRead.EndKey)
		s.lockOnRead = nil
	}
	tctx, tr := s.r.x.Stats.trace(ctx)
	if err := s.r.x.Txn.Run(tctx, b); err != nil {
		return err
	}
	s.r.x.Stats.addKV(s.node, n)
	s.r.x.Stats.addRead(s.node, tr, b.Results)
	return s.absorb(ctx, b.Results[:n])
}

// stage adds the scans of s's next page to b and returns how many.
func (s *kvStream) stage(b *kv.Batch) int {
	n := min(len(s.spans), spansPerBatch)
	for _, sp := range s.spans[:n] {
		if s.reverse {
			b.ReverseScan(sp.Key, sp.EndKey, s.limit)
		} else {
			b.Scan(sp.Key, sp.EndKey, s.limit)
		}
	}
	return n
}

// absorb takes the results of the scans stage added.
func (s *kvStream) absorb(ctx context.Context, results []kv.Result) error {
	noteKeyOnly(ctx, s.f)
	consumed := 0
	for i := range results {
		res := &results[i]
		if err := s.f.Add(res.Rows, s.emit); err != nil {
			return err
		}
		if res.ResumeSpan != nil {
			s.spans[i] = *res.ResumeSpan
			break
		}
		consumed++
	}
	s.spans = s.spans[consumed:]
	s.limit = min(s.limit*2, maxPage)
	return nil
}

// fillFirst reads the first page of every stream in one batch: the KV
// layer sends each tablet its part in parallel, so a merge of many
// buckets starts after one round trip instead of one per bucket.
func fillFirst(ctx context.Context, streams []*kvStream) error {
	if len(streams) < 2 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b := &kv.Batch{}
	counts := make([]int, len(streams))
	total := 0
	for i, s := range streams {
		if len(s.spans) > 0 {
			counts[i] = s.stage(b)
			total += counts[i]
		}
	}
	if total == 0 {
		return nil
	}
	r, node := streams[0].r, streams[0].node
	tctx, tr := r.x.Stats.trace(ctx)
	if err := r.x.Txn.Run(tctx, b); err != nil {
		return err
	}
	r.x.Stats.addKV(node, total)
	r.x.Stats.addRead(node, tr, b.Results)
	off := 0
	for i, s := range streams {
		if counts[i] == 0 {
			continue
		}
		if err := s.absorb(ctx, b.Results[off:off+counts[i]]); err != nil {
			return err
		}
		off += counts[i]
	}
	return nil
}

// scanOp is a Scan: one stream, or one per bucket merged in index order.
type scanOp struct {
	r       *runner
	n       *plan.Scan
	streams []*kvStream
	// merge: the streams are merged by keys (ordered bucketed scan).
	merge   bool
	keys    []sortKey
	h       *mergeHeap
	started bool
	// sortAll: read everything then sort by keys (ordered scan of every
	// bucket of a bucketed index: 65536 streams would be absurd).
	sortAll bool
	sorted  *sliceOp

	spanCheck func(full []types.Datum) bool
	outPos    []int
	filter    func([]types.Datum) (bool, error)
	returned  int64
	checked   int
}

func (r *runner) buildScan(n *plan.Scan) (op, error) {
	if n.Inverted != nil {
		return r.buildInvertedScan(n)
	}
	if n.Filter != nil {
		// x [NOT] IN (uncorrelated subquery) as a conjunct (inset.go).
		if o, err := r.buildInSetScan(n); err != nil || o != nil {
			return o, err
		}
	}
	l, err := r.tableLayout(n.Table)
	if err != nil {
		return nil, err
	}
	idx, err := indexLayout(l, n.Table, n.Index)
	if err != nil {
		return nil, err
	}
	o := &scanOp{r: r, n: n}
	if o.outPos, err = tableRowPositions(l, n.TableCols); err != nil {
		return nil, err
	}
	if o.filter, err = r.compilePred(n.Filter, n.Cols); err != nil {
		return nil, err
	}
	keyPos, err := tableRowPositions(l, idx.KeyColumns)
	if err != nil {
		return nil, err
	}
	// Index order is the key columns, then (in a secondary index) the
	// primary-key columns the key lacks: they follow the key in the
	// entries of a non-unique index and break no ties in a unique one.
	// Clipped, so the appends below copy instead of writing into idx.
	orderCols, orders := slices.Clip(idx.KeyColumns), slices.Clip(idx.KeyOrders)
	if !idx.IsPrimary() {
		for i, id := range l.Primary.KeyColumns {
			if !slices.Contains(idx.KeyColumns, id) {
				orderCols = append(orderCols, id)
				orders = append(orders, l.Primary.KeyOrders[i])
			}
		}
	}
	orderPos, err := tableRowPositions(l, orderCols)
	if err != nil {
		return nil, err
	}
	for i, p := range orderPos {
		ord := orders[i]
		o.keys = append(o.keys, sortKey{pos: p, desc: (ord&rowenc.Descending != 0) != n.Reverse, nullsFirst: (ord&rowenc.NullsFirst != 0) != n.Reverse})
	}
	needed := slices.Clone(n.TableCols)
	limit := int64(firstPage)
	// kvBound, when > 0, bounds every KV the scan can need.
	var kvBound int64
	if n.HardLimit > 0 && n.Filter == nil {
		// A primary row is at most one KV per column (unpacked), and
		// the fetcher emits it once the next row's first key arrives.
		perRow := int64(1)
		if idx.IsPrimary() && !(n.ShardMerge && n.Table.RowFormat.Packed) {
			// (A merge of hash-sharded buckets of a packed table reads
			// one key per row: a bucket pages on if rows are not packed.)
			perRow = int64(len(l.Columns) + 1)
		}
		kvBound = (n.HardLimit + 1) * perRow
		limit = min(limit, kvBound)
	}
	needles := jsonbNeedles(n)
	newStream := func(spans []kvpb.Span) (*kvStream, error) {
		f, err := rowenc.NewRowFetcher(l, idx, needed)
		if err != nil {
			return nil, err
		}
		f.SetNeedles(needles)
		if n.Reverse {
			slices.Reverse(spans)
		}
		return &kvStream{r: r, node: n, spans: spans, reverse: n.Reverse, limit: limit, f: f}, nil
	}
	if r.fragSpan != nil {
		// A distributed fragment's scan: its span, read in key order
		// (for a bucketed index, part of the group's span: the fetcher
		// skips other indexes' keys, as for a local scan of every
		// bucket).
		span := *r.fragSpan
		if sp, ok := r.fragScans[n]; ok {
			span = sp
		}
		s, err := newStream([]kvpb.Span{span})
		if err != nil {
			return nil, err
		}
		o.streams = []*kvStream{s}
		return o, nil
	}
	if n.ShardMerge && n.Ordered && !bucketed(l, idx) && len(n.Spans) > 0 {
		return o.shardStreams(newStream, l, idx, orderCols, &needed)
	}
	if !bucketed(l, idx) {
		sp, err := indexSpans(l, idx, 0, n.Spans)
		if err != nil {
			return nil, err
		}
		s, err := newStream(sp)
		if err != nil {
			return nil, err
		}
		s.distCandidate = len(sp) == 1 && r.distEligible(r.ctx, n)
		s.kvBound = kvBound
		if n == r.lockOnRead && len(sp) == 1 {
			// The span lockUpdated locks: the row key as the writer
			// makes it, from the point's key values.
			row := make([]types.Datum, len(l.Columns))
			for i, p := range keyPos {
				row[p] = n.Spans[0].Start[i]
			}
			key, err := l.PrimaryKey(nil, row)
			if err != nil {
				return nil, err
			}
			s.lockOnRead = &kvpb.Span{Key: key, EndKey: keys.PrefixEnd(key)}
		}
		o.streams = []*kvStream{s}
		return o, nil
	}
	if n.Ordered {
		// Merging needs the key columns even when nothing reads them.
		needed = append(needed, orderCols...)
	}
	if n.Buckets == nil {
		// Every bucket: read the index's whole group span once (the
		// fetcher skips other indexes' keys) and check spans per row.
		if len(n.Spans) > 0 {
			o.spanCheck = spanChecker(keyPos, idx.KeyOrders, n.Spans)
			// The check reads the key columns even when nothing above
			// does (the optimizer prunes columns its spans enforce).
			needed = append(needed, idx.KeyColumns...)
		}
		whole := l.IndexSpan(idx)
		s, err := newStream([]kvpb.Span{whole})
		if err != nil {
			return nil, err
		}
		o.streams = []*kvStream{s}
		o.sortAll = n.Ordered
		return o, nil
	}
	for _, b := range n.Buckets {
		sp, err := indexSpans(l, idx, b, n.Spans)
		if err != nil {
			return nil, err
		}
		s, err := newStream(sp)
		if err != nil {
			return nil, err
		}
		o.streams = append(o.streams, s)
	}
	o.merge = n.Ordered && len(o.streams) > 1
	return o, nil
}

// shardStreams sets o up for a plan.Scan with ShardMerge: the spans of
// each bucket of a hash-sharded index (they share their first key value,
// the shard) are a stream of their own, and the streams are merged by the
// key columns after the shard. A HardLimit caps each stream's first page,
// so ORDER BY k LIMIT n reads about n rows per bucket.
func (o *scanOp) shardStreams(newStream func([]kvpb.Span) (*kvStream, error), l *rowenc.TableLayout,
	idx *rowenc.IndexLayout, orderCols []rowenc.ColumnID, needed *[]rowenc.ColumnID) (op, error) {
	*needed = append(*needed, orderCols...)
	o.keys = o.keys[1:]
	spans := o.n.Spans
	for len(spans) > 0 {
		k := 1
		for k < len(spans) && types.Compare(spans[k].Start[0], spans[0].Start[0]) == 0 {
			k++
		}
		sp, err := indexSpans(l, idx, 0, spans[:k])
		if err != nil {
			return nil, err
		}
		s, err := newStream(sp)
		if err != nil {
			return nil, err
		}
		o.streams = append(o.streams, s)
		spans = spans[k:]
	}
	o.merge = len(o.streams) > 1
	return o, nil
}

// indexSpans encodes plan spans as kv spans of one bucket of idx.
func indexSpans(l *rowenc.TableLayout, idx *rowenc.IndexLayout, bucket uint16, spans []plan.Span) ([]kvpb.Span, error) {
	prefix := l.IndexPrefix(nil, idx, bucket)
	if len(spans) == 0 {
		return []kvpb.Span{{Key: prefix, EndKey: keys.PrefixEnd(prefix)}}, nil
	}
	out := make([]kvpb.Span, 0, len(spans))
	for _, sp := range spans {
		start, err := encodePrefix(prefix, idx, sp.Start)
		if err != nil {
			return nil, err
		}
		if sp.StartExclusive && len(sp.Start) > 0 {
			start = keys.PrefixEnd(start)
		}
		var end []byte
		switch {
		case sp.EndInclusive && !sp.StartExclusive && len(sp.End) > 0 && len(sp.End) == len(sp.Start) && &sp.End[0] == &sp.Start[0]:
			// A point span (the cached point plans make these): the end
			// is the start's prefix end, without encoding the key again.
			end = keys.PrefixEnd(start)
		case sp.End == nil:
			end = keys.PrefixEnd(prefix)
		default:
			if end, err = encodePrefix(prefix, idx, sp.End); err != nil {
				return nil, err
			}
			if sp.EndInclusive {
				end = keys.PrefixEnd(end)
			}
		}
		if string(start) >= string(end) {
			continue
		}
		out = append(out, kvpb.Span{Key: start, EndKey: end})
	}
	return out, nil
}

func encodePrefix(prefix []byte, idx *rowenc.IndexLayout, vals []types.Datum) ([]byte, error) {
	if len(vals) > len(idx.KeyColumns) {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: span of %d values on index %q of %d key columns", len(vals), idx.Name, len(idx.KeyColumns))
	}
	key := slices.Clip(prefix)
	for i, d := range vals {
		var err error
		if key, err = rowenc.EncodeKey(key, d, idx.KeyOrders[i]); err != nil {
			return nil, fmt.Errorf("exec: span of index %q: %w", idx.Name, err)
		}
	}
	return key, nil
}

// spanChecker tests a decoded row against the spans, comparing key
// values as the index orders them (for scans that cannot encode spans per
// bucket).
func spanChecker(keyPos []int, orders []rowenc.Order, spans []plan.Span) func([]types.Datum) bool {
	cmp := func(row []types.Datum, bound []types.Datum) int {
		for i, d := range bound {
			o := orders[i]
			v := row[keyPos[i]]
			if v == nil {
				v = types.DNull
			}
			if c := compareDatums(v, d, o&rowenc.Descending != 0, o&rowenc.NullsFirst != 0); c != 0 {
				return c
			}
		}
		return 0
	}
	return func(row []types.Datum) bool {
		for _, sp := range spans {
			if sp.Start != nil {
				c := cmp(row, sp.Start)
				if c < 0 || (c == 0 && sp.StartExclusive) {
					continue
				}
			}
			if sp.End != nil {
				c := cmp(row, sp.End)
				if c > 0 || (c == 0 && !sp.EndInclusive) {
					continue
				}
			}
			return true
		}
		return false
	}
}

// nextFull returns the next full-width row in the scan's order.
func (o *scanOp) nextFull(ctx context.Context) ([]types.Datum, error) {
	switch {
	case o.sortAll:
		if o.sorted == nil {
			var all [][]types.Datum
			for {
				row, err := o.streams[0].next(ctx)
				if err != nil {
					return nil, err
				}
				if row == nil {
					break
				}
				if o.spanCheck == nil || o.spanCheck(row) {
					all = append(all, row)
				}
			}
			slices.SortStableFunc(all, func(a, b []types.Datum) int { return compareRows(o.keys, a, b) })
			o.sorted = &sliceOp{rows: all}
		}
		return o.sorted.Next(ctx)
	case o.merge:
		if !o.started {
			o.started = true
			o.h = &mergeHeap{keys: o.keys}
			if err := fillFirst(ctx, o.streams); err != nil {
				return nil, err
			}
			for _, s := range o.streams {
				row, err := s.next(ctx)
				if err != nil {
					return nil, err
				}
				if row != nil {
					o.h.items = append(o.h.items, mergeItem{row, s})
				}
			}
			heap.Init(o.h)
		}
		if o.h.Len() == 0 {
			return nil, nil
		}
		top := o.h.items[0]
		row, err := top.s.next(ctx)
		if err != nil {
			return nil, err
		}
		if row == nil {
			heap.Pop(o.h)
		} else {
			o.h.items[0].row = row
			heap.Fix(o.h, 0)
		}
		return top.row, nil
	}
	for len(o.streams) > 0 {
		row, err := o.streams[0].next(ctx)
		if err != nil {
			return nil, err
		}
		if row == nil {
			o.streams = o.streams[1:]
			continue
		}
		if o.spanCheck != nil && !o.spanCheck(row) {
			continue
		}
		return row, nil
	}
	return nil, nil
}

func (o *scanOp) Next(ctx context.Context) ([]types.Datum, error) {
	for {
		if o.n.HardLimit > 0 && o.returned >= o.n.HardLimit {
			return nil, nil
		}
		if o.checked++; o.checked%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		full, err := o.nextFull(ctx)
		if err != nil || full == nil {
			return nil, err
		}
		row := project(full, o.outPos)
		ok, err := o.filter(row)
		if err != nil {
			return nil, err
		}
		if ok {
			o.returned++
			return row, nil
		}
	}
}

func (o *scanOp) Close() {
	for _, s := range o.streams {
		if s.flow != nil {
			// Stops its fragments (a LIMIT above, a portal closed early).
			s.flow.Close()
			s.r.x.Stats.addDistDone(s.node, s.flow.Stats())
			s.flow = nil
		}
	}
	o.streams = nil
	o.sorted = nil
}

type mergeItem struct {
	row []types.Datum
	s   *kvStream
}

// mergeHeap is a k-way merge of bucket streams by index key.
type mergeHeap struct {
	items []mergeItem
	keys  []sortKey
}

func (h *mergeHeap) Len() int { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool {
	return compareRows(h.keys, h.items[i].row, h.items[j].row) < 0
}
func (h *mergeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(mergeItem)) }
func (h *mergeHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return it
}
