package exec

import (
	"context"
	"slices"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// Window partitions larger than work_mem.
//
// builtins.WindowFunc computes a partition in memory or behind
// builtins.PartitionRows. A partition past work_mem goes to a
// rowcontainer.Buffer (on disk past work_mem) and is computed from there
// in one of two ways:
//
//   - Streaming (computeSpilled), when the function's results can be
//     computed reading the partition front to back: the ranking functions
//     and aggregates or first/last_value over frames that start at the
//     partition's first row (the default frame, ROWS UNBOUNDED PRECEDING,
//     the whole partition). Two readers of the buffer: one ahead, finding
//     where the current row's peer group (or the partition) ends and
//     feeding the aggregate, one behind, emitting the rows with their
//     results.
//   - By position (computeSpilledRandom), for every other function and
//     frame (lag, lead, nth_value, sliding ROWS/RANGE/GROUPS frames,
//     EXCLUDE): builtins' own WindowFunc reads the rows it needs through a
//     rowcontainer.RowReader, a cache of a few blocks of consecutive rows
//     (their arguments and ORDER BY values), while a reader behind emits
//     the rows with their results as they come.
//
// Either way, memory is a few buffers and blocks, whatever the
// partition's size. lag and lead by constant offsets and aggregates over
// ROWS frames with constant offsets (ringFn) need neither: a ringIter
// computes them from a ring of rows read front to back, from the Buffer,
// or, when a stage holds nothing else, from the stage's sorted rows
// without a Buffer at all (windowStage.streamSorted).

// windowStream is how a function's results are computed in one pass over
// a spilled partition.
type windowStream uint8

const (
	streamNone windowStream = iota
	// streamRank: row_number, rank, dense_rank, percent_rank, cume_dist
	// and ntile (the frame is ignored; the partition's size is known).
	streamRank
	// streamAggPeers: an aggregate whose frame runs from the partition's
	// first row to the current row's last peer (RANGE or GROUPS ...
	// CURRENT ROW, PostgreSQL's default with ORDER BY).
	streamAggPeers
	// streamAggRows: ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW.
	streamAggRows
	// streamAggAll: the whole partition (... UNBOUNDED FOLLOWING, or no
	// ORDER BY under a RANGE/GROUPS frame ending at the current row).
	streamAggAll
	// streamFirst: first_value over a frame starting at the first row.
	streamFirst
	// streamLastPeers, streamLastRow, streamLastAll: last_value over a
	// frame starting at or before the current row and ending at its last
	// peer, at itself, or at the partition's end.
	streamLastPeers
	streamLastRow
	streamLastAll
)

// windowStreamOf says how spec s can stream, or streamNone.
func windowStreamOf(s *windowSpec) windowStream {
	f := s.frame
	if f.Exclude != builtins.ExcludeNoOthers {
		return streamNone
	}
	startsFirst := f.Start.Kind == builtins.UnboundedPreceding
	startsAtOrBefore := startsFirst || f.Start.Kind == builtins.CurrentRow
	// Which rows the frame ends at, when the end is the current row.
	endPeers := f.End.Kind == builtins.CurrentRow && f.Mode != builtins.Rows
	endRow := f.End.Kind == builtins.CurrentRow && f.Mode == builtins.Rows
	endAll := f.End.Kind == builtins.UnboundedFollowing || (endPeers && len(s.order) == 0)
	o := s.f.Fn.Overload
	if o.NewWindow == nil {
		switch {
		case !startsFirst:
			return streamNone
		case endAll:
			return streamAggAll
		case endPeers:
			return streamAggPeers
		case endRow:
			return streamAggRows
		}
		return streamNone
	}
	switch s.f.Name {
	case "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile":
		return streamRank
	case "first_value":
		if startsFirst && (endPeers || endRow || endAll || f.End.Kind == builtins.OffsetFollowing) {
			return streamFirst
		}
	case "last_value":
		if !startsAtOrBefore {
			return streamNone
		}
		switch {
		case endAll:
			return streamLastAll
		case endPeers:
			return streamLastPeers
		case endRow:
			return streamLastRow
		}
	}
	return streamNone
}

// windowArgs evaluates s's arguments over row (with FILTER's value last,
// as filteredAgg wants it).
func windowArgs(s *windowSpec, row []types.Datum) ([]types.Datum, error) {
	args, err := evalAll(s.args, row)
	if err != nil {
		return nil, err
	}
	if s.filter != nil {
		d, err := s.filter(row)
		if err != nil {
			return nil, err
		}
		args = append(args, d)
	}
	return args, nil
}

// computeSpilledGroup computes functions fis over the partition in buf,
// one pass each: every function but the last passes its rows, keys kept,
// to a buffer the next one reads; the last emits them.
func (o *windowOp) computeSpilledGroup(ctx context.Context, fis []int, buf *rowcontainer.Buffer, emit func([]types.Datum) error) error {
	// lag and lead by constant offsets and aggregates over sliding ROWS
	// frames are computed together in the last pass, over a ring of rows
	// read once (computeSpilledRing); each other function takes a pass
	// of its own.
	var passes [][]int
	var ring []ringFn
	for _, fi := range fis {
		if f, ok := o.ringFnOf(fi); ok {
			ring = append(ring, f)
			continue
		}
		passes = append(passes, []int{fi})
	}
	if !ringFits(ring) {
		for _, f := range ring {
			passes = append(passes, []int{f.fi})
		}
		ring = nil
	} else if len(ring) > 0 {
		passes = append(passes, nil)
	}
	cur := buf
	for i, pass := range passes {
		out, trim := emit, true
		var next *rowcontainer.Buffer
		if i < len(passes)-1 {
			next = rowcontainer.NewBuffer(o.r.account(), o.r.tempScope())
			out, trim = next.Add, false
		}
		var err error
		switch {
		case pass == nil:
			err = o.computeSpilledRing(ctx, ring, cur, out, trim)
		case windowStreamOf(o.specs[pass[0]]) != streamNone:
			err = o.computeSpilled(ctx, pass[0], cur, out, trim)
		default:
			err = o.computeSpilledRandom(ctx, pass[0], cur, out, trim)
		}
		if cur != buf {
			cur.Close()
		}
		if err != nil {
			if next != nil {
				next.Close()
			}
			return err
		}
		cur = next
	}
	return nil
}

// computeSpilled computes function fi over the partition in buf (rows
// in window order, sort keys from position base) and passes each row on
// (cut to its results when trim, else with its keys), as compute does for
// a partition in memory.
func (o *windowOp) computeSpilled(ctx context.Context, fi int, buf *rowcontainer.Buffer, emit func([]types.Datum) error, trim bool) error {
	s := o.specs[fi]
	kind := windowStreamOf(s)
	base := o.base()
	opos := s.keyPositions(base)[len(s.part):]
	n := buf.Len()
	ahead, err := buf.Iter()
	if err != nil {
		return err
	}
	defer ahead.Close()
	behind, err := buf.Iter()
	if err != nil {
		return err
	}
	defer behind.Close()
	peers := func(a, b []types.Datum) bool {
		for _, at := range opos {
			if types.Compare(a[at], b[at]) != 0 {
				return false
			}
		}
		return true
	}
	ov := s.f.Fn.Overload
	var acc builtins.Aggregate
	if ov.NewWindow == nil {
		acc = ov.NewAggregate(s.f.Fn.ArgTypes)
		if s.filter != nil {
			acc = filteredAgg{acc}
		}
	}
	fn := o.r.fn()
	wholeGroup := kind == streamAggAll || kind == streamLastAll
	var pending []types.Datum // the first row of the next group, read ahead
	var first types.Datum     // first_value's value
	var ntiles int64          // ntile's bucket count; 0: NULL
	var idx int64             // rows emitted
	rank, dense := int64(0), int64(0)
	for idx < n {
		// Read ahead to the end of the current group: its peers, or the
		// whole partition.
		var g int64
		var last []types.Datum
		for {
			row := pending
			pending = nil
			if row == nil {
				if row, err = ahead.Next(ctx); err != nil {
					return err
				}
				if row == nil {
					break
				}
			}
			if g > 0 && !wholeGroup && !peers(last, row) {
				pending = row
				break
			}
			if idx+g == 0 {
				args, err := windowArgs(s, row)
				if err != nil {
					return err
				}
				switch {
				case kind == streamFirst:
					first = args[0]
				case s.f.Name == "ntile":
					if ntiles, err = ntileCount(args); err != nil {
						return err
					}
				}
			}
			if kind == streamAggPeers || kind == streamAggAll {
				args, err := windowArgs(s, row)
				if err != nil {
					return err
				}
				if err := acc.Add(fn, args); err != nil {
					return err
				}
			}
			g++
			last = row
		}
		if g == 0 {
			return pgerror.New(pgerrcode.InternalError, "exec: spilled window partition has %d rows, read %d", n, idx)
		}
		var groupRes, lastArg types.Datum
		switch kind {
		case streamAggPeers, streamAggAll:
			if groupRes, err = acc.Result(); err != nil {
				return err
			}
		case streamLastPeers, streamLastAll:
			args, err := windowArgs(s, last)
			if err != nil {
				return err
			}
			lastArg = args[0]
		}
		rank, dense = idx+1, dense+1
		for end := idx + g; idx < end; idx++ {
			row, err := behind.Next(ctx)
			if err != nil {
				return err
			}
			if row == nil {
				return pgerror.New(pgerrcode.InternalError, "exec: spilled window partition ended early")
			}
			var res types.Datum
			switch kind {
			case streamAggPeers, streamAggAll:
				res = groupRes
			case streamAggRows:
				args, err := windowArgs(s, row)
				if err != nil {
					return err
				}
				if err := acc.Add(fn, args); err != nil {
					return err
				}
				if res, err = acc.Result(); err != nil {
					return err
				}
			case streamFirst:
				res = first
			case streamLastPeers, streamLastAll:
				res = lastArg
			case streamLastRow:
				args, err := windowArgs(s, row)
				if err != nil {
					return err
				}
				res = args[0]
			case streamRank:
				res = rankResult(s.f.Name, idx, rank, dense, end, n, ntiles)
			}
			if trim {
				row = row[:base:base]
			}
			row[o.width+fi] = res
			if err := emit(row); err != nil {
				return err
			}
		}
	}
	return nil
}

// ntileCount is ntile's bucket count, from the partition's first row (0
// for NULL), as builtins' ntile reads it.
func ntileCount(args []types.Datum) (int64, error) {
	if types.IsNull(args[0]) {
		return 0, nil
	}
	b := int64(args[0].(types.DInt))
	if b <= 0 {
		return 0, pgerror.New(pgerrcode.InvalidArgumentForNtileFunction, "argument of ntile must be greater than zero")
	}
	return b, nil
}

// rankResult is a ranking function's value for row idx (0-based) of a
// partition of n rows whose peer group ends before row end, with the
// group's rank and dense rank; the same values builtins' rankFunc and
// ntileFunc compute.
func rankResult(name string, idx, rank, dense, end, n, ntiles int64) types.Datum {
	switch name {
	case "row_number":
		return types.DInt(idx + 1)
	case "rank":
		return types.DInt(rank)
	case "dense_rank":
		return types.DInt(dense)
	case "percent_rank":
		if n == 1 {
			return types.DFloat(0)
		}
		return types.DFloat(float64(rank-1) / float64(n-1))
	case "cume_dist":
		return types.DFloat(float64(end) / float64(n))
	}
	// ntile: the first n % buckets buckets get one extra row.
	if ntiles == 0 {
		return types.DNull
	}
	per, extra := n/ntiles, n%ntiles
	if big := extra * (per + 1); idx < big {
		return types.DInt(idx/(per+1) + 1)
	} else {
		return types.DInt(extra + (idx-big)/per + 1)
	}
}

// spilledBlocks is how many blocks of rows a RowReader over a spilled
// partition caches: enough for the regions a function reads at once (the
// current row and its peer group's end, a frame's start and end, the
// groups a GROUPS frame counts, a lag/lead or nth_value row).
const spilledBlocks = 8

// spilledRows is a spilled partition as builtins.PartitionRows: each row
// transformed, when its block is read, to its arguments then its ORDER
// BY values.
type spilledRows struct {
	rr    *rowcontainer.RowReader
	n     int
	nargs int
	keyed bool
}

func (p *spilledRows) Len() int { return p.n }

func (p *spilledRows) Row(i int) (args, keys []types.Datum, err error) {
	r, err := p.rr.Row(int64(i))
	if err != nil {
		return nil, nil, err
	}
	if p.keyed {
		keys = r[p.nargs:]
	}
	return r[:p.nargs:p.nargs], keys, nil
}

// computeSpilledRandom computes function fi over the partition in buf
// (rows in window order, sort keys from position base) with builtins'
// WindowFunc reading rows by position, and passes each row on with its
// result.
func (o *windowOp) computeSpilledRandom(ctx context.Context, fi int, buf *rowcontainer.Buffer, emit func([]types.Datum) error, trim bool) error {
	s := o.specs[fi]
	base := o.base()
	opos := s.keyPositions(base)[len(s.part):]
	nk := len(opos)
	nargs := len(s.args)
	if s.filter != nil {
		nargs++
	}
	rr, err := buf.RowReader(o.acc, spilledBlocks, func(row []types.Datum) ([]types.Datum, error) {
		out := make([]types.Datum, 0, nargs+nk)
		for _, f := range s.args {
			d, err := f(row)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		if s.filter != nil {
			d, err := s.filter(row)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		for _, at := range opos {
			out = append(out, row[at])
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	defer rr.Close()
	p := &builtins.Partition{Rows: &spilledRows{rr: rr, n: int(buf.Len()), nargs: nargs, keyed: nk > 0}}
	if nk > 0 {
		p.Desc, p.NullsFirst = s.f.OrderBy[0].Desc, s.f.OrderBy[0].NullsFirst
	}
	// The rows are emitted from the blocks the function reads (RowReader.Raw):
	// the row being emitted was just read for its own arguments, or for a
	// neighbour's, so it is almost always cached.
	var next int64
	return newWindowFunc(s).Compute(o.r.fn(), p, s.frame, func(d types.Datum) error {
		if next%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if next >= buf.Len() {
			return pgerror.New(pgerrcode.InternalError, "exec: spilled window function emitted more rows than its partition has")
		}
		row, err := rr.Raw(next)
		if err != nil {
			return err
		}
		next++
		if trim {
			row = row[:base:base]
		}
		row[o.width+fi] = d
		return emit(row)
	})
}

// maxRingRows bounds the rows a ringIter holds: as many as the RowReader
// of computeSpilledRandom caches, which a function reaching further uses
// instead.
const maxRingRows = spilledBlocks * rowcontainer.BlockRows

// ringFn is a window function whose value at row i reads only rows a
// constant distance from i, so a ringIter can compute it reading the
// partition front to back once:
//
//   - a lag or lead whose offset is a constant (agg nil): its argument at
//     row i+delta, or its default (evaluated at row i; NULL without one)
//     when that row is outside the partition;
//   - an aggregate over a ROWS frame whose bounds are both constant
//     offsets (n PRECEDING, CURRENT ROW, n FOLLOWING) without EXCLUDE
//     (agg set): the aggregate of its arguments over rows i+lo to i+hi
//     that lie in the partition (none when lo > hi).
type ringFn struct {
	fi int
	// lag/lead
	arg   rowFn
	def   rowFn
	delta int64
	// a sliding ROWS frame
	agg    func() builtins.Aggregate
	args   []rowFn // FILTER's value last (filteredAgg)
	lo, hi int64
}

// nvals is how many values per row the function keeps in the ring.
func (f *ringFn) nvals() int {
	if f.agg == nil {
		return 1
	}
	return len(f.args)
}

// reach is how far behind and ahead of the current row f reads.
func (f *ringFn) reach() (back, ahead int64) {
	if f.agg == nil {
		return max(-f.delta, 0), max(f.delta, 0)
	}
	if f.lo > f.hi {
		return 0, 0
	}
	return max(-f.lo, 0), max(f.hi, 0)
}

// ringFnOf recognizes function fi as a ringFn: a lag or lead by a
// constant, non-NULL offset, or an aggregate over a ROWS frame with
// constant, non-negative offsets (a NULL or negative offset is left to
// builtins, which report it).
func (o *windowOp) ringFnOf(fi int) (ringFn, bool) {
	s := o.specs[fi]
	if s.f.Fn.Overload.NewWindow == nil {
		return o.frameRingFn(fi)
	}
	dir := int64(1)
	switch s.f.Name {
	case "lag":
		dir = -1
	case "lead":
	default:
		return ringFn{}, false
	}
	if s.filter != nil || len(s.args) == 0 {
		return ringFn{}, false
	}
	f := ringFn{fi: fi, arg: s.args[0], delta: dir}
	if len(s.f.Args) > 1 {
		c, ok := s.f.Args[1].(*sem.Const)
		if !ok {
			return ringFn{}, false
		}
		off, ok := c.Datum.(types.DInt)
		if !ok {
			return ringFn{}, false
		}
		f.delta = dir * int64(off)
	}
	if len(s.args) > 2 {
		f.def = s.args[2]
	}
	return f, true
}

// frameRingFn is ringFnOf for an aggregate.
func (o *windowOp) frameRingFn(fi int) (ringFn, bool) {
	s := o.specs[fi]
	fr := s.frame
	if fr.Mode != builtins.Rows || fr.Exclude != builtins.ExcludeNoOthers {
		return ringFn{}, false
	}
	offset := func(b builtins.Bound) (int64, bool) {
		switch b.Kind {
		case builtins.CurrentRow:
			return 0, true
		case builtins.OffsetPreceding, builtins.OffsetFollowing:
			v, ok := b.Offset.(types.DInt)
			if !ok || v < 0 {
				return 0, false
			}
			if b.Kind == builtins.OffsetPreceding {
				return -int64(v), true
			}
			return int64(v), true
		}
		return 0, false
	}
	lo, ok1 := offset(fr.Start)
	hi, ok2 := offset(fr.End)
	if !ok1 || !ok2 {
		return ringFn{}, false
	}
	ov := s.f.Fn.Overload
	argTypes := s.f.Fn.ArgTypes
	f := ringFn{fi: fi, lo: lo, hi: hi, args: s.args,
		agg: func() builtins.Aggregate { return ov.NewAggregate(argTypes) }}
	if s.filter != nil {
		f.args = append(slices.Clip(s.args), s.filter)
		f.agg = func() builtins.Aggregate { return filteredAgg{ov.NewAggregate(argTypes)} }
	}
	return f, true
}

// ringReach is how far behind and ahead of the current row fns read.
func ringReach(fns []ringFn) (back, ahead int64) {
	for i := range fns {
		b, a := fns[i].reach()
		back, ahead = max(back, b), max(ahead, a)
	}
	return back, ahead
}

// ringFits reports whether fns together hold at most maxRingRows rows.
func ringFits(fns []ringFn) bool {
	back, ahead := ringReach(fns)
	return back+ahead+1 <= maxRingRows
}

// computeSpilledRing computes ring functions fns over the partition in
// buf in one pass (a ringIter reading it front to back) and passes each
// row on with its results.
func (o *windowOp) computeSpilledRing(ctx context.Context, fns []ringFn, buf *rowcontainer.Buffer, emit func([]types.Datum) error, trim bool) error {
	it, err := buf.Iter()
	if err != nil {
		return err
	}
	defer it.Close()
	ri := o.newRingIter(fns, func(ctx context.Context) ([]types.Datum, error) { return it.Next(ctx) }, trim)
	defer ri.Close()
	var emitted int64
	for {
		row, err := ri.Next(ctx)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		emitted++
		if err := emit(row); err != nil {
			return err
		}
	}
	if n := buf.Len(); emitted != n {
		return pgerror.New(pgerrcode.InternalError, "exec: spilled window partition of %d rows ended at %d", n, emitted)
	}
	return nil
}

// ringChunk is how much a ringIter's account grows at a time.
const ringChunk = 16 << 10

// ringIter computes ring functions over one partition's rows, as src
// returns them in window order (nil at the partition's end), in one
// pass, as PostgreSQL's WindowAgg reads its tuplestore: the rows from
// back rows behind the current one to ahead rows past it are held in a
// ring (each with its functions' arguments, evaluated once as it is
// read), and each row is returned with its results once the row ahead
// of it is read (or the partition ended). A sliding frame's aggregate is
// computed afresh over the frame's rows in the ring, as builtins'
// AggregateWindow computes it (PostgreSQL does the same for an aggregate
// without an inverse transition). Nothing is read by position, the
// functions share the pass, and the partition's size need not be known:
// src can be a spilled Buffer or, when a stage holds only such
// functions, the stage's sorted rows themselves, so the partition is
// never written out (windowStage.streamSorted).
type ringIter struct {
	o     *windowOp
	fns   []ringFn
	at    []int // where each function's values start in a row's vals
	nv    int   // values per row
	src   func(context.Context) ([]types.Datum, error)
	trim  bool
	ahead int64
	w     int64 // ring size: back + ahead + 1
	rows  [][]types.Datum
	vals  [][]types.Datum
	sizes []int64
	held  int64 // the sizes' sum
	acc   *mon.Account
	read  int64 // rows read from src
	n     int64 // the partition's rows once src ended; -1 before
	i     int64 // the next row to return
}

func (o *windowOp) newRingIter(fns []ringFn, src func(context.Context) ([]types.Datum, error), trim bool) *ringIter {
	back, ahead := ringReach(fns)
	w := back + ahead + 1
	ri := &ringIter{
		o: o, fns: fns, src: src, trim: trim, ahead: ahead, w: w,
		rows: make([][]types.Datum, w), vals: make([][]types.Datum, w), sizes: make([]int64, w),
		acc: o.r.account(), n: -1,
	}
	for i := range fns {
		ri.at = append(ri.at, ri.nv)
		ri.nv += fns[i].nvals()
	}
	return ri
}

// fill reads one row from src into the ring.
func (ri *ringIter) fill(ctx context.Context) error {
	row, err := ri.src(ctx)
	if err != nil {
		return err
	}
	if row == nil {
		ri.n = ri.read
		return nil
	}
	slot := ri.read % ri.w
	v := ri.vals[slot][:0]
	if cap(v) < ri.nv {
		v = make([]types.Datum, 0, ri.nv)
	}
	for k := range ri.fns {
		f := &ri.fns[k]
		if f.agg == nil {
			d, err := f.arg(row)
			if err != nil {
				return err
			}
			v = append(v, d)
			continue
		}
		for _, a := range f.args {
			d, err := a(row)
			if err != nil {
				return err
			}
			v = append(v, d)
		}
	}
	// Held past work_mem if need be: at most maxRingRows rows. The
	// account grows by ringChunk at a time and is not shrunk as rows
	// leave the ring (the node budget's lock once a chunk, not twice a
	// row); Close gives it all back.
	size := rowcontainer.RowSize(row) + rowcontainer.RowSize(v)
	ri.held += size - ri.sizes[slot]
	if more := ri.held - ri.acc.Used(); more > 0 {
		if err := ri.acc.Force(max(more, ringChunk)); err != nil {
			return err
		}
	}
	ri.rows[slot], ri.vals[slot], ri.sizes[slot] = row, v, size
	ri.read++
	return nil
}

// Next returns the next row with its results, or nil after the
// partition's last.
func (ri *ringIter) Next(ctx context.Context) ([]types.Datum, error) {
	i := ri.i
	if i%checkEvery == checkEvery-1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	for ri.n < 0 && ri.read <= i+ri.ahead {
		if err := ri.fill(ctx); err != nil {
			return nil, err
		}
	}
	if ri.n >= 0 && i >= ri.n {
		return nil, nil
	}
	o := ri.o
	slot := i % ri.w
	row := ri.rows[slot]
	ri.rows[slot] = nil
	// Rows past the partition's end are not read yet, or never will be.
	last := ri.read - 1
	for k := range ri.fns {
		f := &ri.fns[k]
		at := ri.at[k]
		var d types.Datum = types.DNull
		if f.agg == nil {
			if j := i + f.delta; j >= 0 && j <= last {
				d = ri.vals[j%ri.w][at]
			} else if f.def != nil {
				var err error
				if d, err = f.def(row); err != nil {
					return nil, err
				}
			}
			row[o.width+f.fi] = d
			continue
		}
		a := f.agg()
		fn := o.r.fn()
		for j, end := max(i+f.lo, 0), min(i+f.hi, last); j <= end; j++ {
			if err := a.Add(fn, ri.vals[j%ri.w][at:at+len(f.args)]); err != nil {
				return nil, err
			}
		}
		d, err := a.Result()
		if err != nil {
			return nil, err
		}
		row[o.width+f.fi] = d
	}
	ri.i++
	if ri.trim {
		base := o.base()
		row = row[:base:base]
	}
	return row, nil
}

// Close releases the ring's reservation.
func (ri *ringIter) Close() {
	ri.acc.Clear()
	clear(ri.rows)
	clear(ri.vals)
}
