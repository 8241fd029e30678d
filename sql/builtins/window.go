package builtins

import (
	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Window functions run over one partition at a time. The executor sorts
// the partition by its ORDER BY and hands it over, in memory (Args, Keys)
// or behind PartitionRows (a partition larger than work_mem, read from
// disk through a bounded cache); a WindowFunc passes one result per row,
// in row order, to its emit function (invariant 6: results depend only on
// the partition, its order and the frame, never on how rows were
// produced or where they are held).
//
// Frames are computed by a frameCursor, row after row: every frame bound
// only moves forward (rows are sorted, offsets are constants), so each
// bound walks the partition once. Nothing here holds more than a few
// rows of its own: a partition's size costs memory only in the Args and
// Keys the executor gives.

// Partition is a sorted window partition.
type Partition struct {
	// Args holds, per row, the window function's argument values.
	Args [][]types.Datum
	// Keys holds, per row, the ORDER BY values; rows with equal keys are
	// peers. Nil Keys (no ORDER BY) make all rows peers.
	Keys [][]types.Datum
	// Desc says the first ORDER BY column sorts descending, which RANGE
	// offset frames need to know which way "preceding" is.
	Desc bool
	// NullsFirst says NULLs of the first ORDER BY column sort first: a
	// RANGE offset frame of a non-NULL row never holds NULL rows, and
	// needs to know on which side they lie.
	NullsFirst bool
	// Rows, when not nil, holds the partition in place of Args and Keys.
	Rows PartitionRows
}

// PartitionRows gives a partition's rows by position, for a partition
// not held in memory. Functions read rows close to the current one (its
// frame, its lag/lead offset), mostly in increasing order.
type PartitionRows interface {
	Len() int
	// Row returns row i's argument values and ORDER BY values (nil keys
	// without ORDER BY). The caller must not change them.
	Row(i int) (args, keys []types.Datum, err error)
}

// Len returns the number of rows.
func (p *Partition) Len() int {
	if p.Rows != nil {
		return p.Rows.Len()
	}
	return len(p.Args)
}

func (p *Partition) arg(i int) ([]types.Datum, error) {
	if p.Rows != nil {
		a, _, err := p.Rows.Row(i)
		return a, err
	}
	return p.Args[i], nil
}

// key returns row i's ORDER BY values, nil without ORDER BY.
func (p *Partition) key(i int) ([]types.Datum, error) {
	if p.Rows != nil {
		_, k, err := p.Rows.Row(i)
		return k, err
	}
	if p.Keys == nil {
		return nil, nil
	}
	return p.Keys[i], nil
}

func (p *Partition) peers(i, j int) (bool, error) {
	ki, err := p.key(i)
	if err != nil || ki == nil {
		return true, err
	}
	kj, err := p.key(j)
	if err != nil {
		return false, err
	}
	for k := range ki {
		if types.Compare(ki[k], kj[k]) != 0 {
			return false, nil
		}
	}
	return true, nil
}

// FrameMode is ROWS, RANGE or GROUPS.
type FrameMode uint8

// The frame modes.
const (
	Range FrameMode = iota
	Rows
	// Groups counts offsets in peer groups (rows with equal ORDER BY
	// keys).
	Groups
)

// FrameExclude is a frame's EXCLUDE clause.
type FrameExclude uint8

// The exclusion kinds; the zero value is EXCLUDE NO OTHERS.
const (
	ExcludeNoOthers FrameExclude = iota
	ExcludeCurrentRow
	ExcludeGroup
	ExcludeTies
)

// BoundKind is one end of a frame.
type BoundKind uint8

// The bound kinds.
const (
	UnboundedPreceding BoundKind = iota
	OffsetPreceding
	CurrentRow
	OffsetFollowing
	UnboundedFollowing
)

// Bound is a frame start or end. Offset is the n of `n PRECEDING` /
// `n FOLLOWING`: a non-negative integer for ROWS, a value to subtract from
// or add to the (single) ORDER BY key for RANGE.
type Bound struct {
	Kind   BoundKind
	Offset types.Datum
}

// Frame is a window frame clause.
type Frame struct {
	Mode       FrameMode
	Start, End Bound
	// Exclude removes the current row, its peer group or its peers from
	// the frame.
	Exclude FrameExclude
}

// DefaultFrame is the frame without a frame clause: RANGE BETWEEN UNBOUNDED
// PRECEDING AND CURRENT ROW (with no ORDER BY, the whole partition).
var DefaultFrame = Frame{Mode: Range, Start: Bound{Kind: UnboundedPreceding}, End: Bound{Kind: CurrentRow}}

// WindowFunc computes a window function over a partition: it calls emit
// once per row, in row order, with that row's result.
type WindowFunc interface {
	Compute(ctx EvalContext, p *Partition, frame Frame, emit func(types.Datum) error) error
}

// span is a half-open row range [start, end).
type span struct{ start, end int }

func (s span) len() int { return max(s.end-s.start, 0) }

// peerGroup is the idx-th peer group (from 0) of a partition: rows
// [start, end).
type peerGroup struct{ idx, start, end int }

// nextGroup moves g to the following peer group (past the last one: an
// empty group at the partition's end).
func nextGroup(p *Partition, g *peerGroup) error {
	n := p.Len()
	g.idx++
	g.start = g.end
	if g.start >= n {
		return nil
	}
	g.end = g.start + 1
	for g.end < n {
		same, err := p.peers(g.start, g.end)
		if err != nil {
			return err
		}
		if !same {
			break
		}
		g.end++
	}
	return nil
}

// frameCursor computes the frames of a partition's rows in order.
type frameCursor struct {
	ctx        EvalContext
	p          *Partition
	f          Frame
	i          int       // the current row; -1 before the first
	cur        peerGroup // the current row's peer group
	start, end boundCursor
}

// boundCursor is where one frame bound stands.
type boundCursor struct {
	b       Bound
	isStart bool
	off     int64     // ROWS and GROUPS offsets
	g       peerGroup // GROUPS offsets: the peer group the bound is in
	pos     int       // RANGE offsets: the first row not before the bound
}

func newFrameCursor(ctx EvalContext, p *Partition, f Frame) (*frameCursor, error) {
	c := &frameCursor{ctx: ctx, p: p, f: f, i: -1, cur: peerGroup{idx: -1}}
	c.start = boundCursor{b: f.Start, isStart: true, g: peerGroup{idx: -1}}
	c.end = boundCursor{b: f.End, g: peerGroup{idx: -1}}
	for _, b := range []*boundCursor{&c.start, &c.end} {
		if p.Len() == 0 || b.b.Kind != OffsetPreceding && b.b.Kind != OffsetFollowing {
			continue
		}
		if f.Mode != Range {
			off, err := rowsOffset(b.b.Offset, b.isStart)
			if err != nil {
				return nil, err
			}
			b.off = off
			continue
		}
		k, err := p.key(0)
		if err != nil {
			return nil, err
		}
		if len(k) != 1 {
			return nil, errUnsupported("RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column")
		}
	}
	return c, nil
}

// next moves to the next row and returns its frame as up to three spans
// of rows, in order, that survive the EXCLUDE clause.
func (c *frameCursor) next() ([3]span, error) {
	var out [3]span
	c.i++
	if c.i >= c.cur.end {
		if err := nextGroup(c.p, &c.cur); err != nil {
			return out, err
		}
	}
	s, err := c.bound(&c.start)
	if err != nil {
		return out, err
	}
	e, err := c.bound(&c.end)
	if err != nil {
		return out, err
	}
	e = max(e, s)
	i := c.i
	switch c.f.Exclude {
	case ExcludeNoOthers:
		out[0] = span{s, e}
	case ExcludeCurrentRow:
		out[0], out[1] = span{s, min(e, i)}, span{max(s, i+1), e}
	case ExcludeGroup:
		out[0], out[1] = span{s, min(e, c.cur.start)}, span{max(s, c.cur.end), e}
	case ExcludeTies:
		out[0], out[1], out[2] = span{s, min(e, c.cur.start)}, span{max(s, i), min(e, i+1)}, span{max(s, c.cur.end), e}
	}
	return out, nil
}

// bound returns the current row's bound b: the frame's first row (a
// start) or the row after its last (an end), clamped to the partition.
func (c *frameCursor) bound(b *boundCursor) (int, error) {
	n, i := c.p.Len(), c.i
	switch b.b.Kind {
	case UnboundedPreceding:
		return 0, nil
	case UnboundedFollowing:
		return n, nil
	case CurrentRow:
		switch {
		case c.f.Mode != Rows && b.isStart:
			return c.cur.start, nil
		case c.f.Mode != Rows:
			return c.cur.end, nil
		case b.isStart:
			return i, nil
		}
		return i + 1, nil
	}
	switch c.f.Mode {
	case Rows:
		pos := int64(i)
		if b.b.Kind == OffsetPreceding {
			pos -= b.off
		} else {
			pos += b.off
		}
		if !b.isStart {
			pos++
		}
		return int(min(max(pos, 0), int64(n))), nil
	case Groups:
		// The bound's group is off groups before or after the current
		// row's; before the first, the frame starts at the first row and,
		// as an end, is empty.
		target := int64(c.cur.idx)
		if b.b.Kind == OffsetPreceding {
			target -= b.off
		} else {
			target += b.off
		}
		if target < 0 {
			return 0, nil
		}
		for int64(b.g.idx) < target {
			if b.g.idx >= 0 && b.g.end >= n {
				return n, nil
			}
			if err := nextGroup(c.p, &b.g); err != nil {
				return 0, err
			}
		}
		if b.isStart {
			return b.g.start, nil
		}
		return b.g.end, nil
	}
	return c.rangeBound(b)
}

// rangeBound finds a RANGE offset bound: for a start, the first row whose
// key is >= key(i) - offset (PRECEDING, ascending); for an end, the row
// after the last one <= key(i) + offset; directions mirror for DESC. A
// NULL current row's frame bound is its peer group's (NULLs are peers of
// each other only), and a non-NULL row's frame holds no NULL row.
func (c *frameCursor) rangeBound(b *boundCursor) (int, error) {
	p := c.p
	k, err := p.key(c.i)
	if err != nil {
		return 0, err
	}
	key := k[0]
	if types.IsNull(key) {
		if b.isStart {
			return c.cur.start, nil
		}
		return c.cur.end, nil
	}
	// "Preceding" moves against the sort direction.
	subtract := (b.b.Kind == OffsetPreceding) != p.Desc
	limit, err := offsetKey(c.ctx, key, b.b.Offset, subtract)
	if err != nil {
		return 0, err
	}
	// Advance while row pos lies before the bound in sort order.
	for n := p.Len(); b.pos < n; b.pos++ {
		kj, err := p.key(b.pos)
		if err != nil {
			return 0, err
		}
		if types.IsNull(kj[0]) {
			if !p.NullsFirst {
				break
			}
			continue
		}
		cmp := types.Compare(kj[0], limit)
		if p.Desc {
			cmp = -cmp
		}
		if cmp > 0 || (b.isStart && cmp == 0) {
			break
		}
	}
	return b.pos, nil
}

func rowsOffset(d types.Datum, isStart bool) (int64, error) {
	which := "ending"
	if isStart {
		which = "starting"
	}
	if types.IsNull(d) {
		return 0, errNullFrameOffset(which)
	}
	v, ok := d.(types.DInt)
	if !ok || v < 0 {
		return 0, errInvalidPrecedingFollowing("frame " + which + " offset must not be negative")
	}
	return int64(v), nil
}
func offsetKey(ctx EvalContext, key, off types.Datum, subtract bool) (types.Datum, error) {
	if types.IsNull(off) {
		return nil, errNullFrameOffset("starting or ending")
	}
	op := "+"
	if subtract {
		op = "-"
	}
	switch k := key.(type) {
	case types.DInt, types.DFloat, *types.DDecimal:
		var r apd.Decimal
		o := toDecimal(off)
		if o.Negative {
			return nil, errInvalidPrecedingFollowing("invalid preceding or following size in window function")
		}
		var err error
		if subtract {
			err = numSub(&r, toDecimal(k), o)
		} else {
			err = numAdd(&r, toDecimal(k), o)
		}
		return newDec(&r), err
	case types.DDate, types.DTimestamp, types.DTimestampTZ:
		iv, ok := off.(types.DInterval)
		if !ok {
			return nil, errUnsupported("RANGE offset for %s must be an interval", key.Family())
		}
		if subtract {
			iv = intervalNeg(iv)
		}
		if d, ok := k.(types.DDate); ok {
			return timestampAddInterval(types.DTimestamp(int64(d)*microsPerDay), iv)
		}
		if ts, ok := k.(types.DTimestamp); ok {
			return timestampAddInterval(ts, iv)
		}
		return timestampTZAddInterval(ctx, k.(types.DTimestampTZ), iv)
	}
	return nil, errUnsupported("RANGE with offset %s is not supported for type %s", op, key.Family())
}

func init() {
	win := func(name string, args []*types.T, ret ReturnFunc, mk func(args []*types.T) WindowFunc) {
		registerFn(name, Overload{Args: args, Return: ret, Class: WindowClass, NewWindow: mk})
	}
	win("row_number", nil, Fixed(types.Int8), func([]*types.T) WindowFunc { return rankFunc("row_number") })
	win("rank", nil, Fixed(types.Int8), func([]*types.T) WindowFunc { return rankFunc("rank") })
	win("dense_rank", nil, Fixed(types.Int8), func([]*types.T) WindowFunc { return rankFunc("dense_rank") })
	win("percent_rank", nil, Fixed(types.Float8), func([]*types.T) WindowFunc { return rankFunc("percent_rank") })
	win("cume_dist", nil, Fixed(types.Float8), func([]*types.T) WindowFunc { return rankFunc("cume_dist") })
	win("ntile", []*types.T{types.Int4}, Fixed(types.Int4), func([]*types.T) WindowFunc { return ntileFunc{} })
	for _, name := range []string{"lag", "lead"} {
		dir := 1
		if name == "lag" {
			dir = -1
		}
		win(name, []*types.T{AnyElement}, SameAsArg(0), func([]*types.T) WindowFunc { return shiftFunc{dir} })
		win(name, []*types.T{AnyElement, types.Int4}, SameAsArg(0), func([]*types.T) WindowFunc { return shiftFunc{dir} })
		// PostgreSQL 13+: lag/lead(anycompatible, integer, anycompatible),
		// so lead(numeric_col, 1, 0) is numeric.
		win(name, []*types.T{AnyCompatible, types.Int4, AnyCompatible}, SameAsArg(0), func([]*types.T) WindowFunc { return shiftFunc{dir} })
	}
	win("first_value", []*types.T{AnyElement}, SameAsArg(0), func([]*types.T) WindowFunc { return nthFunc{kind: "first"} })
	win("last_value", []*types.T{AnyElement}, SameAsArg(0), func([]*types.T) WindowFunc { return nthFunc{kind: "last"} })
	win("nth_value", []*types.T{AnyElement, types.Int4}, SameAsArg(0), func([]*types.T) WindowFunc { return nthFunc{kind: "nth"} })
}

// rankFunc implements the ranking functions, which ignore the frame.
type rankFunc string

func (k rankFunc) Compute(_ EvalContext, p *Partition, _ Frame, emit func(types.Datum) error) error {
	n := p.Len()
	g := peerGroup{idx: -1}
	for r := 0; r < n; r++ {
		if r >= g.end {
			if err := nextGroup(p, &g); err != nil {
				return err
			}
		}
		var d types.Datum
		switch k {
		case "row_number":
			d = types.DInt(r + 1)
		case "rank":
			d = types.DInt(g.start + 1)
		case "dense_rank":
			d = types.DInt(g.idx + 1)
		case "percent_rank":
			if n == 1 {
				d = types.DFloat(0)
			} else {
				d = types.DFloat(float64(g.start) / float64(n-1))
			}
		case "cume_dist":
			d = types.DFloat(float64(g.end) / float64(n))
		}
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}

type ntileFunc struct{}

func (ntileFunc) Compute(_ EvalContext, p *Partition, _ Frame, emit func(types.Datum) error) error {
	n := int64(p.Len())
	if n == 0 {
		return nil
	}
	// The bucket count is evaluated once per partition, from the first row.
	args, err := p.arg(0)
	if err != nil {
		return err
	}
	var buckets int64
	if !types.IsNull(args[0]) {
		if buckets = int64(args[0].(types.DInt)); buckets <= 0 {
			return errInvalidArgWindow("argument of ntile must be greater than zero")
		}
	}
	// The first n % buckets buckets get one extra row.
	var per, extra int64
	if buckets > 0 {
		per, extra = n/buckets, n%buckets
	}
	for r := int64(0); r < n; r++ {
		var d types.Datum = types.DNull
		if buckets > 0 {
			if big := extra * (per + 1); r < big {
				d = types.DInt(r/(per+1) + 1)
			} else {
				d = types.DInt(extra + (r-big)/per + 1)
			}
		}
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}

// shiftFunc is lag (dir -1) and lead (dir 1) with optional offset and
// default; they ignore the frame.
type shiftFunc struct{ dir int }

func (s shiftFunc) Compute(_ EvalContext, p *Partition, _ Frame, emit func(types.Datum) error) error {
	n := int64(p.Len())
	for i := int64(0); i < n; i++ {
		args, err := p.arg(int(i))
		if err != nil {
			return err
		}
		off := int64(1)
		var d types.Datum = types.DNull
		if len(args) > 1 {
			if types.IsNull(args[1]) {
				if err := emit(d); err != nil {
					return err
				}
				continue
			}
			off = int64(args[1].(types.DInt))
		}
		j := i + off*int64(s.dir)
		switch {
		case j >= 0 && j < n:
			at, err := p.arg(int(j))
			if err != nil {
				return err
			}
			d = at[0]
		case len(args) > 2:
			d = args[2]
		}
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}

type nthFunc struct{ kind string }

func (f nthFunc) Compute(ctx EvalContext, p *Partition, frame Frame, emit func(types.Datum) error) error {
	c, err := newFrameCursor(ctx, p, frame)
	if err != nil {
		return err
	}
	for i, n := 0, p.Len(); i < n; i++ {
		spans, err := c.next()
		if err != nil {
			return err
		}
		size := 0
		for _, s := range spans {
			size += s.len()
		}
		// k: the position in the frame's surviving rows.
		k := -1
		switch f.kind {
		case "first":
			k = 0
		case "last":
			k = size - 1
		default:
			args, err := p.arg(i)
			if err != nil {
				return err
			}
			if types.IsNull(args[1]) {
				break
			}
			nth := int64(args[1].(types.DInt))
			if nth <= 0 {
				return errInvalidArgWindow("argument of nth_value must be greater than zero")
			}
			k = int(min(nth-1, int64(size)))
		}
		var d types.Datum = types.DNull
		if k >= 0 && k < size {
			for _, s := range spans {
				if k < s.len() {
					at, err := p.arg(s.start + k)
					if err != nil {
						return err
					}
					d = at[0]
					break
				}
				k -= s.len()
			}
		}
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}

// AggregateWindow runs an aggregate as a window function (sum(x) OVER
// ...). Frames that only grow (start fixed, end non-decreasing — the
// default frame and ROWS UNBOUNDED PRECEDING) reuse one accumulator;
// other frames re-aggregate each row's frame, which is O(rows × frame),
// as PostgreSQL does for an aggregate without an inverse transition
// function or under EXCLUDE.
func AggregateWindow(newAgg func() Aggregate) WindowFunc { return aggWindow{newAgg} }

type aggWindow struct{ newAgg func() Aggregate }

func (w aggWindow) Compute(ctx EvalContext, p *Partition, frame Frame, emit func(types.Datum) error) error {
	c, err := newFrameCursor(ctx, p, frame)
	if err != nil {
		return err
	}
	add := func(a Aggregate, s span) error {
		for j := s.start; j < s.end; j++ {
			args, err := p.arg(j)
			if err != nil {
				return err
			}
			if err := a.Add(ctx, args); err != nil {
				return err
			}
		}
		return nil
	}
	var acc Aggregate
	accStart, accEnd := 0, 0
	for i, n := 0, p.Len(); i < n; i++ {
		spans, err := c.next()
		if err != nil {
			return err
		}
		var d types.Datum
		if frame.Exclude != ExcludeNoOthers {
			// The frame has holes: aggregate its surviving rows afresh.
			a := w.newAgg()
			for _, s := range spans {
				if err := add(a, s); err != nil {
					return err
				}
			}
			if d, err = a.Result(); err != nil {
				return err
			}
		} else {
			s, e := spans[0].start, spans[0].end
			if acc == nil || s != accStart || e < accEnd {
				acc, accStart, accEnd = w.newAgg(), s, s
			}
			if err := add(acc, span{accEnd, e}); err != nil {
				return err
			}
			accEnd = max(accEnd, e)
			if d, err = acc.Result(); err != nil {
				return err
			}
		}
		if err := emit(d); err != nil {
			return err
		}
	}
	return nil
}
