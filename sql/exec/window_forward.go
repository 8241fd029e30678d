package exec

import (
	"context"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/types"
)

// Forward-only window functions over a partition past work_mem.
//
// Some functions' value at a row reads only that row and the rows before
// it in the partition: row_number, rank and dense_rank (a count of rows
// and of peer groups so far), an aggregate over ROWS BETWEEN UNBOUNDED
// PRECEDING AND CURRENT ROW (a running aggregate), first_value over a
// frame starting at the partition's first row, last_value over a ROWS
// frame ending at the current row. A stage holding nothing but such
// functions is computed as its sorted rows come, like a stage of ring
// functions (windowStage.streamSorted): the partition is never written to
// a Buffer and read back, which is what a spilled partition otherwise
// costs (a write, a read and a decode of each of its rows). PostgreSQL's
// WindowAgg does the same: it spools its partition to a tuplestore only
// for functions that read ahead.

// forwardFn is one forward-only function of a stage: its function index
// and how it is computed.
type forwardFn struct {
	fi   int
	kind windowStream // streamRank (row_number, rank, dense_rank), streamAggRows, streamFirst, streamLastRow
	name string
	agg  builtins.Aggregate // streamAggRows
}

// forwardFnOf says whether function fi is forward-only, and how.
func (o *windowOp) forwardFnOf(fi int) (forwardFn, bool) {
	s := o.specs[fi]
	kind := windowStreamOf(s)
	switch kind {
	case streamRank:
		switch s.f.Name {
		case "row_number", "rank", "dense_rank":
			return forwardFn{fi: fi, kind: kind, name: s.f.Name}, true
		}
	case streamAggRows, streamFirst, streamLastRow:
		return forwardFn{fi: fi, kind: kind, name: s.f.Name}, true
	}
	return forwardFn{}, false
}

// forwardOnly returns the forward-only functions of fis when every one
// is one.
func (o *windowOp) forwardOnly(fis []int) ([]forwardFn, bool) {
	fns := make([]forwardFn, 0, len(fis))
	for _, fi := range fis {
		f, ok := o.forwardFnOf(fi)
		if !ok {
			return nil, false
		}
		fns = append(fns, f)
	}
	return fns, true
}

// fwdIter computes forward-only functions over one partition's rows as
// src gives them, in window order, holding no row: only the counts, the
// running aggregates, first_value's value and the last row's ORDER BY
// values (to tell a new peer group).
type fwdIter struct {
	o     *windowOp
	fns   []forwardFn
	src   func(context.Context) ([]types.Datum, error)
	trim  bool
	opos  []int         // where the stage's ORDER BY values are in a row
	prev  []types.Datum // the last row's ORDER BY values
	first []types.Datum // first_value's value, per function
	i     int64         // rows returned
	rank  int64         // the current peer group's rank
	dense int64         // and dense rank
}

func (o *windowOp) newFwdIter(fns []forwardFn, src func(context.Context) ([]types.Datum, error), trim bool) *fwdIter {
	s := o.specs[fns[0].fi] // a stage's functions share their keys
	it := &fwdIter{o: o, fns: fns, src: src, trim: trim, first: make([]types.Datum, len(fns))}
	it.opos = s.keyPositions(o.base())[len(s.part):]
	for k := range it.fns {
		f := &it.fns[k]
		if f.kind == streamAggRows {
			fs := o.specs[f.fi]
			f.agg = fs.f.Fn.Overload.NewAggregate(fs.f.Fn.ArgTypes)
			if fs.filter != nil {
				f.agg = filteredAgg{f.agg}
			}
		}
	}
	return it
}

// Next returns the partition's next row with its results, nil at its
// end.
func (it *fwdIter) Next(ctx context.Context) ([]types.Datum, error) {
	if it.i%checkEvery == checkEvery-1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	row, err := it.src(ctx)
	if err != nil || row == nil {
		return nil, err
	}
	o := it.o
	// A new peer group starts at the first row and wherever the ORDER BY
	// values change (with no ORDER BY, the partition is one group).
	newGroup := it.i == 0
	for k, at := range it.opos {
		if newGroup || types.Compare(it.prev[k], row[at]) != 0 {
			newGroup = true
			break
		}
	}
	if newGroup {
		it.rank, it.dense = it.i+1, it.dense+1
		if len(it.opos) > 0 {
			it.prev = it.prev[:0]
			for _, at := range it.opos {
				it.prev = append(it.prev, row[at])
			}
		}
	}
	fn := o.r.fn()
	for k := range it.fns {
		f := &it.fns[k]
		s := o.specs[f.fi]
		var res types.Datum
		switch f.kind {
		case streamRank:
			res = rankResult(f.name, it.i, it.rank, it.dense, 0, 0, 0)
		case streamAggRows:
			args, err := windowArgs(s, row)
			if err != nil {
				return nil, err
			}
			if err := f.agg.Add(fn, args); err != nil {
				return nil, err
			}
			if res, err = f.agg.Result(); err != nil {
				return nil, err
			}
		case streamFirst, streamLastRow:
			if f.kind == streamLastRow || it.i == 0 {
				args, err := windowArgs(s, row)
				if err != nil {
					return nil, err
				}
				it.first[k] = args[0]
			}
			res = it.first[k]
		}
		row[o.width+f.fi] = res
	}
	it.i++
	if it.trim {
		base := o.base()
		row = row[:base:base]
	}
	return row, nil
}

// Close has nothing to give back: the iterator holds no row.
func (it *fwdIter) Close() {}
