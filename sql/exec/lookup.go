package exec

import (
	"bytes"
	"context"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// lookuper turns batches of input rows into one kv.Batch of prefix scans
// of an index (a primary row's span, or the entries of a non-unique
// prefix) and decodes each scan's rows separately, so the results stay
// paired with the input rows and in their order.
//
// Reads in storage order (read-planning.txt): the batch's keys are sorted
// and repeated keys read once, so each tablet (a contiguous key range:
// kv.DistSender keeps the order of the requests it sends it) reads its
// part of the batch front to back, and a disk seeks at most once per
// block instead of once per key. The results go back to the input rows
// they belong to, so the operator's output order is the input's whatever
// the reading order.
type lookuper struct {
	r      *runner
	node   plan.Node
	l      *rowenc.TableLayout
	idx    *rowenc.IndexLayout
	keyPos []int // input row positions of the lookup key columns
	// hashFrom: the index is spread over buckets and the bucket is the
	// hash of the leading primary-key columns, which keyPos covers.
	bucketed bool
	f        *rowenc.RowFetcher
	scratch  []types.Datum
}

func (r *runner) newLookuper(node plan.Node, t *catalog.Table, index *catalog.Index, inCols []plan.Column, keyCols []sem.ColumnID, needed []rowenc.ColumnID) (*lookuper, error) {
	l, err := r.tableLayout(t)
	if err != nil {
		return nil, err
	}
	idx, err := indexLayout(l, t, index)
	if err != nil {
		return nil, err
	}
	if len(keyCols) == 0 || len(keyCols) > len(idx.KeyColumns) {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: lookup of %d key columns into index %q", len(keyCols), idx.Name)
	}
	lk := &lookuper{r: r, node: node, l: l, idx: idx, bucketed: bucketed(l, idx)}
	if lk.keyPos, err = colPositions(inCols, keyCols); err != nil {
		return nil, err
	}
	if lk.bucketed {
		// The bucket hashes primary-key columns (rowenc's
		// HashColumnIDs): a lookup must supply them, which only a
		// primary-index lookup can.
		if !idx.IsPrimary() || !hashColumnsAmong(l, idx.KeyColumns[:len(keyCols)]) {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported,
				"lookup into index %q of hash-partitioned table %q without its hash columns is not supported", idx.Name, t.Name)
		}
	}
	if lk.f, err = rowenc.NewRowFetcher(l, idx, needed); err != nil {
		return nil, err
	}
	lk.scratch = make([]types.Datum, len(l.Columns))
	return lk, nil
}

// hashColumnsAmong reports whether cols include every column l's bucket is
// hashed from.
func hashColumnsAmong(l *rowenc.TableLayout, cols []rowenc.ColumnID) bool {
	for _, id := range l.HashColumnIDs() {
		if !slices.Contains(cols, id) {
			return false
		}
	}
	return true
}

// key returns the key prefix input row looks up; ok is false when a key
// value is NULL (it matches nothing).
func (lk *lookuper) key(row []types.Datum) (key []byte, ok bool, err error) {
	var bucket uint16
	if lk.bucketed {
		for i := range lk.scratch {
			lk.scratch[i] = types.DNull
		}
		for i, p := range lk.keyPos {
			lk.scratch[lk.l.ColumnPos(lk.idx.KeyColumns[i])] = row[p]
		}
		if bucket, err = lk.l.Bucket(lk.scratch); err != nil {
			return nil, false, err
		}
	}
	key = lk.l.IndexPrefix(nil, lk.idx, bucket)
	for i, p := range lk.keyPos {
		d := row[p]
		if types.IsNull(d) {
			return nil, false, nil
		}
		if key, err = rowenc.EncodeKey(key, d, lk.idx.KeyOrders[i]); err != nil {
			return nil, false, err
		}
	}
	return key, true, nil
}

// lookup returns, per input row, the full-width rows its key found.
// Even a full primary key is read with a prefix Scan, not a Get: a row
// may be stored as a row key plus column keys (unpacked, or packed with
// newer column entries), and the scan reads all of them in one request.
func (lk *lookuper) lookup(ctx context.Context, in [][]types.Datum) ([][][]types.Datum, error) {
	out := make([][][]types.Datum, len(in))
	type probe struct {
		key []byte
		row int // input position
	}
	probes := make([]probe, 0, len(in))
	for i, row := range in {
		k, ok, err := lk.key(row)
		if err != nil {
			return nil, err
		}
		if ok {
			probes = append(probes, probe{k, i})
		}
	}
	if len(probes) == 0 {
		return out, nil
	}
	if !lk.r.x.LookupInputOrder {
		// Storage order; stable, so equal keys keep their input order
		// (which only matters to the dedup below: they share a read).
		slices.SortStableFunc(probes, func(a, b probe) int { return bytes.Compare(a.key, b.key) })
	}
	b := &kv.Batch{}
	// reads[j] is the scan of probes[j]'s key: the index in b of the
	// first probe with that key.
	reads := make([]int, len(probes))
	scans := 0
	for j, p := range probes {
		if j > 0 && !lk.r.x.LookupInputOrder && bytes.Equal(p.key, probes[j-1].key) {
			reads[j] = reads[j-1]
			continue
		}
		reads[j] = scans
		scans++
		b.Scan(p.key, keys.PrefixEnd(p.key), 0)
	}
	tctx, tr := lk.r.x.Stats.trace(ctx)
	if err := lk.r.x.Txn.Run(tctx, b); err != nil {
		return nil, err
	}
	lk.r.x.Stats.addKV(lk.node, scans)
	lk.r.x.Stats.addRead(lk.node, tr, b.Results)
	noteKeyOnly(ctx, lk.f)
	for j, p := range probes {
		if j > 0 && reads[j] == reads[j-1] {
			// The same key as the previous probe: the same rows, which
			// the join only reads.
			out[p.row] = out[probes[j-1].row]
			continue
		}
		var rows [][]types.Datum
		emit := func(row []types.Datum) error { rows = append(rows, row); return nil }
		if err := lk.f.Add(b.Results[reads[j]].Rows, emit); err != nil {
			return nil, err
		}
		if err := lk.f.Finish(emit); err != nil {
			return nil, err
		}
		out[p.row] = rows
	}
	return out, nil
}

