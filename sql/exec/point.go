package exec

import (
	"context"

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
// at most one Project above it. Start runs such a plan as one operator
// that sends one kv.Batch of one Scan and decodes its row, instead of
// building the general scan (buildLocking, the scan's order keys and
// stream, the distributed-planning checks, a kvStream) and a Project
// operator over it: together 8% of the node's CPU per point SELECT
// (bench/README.md, issue 22, 2026-11-30 morning).
//
// Only plans whose result cannot differ take it: no row lock (FOR
// UPDATE/SHARE goes through lock.go), no filter, no hash buckets, no
// EXPLAIN ANALYZE (Stats), and not under distsql = on, which distributes
// even one row; with auto, one row lies on one tablet and runs locally
// anyway (distChainAt). The read itself is the scan's: the same Scan
// request through the statement's kv.Txn, the same RowFetcher, a resume
// span followed as kvStream follows it.

// pointOp reads the one row of a point span.
type pointOp struct {
	r      *runner
	span   kvpb.Span
	f      *rowenc.RowFetcher
	outPos []int
	// fns, when not nil, is the Project above the scan, compiled.
	fns  []rowFn
	done bool
	row  []types.Datum
}

// buildPoint returns the fast-path operator for root, or nil when root is
// not a point read it may run (the general path runs it then).
func (r *runner) buildPoint(root plan.Node) (op, error) {
	if r.x.Stats != nil || r.fragSpan != nil {
		return nil, nil
	}
	proj, _ := root.(*plan.Project)
	n := root
	if proj != nil {
		n = proj.Input
	}
	scan, ok := n.(*plan.Scan)
	if !ok || scan == r.lockOnRead || scan.Lock != plan.LockNone || scan.Filter != nil || scan.Inverted != nil ||
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
	if o.outPos, err = tableRowPositions(l, scan.TableCols); err != nil {
		return nil, err
	}
	if o.f, err = rowenc.NewRowFetcher(l, idx, scan.TableCols); err != nil {
		return nil, err
	}
	if proj != nil {
		o.fns = make([]rowFn, len(proj.Exprs))
		for i, e := range proj.Exprs {
			if o.fns[i], err = r.compile(e, scan.Columns()); err != nil {
				return nil, err
			}
		}
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
	if o.fns == nil {
		return row, nil
	}
	out := make([]types.Datum, len(o.fns))
	for i, f := range o.fns {
		var err error
		if out[i], err = f(row); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (o *pointOp) Close() {}
