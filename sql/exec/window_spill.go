package exec

import (
	"context"

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
// partition's size. lag and lead by constant offsets need neither: a
// shiftIter computes them from a ring of rows read front to back, from
// the Buffer, or, when a stage holds nothing else, from the stage's
// sorted rows without a Buffer at all (windowStage.streamShifts).

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
	// lag and lead by constant offsets are computed together in the last
	// pass, over a window of rows read once (computeSpilledShift); each
	// other function takes a pass of its own.
	var passes [][]int
	var shifts []shiftSpec
	for _, fi := range fis {
		if sh, ok := o.shiftSpecOf(fi); ok {
			shifts = append(shifts, sh)
			continue
		}
		passes = append(passes, []int{fi})
	}
	if back, ahead := shiftReach(shifts); back+ahead+1 > maxShiftWindow {
		for _, sh := range shifts {
			passes = append(passes, []int{sh.fi})
		}
		shifts = nil
	} else if len(shifts) > 0 {
		passes = append(passes, nil)
	}
	cur := buf
	for i, pass := range passes {
		out, trim := emit, true
		var next *rowcontainer.Buffer
		if i < len(passes)-1 {
			next = rowcontainer.NewBuffer(o.r.account(), o.r.scope)
			out, trim = next.Add, false
		}
		var err error
		switch {
		case pass == nil:
			err = o.computeSpilledShift(ctx, shifts, cur, out, trim)
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
	base := o.width + len(o.specs) + 1
	okeys := base + len(s.part)
	nk := len(s.order)
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
		for k := 0; k < nk; k++ {
			if types.Compare(a[okeys+k], b[okeys+k]) != 0 {
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
	base := o.width + len(o.specs) + 1
	okeys := base + len(s.part)
	nk := len(s.order)
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
		return append(out, row[okeys:okeys+nk]...), nil
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

// maxShiftWindow bounds the rows a shiftIter holds: as many as
// the RowReader of computeSpilledRandom caches, which a lag or lead
// reaching further uses instead.
const maxShiftWindow = spilledBlocks * rowcontainer.BlockRows

// shiftSpec is a lag or lead whose offset is a constant: its value at
// row i is its argument at row i+delta, or its default (evaluated at row
// i; NULL without one) when that row is outside the partition.
type shiftSpec struct {
	fi    int
	arg   rowFn
	def   rowFn
	delta int64
}

// shiftSpecOf recognizes function fi as a lag or lead by a constant,
// non-NULL offset.
func (o *windowOp) shiftSpecOf(fi int) (shiftSpec, bool) {
	s := o.specs[fi]
	dir := int64(1)
	switch s.f.Name {
	case "lag":
		dir = -1
	case "lead":
	default:
		return shiftSpec{}, false
	}
	if s.f.Fn.Overload.NewWindow == nil || s.filter != nil || len(s.args) == 0 {
		return shiftSpec{}, false
	}
	sh := shiftSpec{fi: fi, arg: s.args[0], delta: dir}
	if len(s.f.Args) > 1 {
		c, ok := s.f.Args[1].(*sem.Const)
		if !ok {
			return shiftSpec{}, false
		}
		off, ok := c.Datum.(types.DInt)
		if !ok {
			return shiftSpec{}, false
		}
		sh.delta = dir * int64(off)
	}
	if len(s.args) > 2 {
		sh.def = s.args[2]
	}
	return sh, true
}

// shiftReach is how far behind and ahead of the current row shifts read.
func shiftReach(shifts []shiftSpec) (back, ahead int64) {
	for _, sh := range shifts {
		back, ahead = max(back, -sh.delta), max(ahead, sh.delta)
	}
	return back, ahead
}

// computeSpilledShift computes lag and lead by constant offsets over the
// partition in buf in one pass (a shiftIter reading it front to back)
// and passes each row on with its results.
func (o *windowOp) computeSpilledShift(ctx context.Context, shifts []shiftSpec, buf *rowcontainer.Buffer, emit func([]types.Datum) error, trim bool) error {
	it, err := buf.Iter()
	if err != nil {
		return err
	}
	defer it.Close()
	si := o.newShiftIter(shifts, func(ctx context.Context) ([]types.Datum, error) { return it.Next(ctx) }, trim)
	defer si.Close()
	var emitted int64
	for {
		row, err := si.Next(ctx)
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

// shiftChunk is how much a shiftIter's account grows at a time.
const shiftChunk = 16 << 10

// shiftIter computes lag and lead by constant offsets over one
// partition's rows, as src returns them in window order (nil at the
// partition's end), in one pass, as PostgreSQL's WindowAgg reads its
// tuplestore: the rows from back rows behind the current one to ahead
// rows past it are held in a ring (each with its functions' arguments,
// evaluated once as it is read), and each row is returned with its
// results once the row ahead of it is read (or the partition ended).
// Nothing is read by position, the functions share the pass, and the
// partition's size need not be known: src can be a spilled Buffer or,
// when a stage holds only such functions, the stage's sorted rows
// themselves, so the partition is never written out (windowStage.step).
type shiftIter struct {
	o      *windowOp
	shifts []shiftSpec
	src    func(context.Context) ([]types.Datum, error)
	trim   bool
	ahead  int64
	w      int64 // ring size: back + ahead + 1
	rows   [][]types.Datum
	vals   [][]types.Datum
	sizes  []int64
	held   int64 // the sizes' sum
	acc    *mon.Account
	read   int64 // rows read from src
	n      int64 // the partition's rows once src ended; -1 before
	i      int64 // the next row to return
}

func (o *windowOp) newShiftIter(shifts []shiftSpec, src func(context.Context) ([]types.Datum, error), trim bool) *shiftIter {
	back, ahead := shiftReach(shifts)
	w := back + ahead + 1
	return &shiftIter{
		o: o, shifts: shifts, src: src, trim: trim, ahead: ahead, w: w,
		rows: make([][]types.Datum, w), vals: make([][]types.Datum, w), sizes: make([]int64, w),
		acc: o.r.account(), n: -1,
	}
}

// fill reads one row from src into the ring.
func (si *shiftIter) fill(ctx context.Context) error {
	row, err := si.src(ctx)
	if err != nil {
		return err
	}
	if row == nil {
		si.n = si.read
		return nil
	}
	v := make([]types.Datum, len(si.shifts))
	for k, sh := range si.shifts {
		if v[k], err = sh.arg(row); err != nil {
			return err
		}
	}
	slot := si.read % si.w
	// Held past work_mem if need be: at most maxShiftWindow rows. The
	// account grows by shiftChunk at a time and is not shrunk as rows
	// leave the ring (the node budget's lock once a chunk, not twice a
	// row); Close gives it all back.
	size := rowcontainer.RowSize(row) + rowcontainer.RowSize(v)
	si.held += size - si.sizes[slot]
	if more := si.held - si.acc.Used(); more > 0 {
		if err := si.acc.Force(max(more, shiftChunk)); err != nil {
			return err
		}
	}
	si.rows[slot], si.vals[slot], si.sizes[slot] = row, v, size
	si.read++
	return nil
}

// Next returns the next row with its results, or nil after the
// partition's last.
func (si *shiftIter) Next(ctx context.Context) ([]types.Datum, error) {
	i := si.i
	if i%checkEvery == checkEvery-1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	for si.n < 0 && si.read <= i+si.ahead {
		if err := si.fill(ctx); err != nil {
			return nil, err
		}
	}
	if si.n >= 0 && i >= si.n {
		return nil, nil
	}
	o := si.o
	slot := i % si.w
	row := si.rows[slot]
	si.rows[slot] = nil
	for k, sh := range si.shifts {
		var d types.Datum = types.DNull
		if j := i + sh.delta; j >= 0 && (si.n < 0 || j < si.n) {
			d = si.vals[j%si.w][k]
		} else if sh.def != nil {
			var err error
			if d, err = sh.def(row); err != nil {
				return nil, err
			}
		}
		row[o.width+sh.fi] = d
	}
	si.i++
	if si.trim {
		base := o.width + len(o.specs) + 1
		row = row[:base:base]
	}
	return row, nil
}

// Close releases the ring's reservation.
func (si *shiftIter) Close() {
	si.acc.Clear()
	clear(si.rows)
	clear(si.vals)
}
