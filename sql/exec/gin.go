package exec

import (
	"bytes"
	"context"
	"slices"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// invertedOp is a scan of a GIN index (plan.InvertedScan): it reads the
// entries of every token, one batch per group (the DistSender sends each
// tablet its part in parallel), keeps the rows' primary keys that hold a
// token of every group, and yields them once each in primary-key order,
// which keeps the index join's lookups in key order too. A local index of
// a distributed table has a span per token and block (rowenc
// InvertedBlocks: the blocks of the scan's Buckets when a predicate fixed
// them), in block order, so each batch's spans go to few tablets and the
// DistSender reads the shards' tablets in parallel.
//
// As a distributed fragment's scan (distInvertedChain) it reads only the
// blocks whose entries lie in the fragment's span, the first bucket of a
// block holding all of them.
//
// The primary keys are held in memory (reserved with Account.Force, so
// past the node's budget the statement fails with 53200): a GIN lookup
// is meant to be selective, and the planner prefers a full scan when it
// is not (its estimate is EqRows per token).
type invertedOp struct {
	r      *runner
	n      *plan.Scan
	l      *rowenc.TableLayout
	idx    *rowenc.IndexLayout
	outPos []int
	filter func([]types.Datum) (bool, error)
	acc    *mon.Account

	started bool
	pks     [][]byte
	i       int
}

func (r *runner) buildInvertedScan(n *plan.Scan) (op, error) {
	l, err := r.tableLayout(n.Table)
	if err != nil {
		return nil, err
	}
	idx, err := indexLayout(l, n.Table, n.Index)
	if err != nil {
		return nil, err
	}
	if idx.Inverted == "" {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: inverted scan of index %q, which is not a GIN index", idx.Name)
	}
	o := &invertedOp{r: r, n: n, l: l, idx: idx, acc: r.account()}
	if o.outPos, err = tableRowPositions(l, n.TableCols); err != nil {
		return nil, err
	}
	if o.filter, err = r.compilePred(n.Filter, n.Cols); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *invertedOp) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.started {
		o.started = true
		if err := o.collect(ctx); err != nil {
			return nil, err
		}
	}
	for o.i < len(o.pks) {
		pk := o.pks[o.i]
		o.pks[o.i] = nil
		o.i++
		full := make([]types.Datum, len(o.l.Columns))
		if err := o.l.DecodeInvertedPrimaryKey(pk, full); err != nil {
			return nil, err
		}
		row := project(full, o.outPos)
		if o.filter != nil {
			ok, err := o.filter(row)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		return row, nil
	}
	return nil, nil
}

// collect intersects the groups' sets of primary keys.
func (o *invertedOp) collect(ctx context.Context) error {
	var cur map[string]struct{}
	var held int64 // bytes reserved for cur
	for _, g := range o.n.Inverted.Groups {
		found, size, err := o.readGroup(ctx, g, cur)
		if err != nil {
			return err
		}
		o.acc.Shrink(held)
		cur, held = found, size
		if len(cur) == 0 {
			break
		}
	}
	o.pks = make([][]byte, 0, len(cur))
	for k := range cur {
		o.pks = append(o.pks, []byte(k))
	}
	slices.SortFunc(o.pks, bytes.Compare)
	return nil
}

// readGroup returns the primary keys of the entries of g's tokens,
// restricted to those in within unless within is nil (the first group).
func (o *invertedOp) readGroup(ctx context.Context, g [][]byte, within map[string]struct{}) (_ map[string]struct{}, size int64, _ error) {
	var spans []kvpb.Span
	blocks := o.l.InvertedBlocks(o.idx, o.n.Buckets)
	for _, b := range blocks {
		for _, tok := range g {
			sp, err := o.l.InvertedTokenSpan(o.idx, b, tok)
			if err != nil {
				return nil, 0, err
			}
			if f := o.r.fragSpan; f != nil && (bytes.Compare(sp.Key, f.Key) < 0 || bytes.Compare(sp.Key, f.EndKey) >= 0) {
				// A distributed fragment reads the blocks whose
				// entries lie in its span (distInvertedChain).
				continue
			}
			spans = append(spans, sp)
		}
	}
	found := map[string]struct{}{}
	limit := int64(firstPage)
	for len(spans) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		n := min(len(spans), spansPerBatch)
		b := &kv.Batch{}
		for _, sp := range spans[:n] {
			b.Scan(sp.Key, sp.EndKey, limit)
		}
		tctx, tr := o.r.x.Stats.trace(ctx)
		if err := o.r.x.Txn.Run(tctx, b); err != nil {
			return nil, 0, err
		}
		o.r.x.Stats.addKV(o.n, n)
		o.r.x.Stats.addRead(o.n, tr, b.Results)
		var rest []kvpb.Span
		for i := range b.Results[:n] {
			res := &b.Results[i]
			for _, r := range res.Rows {
				pk, err := o.l.InvertedPrimaryKey(r.Key)
				if err != nil {
					return nil, 0, err
				}
				if within != nil {
					if _, ok := within[string(pk)]; !ok {
						continue
					}
				}
				if _, ok := found[string(pk)]; ok {
					continue
				}
				n := int64(len(pk)) + 48 // the key and its map slot
				if err := o.acc.Force(n); err != nil {
					return nil, 0, err
				}
				size += n
				found[string(pk)] = struct{}{}
			}
			if res.ResumeSpan != nil {
				rest = append(rest, *res.ResumeSpan)
			}
		}
		spans = append(rest, spans[n:]...)
		limit = min(limit*2, maxPage)
	}
	return found, size, nil
}

func (o *invertedOp) Close() {
	o.pks = nil
	o.acc.Clear()
}
