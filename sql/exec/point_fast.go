package exec

import (
	"context"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// The kept point read without a runner (issue 22; docs/performance.md,
// item 19). Once a cached plan's point read has run through Start, its
// PointCache holds everything the read depends on besides the key's
// values: the index's key prefix, the fetcher's column sets, the output
// positions and the projections compiled over the row. ReadPoint reads
// such a row for new key values with those alone: no Context, runner,
// operator, Rows or cursor. It serves the session's Execute of a kept
// plan in an implicit transaction (sql/session, fastread.go), which
// otherwise built all of them for one row.
//
// What it reads and returns is what Start's point operator would: the
// same span (pointSpan), the same batch of one Scan sent through the
// same ImplicitReader, the same fetcher and the same compiled
// projections. Whatever the operator would have done differently is
// refused (ok false), and the caller runs the statement through Start:
// no shape kept yet, projections that compile only per statement, a row
// longer than one page, a value of a megabyte or more (which the runner
// accounts as memory). The reader's ErrImplicitRetry is returned as the
// read's error, for the caller to count as Start's caller does.

// PointRead is ReadPoint's scratch: the fetcher's copy, the batch, the
// span's key and the rows it projects. One per session, reused by each
// of its statements in turn; the row ReadPoint returns lives in it until
// the next ReadPoint, which may overwrite it.
type PointRead struct {
	// shape is the shape fetcher was copied from (nil: none yet).
	shape   *pointShape
	fetcher rowenc.RowFetcher
	merger  rowenc.RowMerger
	batch   kv.Batch
	ev      sem.EvalContext
	row     []types.Datum
	emit    func([]types.Datum) error
	key     [2 * pointKeyBuf]byte // room for pointSpan's two ends of a longer prefix
	projRow [pointRowBuf]types.Datum
	outRow  [pointRowBuf]types.Datum
}

// Ready reports whether pc holds the shape ReadPoint reads with: the
// plan's point read ran through Start once and its projections compiled
// over the row alone.
func (pc *PointCache) Ready() bool {
	return pc != nil && pc.root != nil && pc.root.evs != nil
}

// ReadPoint reads the row of pc's point read whose key columns are key
// (in the primary index's order, no NULL) through rd, and returns it
// projected to the plan's columns (nil: no row), evaluating parameters
// from params. ok false: the read was refused (see above) and nothing of
// it is returned; the caller starts the plan instead. err is the read's
// own error.
func (pc *PointCache) ReadPoint(ctx context.Context, rd ImplicitReader, key, params []types.Datum, pr *PointRead) (row []types.Datum, ok bool, err error) {
	if !pc.Ready() {
		return nil, false, nil
	}
	sh := pc.root
	span, ok, err := pointSpan(pr.key[:0], sh, plan.Span{Start: key, End: key, EndInclusive: true})
	if !ok || err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	pr.batch = kv.Batch{}
	b := &pr.batch
	b.Scan(span.Key, span.EndKey, firstPage)
	if err := rd.ReadImplicit(ctx, b); err != nil {
		return nil, true, err // ErrImplicitRetry included: the caller counts it
	}
	res := &b.Results[0]
	if res.ResumeSpan != nil {
		return nil, false, nil // a second page: Start's path refuses it too
	}
	if pr.shape != sh {
		// The fetcher is the shape's copy, kept for the next read of the
		// same shape: its row buffers (ReuseRows) and its merger's are
		// then reused, as Finish leaves nothing pending.
		sh.fetch.CopyTo(&pr.fetcher, &pr.merger)
		pr.fetcher.ReuseRows = true
		pr.shape = sh
	}
	if pr.emit == nil {
		pr.emit = func(r []types.Datum) error { pr.row = r; return nil }
	}
	pr.row = nil
	err = pr.fetcher.Add(res.Rows, pr.emit)
	if err == nil {
		err = pr.fetcher.Finish(pr.emit)
	}
	if err != nil {
		pr.shape = nil // a row may be left pending: copy afresh
		return nil, true, err
	}
	if pr.row == nil {
		return nil, true, nil
	}
	row = projectInto(pr.projRow[:0], pr.row, sh.outPos)
	pr.row = nil
	pr.ev = sem.EvalContext{Params: params}
	for lvl, evs := range sh.evs {
		var out []types.Datum
		if lvl == len(sh.evs)-1 && len(evs) <= len(pr.outRow) {
			out = pr.outRow[:len(evs):len(evs)]
		} else {
			out = make([]types.Datum, len(evs))
		}
		for i, ev := range evs {
			if out[i], err = ev(&pr.ev, row); err != nil {
				return nil, true, err
			}
		}
		row = out
	}
	for _, d := range row {
		if largeSize(d) >= largeValue {
			return nil, false, nil // the runner accounts it (accountLarge)
		}
	}
	return row, true, nil
}
