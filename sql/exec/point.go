package exec

import (
	"context"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// The point-read fast path (issue 22): a SELECT of one row by its whole
// primary key (pgbench's select-only, a prepared statement's kept plan)
// is, after planning, a Scan of one point span of the primary index with
// a chain of Projects above it. Start runs such a plan as one operator
// that sends one kv.Batch of one Scan and decodes its row, instead of
// building the general scan (buildLocking, the scan's order keys and
// stream, the distributed-planning checks, a kvStream) and Project
// operators over it: together 8% of the node's CPU per point SELECT
// (bench/README.md, issue 22, 2026-11-30 morning).
//
// Only plans whose result cannot differ take it: no row lock (FOR
// UPDATE/SHARE goes through lock.go), no filter, no hash buckets, no
// EXPLAIN ANALYZE (Stats), and not under distsql = on, which distributes
// even one row; with auto, one row lies on one tablet and runs locally
// anyway (distChainAt). The read itself is the scan's: the same Scan
// request through the statement's kv.Txn, the same RowFetcher, a resume
// span followed as kvStream follows it.
//
// The point DML fast path (issue 22): the input of a single-row UPDATE
// or DELETE by whole primary key (pgbench's `UPDATE ... SET abalance =
// abalance + $1 WHERE aid = $2`, a chain of Projects over such a Scan) is
// built by buildPointInput as this same operator instead of a scan, its
// kvStream and one operator per Project. An UPDATE's read is the one
// lockingPointScan marks (r.lockOnRead): the operator asks for the row's
// lock in the read's own batch, as the scan does (kv.Batch.LockOnRead),
// so the UPDATE still reads and locks its row in one KV batch and writes
// it in the next. The writing side is unchanged (dmlState.write, the
// constraints, secondary indexes, foreign keys, RETURNING and the row
// count are the general path's): the fast path only leaves out the
// operator tree of the read.

// pointOp reads the one row of a point span.
type pointOp struct {
	r      *runner
	span   kvpb.Span
	f      *rowenc.RowFetcher
	outPos []int
	// lock, when set, is the row span the read locks (an UPDATE's read,
	// r.lockOnRead).
	lock *kvpb.Span
	// projs, when not nil, are the Projects above the scan, compiled,
	// innermost first.
	projs [][]rowFn
	done  bool
	row   []types.Datum
}

// buildPointInput builds the input of a DML statement: the fast-path
// operator when it is a point read (see above), else the general one.
func (r *runner) buildPointInput(n plan.Node) (op, error) {
	o, err := r.buildPoint(n)
	if o != nil || err != nil {
		return o, err
	}
	return r.build(n)
}

// buildPoint returns the fast-path operator for root, a point Scan under
// a chain of Projects, or nil when root is not a point read it may run
// (the general path runs it then).
func (r *runner) buildPoint(root plan.Node) (op, error) {
	if r.x.Stats != nil || r.fragSpan != nil {
		return nil, nil
	}
	var projs []*plan.Project
	n := root
	for {
		proj, ok := n.(*plan.Project)
		if !ok {
			break
		}
		projs = append(projs, proj)
		n = proj.Input
	}
	scan, ok := n.(*plan.Scan)
	if !ok || scan.Lock != plan.LockNone || scan.Filter != nil || scan.Inverted != nil ||
		len(scan.Spans) != 1 || scan.Buckets != nil || scan.ShardMerge {
		return nil, nil
	}
	if scan.Index != nil && scan.Index.ID != scan.Table.PrimaryIndex.ID {
		return nil, nil
	}
	l, err := r.tableLayout(scan.Table)
	if err != nil {
		return nil, nil
	}
	idx := &l.Primary
	if bucketed(l, idx) {
		return nil, nil
	}
	spans, err := indexSpans(l, idx, 0, scan.Spans)
	if err != nil || !oneRow(scan.Spans, spans, len(idx.KeyColumns)) {
		return nil, nil
	}
	if distsql.FromContext(r.ctx) != nil && r.setting("distsql") == "on" {
		return nil, nil
	}
	o := &pointOp{r: r, span: spans[0]}
	if scan == r.lockOnRead {
		// The span the UPDATE's write locks: the row key as the writer
		// makes it, from the point's key values (as buildScan does).
		keyPos, err := tableRowPositions(l, idx.KeyColumns)
		if err != nil {
			return nil, err
		}
		row := make([]types.Datum, len(l.Columns))
		for i, p := range keyPos {
			row[p] = scan.Spans[0].Start[i]
		}
		key, err := l.PrimaryKey(nil, row)
		if err != nil {
			return nil, err
		}
		o.lock = &kvpb.Span{Key: key, EndKey: keys.PrefixEnd(key)}
	}
	if o.outPos, err = tableRowPositions(l, scan.TableCols); err != nil {
		return nil, err
	}
	if o.f, err = rowenc.NewRowFetcher(l, idx, scan.TableCols); err != nil {
		return nil, err
	}
	cols := scan.Columns()
	for i := len(projs) - 1; i >= 0; i-- {
		fns := make([]rowFn, len(projs[i].Exprs))
		for j, e := range projs[i].Exprs {
			if fns[j], err = r.compile(e, cols); err != nil {
				return nil, err
			}
		}
		o.projs = append(o.projs, fns)
		cols = projs[i].Columns()
	}
	return o, nil
}

func (o *pointOp) emit(row []types.Datum) error {
	o.row = row
	return nil
}

func (o *pointOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.done {
		return nil, nil
	}
	o.done = true
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	span := o.span
	for {
		b := &kv.Batch{}
		b.Scan(span.Key, span.EndKey, firstPage)
		if o.lock != nil {
			b.LockOnRead(o.lock.Key, o.lock.EndKey)
			o.lock = nil
		}
		if err := o.r.x.Txn.Run(ctx, b); err != nil {
			return nil, err
		}
		res := &b.Results[0]
		noteKeyOnly(ctx, o.f)
		if err := o.f.Add(res.Rows, o.emit); err != nil {
			return nil, err
		}
		if res.ResumeSpan == nil {
			break
		}
		// A row of more column entries than a page (an unpacked row of
		// very many columns): read on, as kvStream does.
		span = *res.ResumeSpan
	}
	if err := o.f.Finish(o.emit); err != nil {
		return nil, err
	}
	if o.row == nil {
		return nil, nil
	}
	row := project(o.row, o.outPos)
	o.row = nil
	for _, fns := range o.projs {
		out := make([]types.Datum, len(fns))
		for i, f := range fns {
			var err error
			if out[i], err = f(row); err != nil {
				return nil, err
			}
		}
		row = out
	}
	return row, nil
}

func (o *pointOp) Close() {}