// batchJoinOp reads input rows in batches, looks them up and emits the
// joined rows in input order.
type batchJoinOp struct {
	in    op
	lk    *lookuper
	join  func(in []types.Datum, found [][]types.Datum, emit func([]types.Datum)) error
	out   [][]types.Datum
	oi    int
	done  bool
	batch [][]types.Datum
}

func (o *batchJoinOp) Next(ctx context.Context) ([]types.Datum, error) {
	for o.oi >= len(o.out) {
		if o.done {
			return nil, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		o.out, o.oi = o.out[:0], 0
		o.batch = o.batch[:0]
		size := o.lk.r.x.LookupBatch
		if size <= 0 {
			size = lookupBatch
		}
		for len(o.batch) < size {
			row, err := o.in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if row == nil {
				o.done = true
				break
			}
			o.batch = append(o.batch, row)
		}
		found, err := o.lk.lookup(ctx, o.batch)
		if err != nil {
			return nil, err
		}
		emit := func(row []types.Datum) { o.out = append(o.out, row) }
		for i, row := range o.batch {
			if err := o.join(row, found[i], emit); err != nil {
				return nil, err
			}
		}
	}
	row := o.out[o.oi]
	o.out[o.oi] = nil
	o.oi++
	return row, nil
}

func (o *batchJoinOp) Close() { o.in.Close() }

func (r *runner) buildIndexJoin(n *plan.IndexJoin) (op, error) {
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	lk, err := r.newLookuper(n, n.Table, nil, n.Input.Columns(), n.KeyCols, n.TableCols)
	if err != nil {
		in.Close()
		return nil, err
	}
	outPos, err := tableRowPositions(lk.l, n.TableCols)
	if err != nil {
		in.Close()
		return nil, err
	}
	filter, err := r.compilePred(n.Filter, n.Cols)
	if err != nil {
		in.Close()
		return nil, err
	}
	return &batchJoinOp{in: in, lk: lk, join: func(_ []types.Datum, found [][]types.Datum, emit func([]types.Datum)) error {
		for _, full := range found {
			row := project(full, outPos)
			ok, err := filter(row)
			if err != nil {
				return err
			}
			if ok {
				emit(row)
			}
		}
		return nil
	}}, nil
}

func (r *runner) buildLookupJoin(n *plan.LookupJoin) (op, error) {
	switch n.Kind {
	case plan.InnerJoin, plan.LeftJoin, plan.SemiJoin, plan.AntiJoin:
	default:
		return nil, pgerror.New(pgerrcode.InternalError, "exec: lookup join of kind %d", n.Kind)
	}
	inCols := n.Input.Columns()
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	lk, err := r.newLookuper(n, n.Table, n.Index, inCols, n.KeyCols, n.TableCols)
	if err != nil {
		in.Close()
		return nil, err
	}
	outPos, err := tableRowPositions(lk.l, n.TableCols)
	if err != nil {
		in.Close()
		return nil, err
	}
	both := append(append([]plan.Column{}, inCols...), n.Cols...)
	on, err := r.compilePred(n.On, both)
	if err != nil {
		in.Close()
		return nil, err
	}
	var combined []types.Datum
	return &batchJoinOp{in: in, lk: lk, join: func(left []types.Datum, found [][]types.Datum, emit func([]types.Datum)) error {
		matched := false
		for _, full := range found {
			combined = append(append(combined[:0], left...), project(full, outPos)...)
			ok, err := on(combined)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			matched = true
			switch n.Kind {
			case plan.InnerJoin, plan.LeftJoin:
				emit(append([]types.Datum(nil), combined...))
			case plan.SemiJoin:
				emit(left)
				return nil
			case plan.AntiJoin:
				return nil
			}
		}
		if !matched {
			switch n.Kind {
			case plan.LeftJoin:
				emit(append(append([]types.Datum(nil), left...), nulls(len(n.Cols))...))
			case plan.AntiJoin:
				emit(left)
			}
		}
		return nil
	}}, nil
}

func nulls(n int) []types.Datum {
	out := make([]types.Datum, n)
	for i := range out {
		out[i] = types.DNull
	}
	return out
}
