package builtins

import (
	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Window functions run over one partition at a time. The executor sorts
// the partition by its ORDER BY and hands it over whole; a WindowFunc
// fills one result per row (invariant 6: results depend only on the
// partition, its order and the frame, never on how rows were produced).

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
}

// Len returns the number of rows.
func (p *Partition) Len() int { return len(p.Args) }

func (p *Partition) peers(i, j int) bool {
	if p.Keys == nil {
		return true
	}
	for k := range p.Keys[i] {
		if types.Compare(p.Keys[i][k], p.Keys[j][k]) != 0 {
			return false
		}
	}
	return true
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
	// the frame (FrameBounds still returns the whole range: use
	// FrameIncludes for each row of it).
	Exclude FrameExclude
}

// FrameIncludes reports whether row j of row i's frame range survives the
// frame's EXCLUDE clause.
func FrameIncludes(p *Partition, f Frame, i, j int) bool {
	switch f.Exclude {
	case ExcludeCurrentRow:
		return j != i
	case ExcludeGroup:
		return !p.peers(i, j)
	case ExcludeTies:
		return j == i || !p.peers(i, j)
	}
	return true
}

// DefaultFrame is the frame without a frame clause: RANGE BETWEEN UNBOUNDED
// PRECEDING AND CURRENT ROW (with no ORDER BY, the whole partition).
var DefaultFrame = Frame{Mode: Range, Start: Bound{Kind: UnboundedPreceding}, End: Bound{Kind: CurrentRow}}

// WindowFunc computes a window function over a partition: out[i] receives
// row i's result. len(out) == p.Len().
type WindowFunc interface {
	Compute(ctx EvalContext, p *Partition, frame Frame, out []types.Datum) error
}

// FrameBounds returns row i's frame as the half-open row range [start,
// end) of p (start >= end: an empty frame).
func FrameBounds(ctx EvalContext, p *Partition, f Frame, i int) (start, end int, err error) {
	start, err = boundRow(ctx, p, f, f.Start, i, true)
	if err != nil {
		return 0, 0, err
	}
	end, err = boundRow(ctx, p, f, f.End, i, false)
	return start, end, err
}

func boundRow(ctx EvalContext, p *Partition, f Frame, b Bound, i int, isStart bool) (int, error) {
	n := p.Len()
	switch b.Kind {
	case UnboundedPreceding:
		return 0, nil
	case UnboundedFollowing:
		return n, nil
	case CurrentRow:
		if f.Mode == Rows {
			if isStart {
				return i, nil
			}
			return i + 1, nil
		}
		j := i
		if isStart {
			for j > 0 && p.peers(j-1, i) {
				j--
			}
			return j, nil
		}
		for j+1 < n && p.peers(j+1, i) {
			j++
		}
		return j + 1, nil
	}
	if f.Mode == Groups {
		return groupsOffsetRow(p, b, i, isStart)
	}
	if f.Mode == Rows {
		off, err := rowsOffset(b.Offset, isStart)
		if err != nil {
			return 0, err
		}
		pos := int64(i)
		if b.Kind == OffsetPreceding {
			pos -= off
		} else {
			pos += off
		}
		if !isStart {
			pos++
		}
		return int(min(max(pos, 0), int64(n))), nil
	}
	return rangeOffsetRow(ctx, p, b, i, isStart)
}

// groupsOffsetRow finds a GROUPS frame bound: the first row of the peer
// group n groups before or after row i's (start), or the row after the
// last one of that group (end), clamped to the partition.
func groupsOffsetRow(p *Partition, b Bound, i int, isStart bool) (int, error) {
	off, err := rowsOffset(b.Offset, isStart)
	if err != nil {
		return 0, err
	}
	n := p.Len()
	groupStart := func(j int) int {
		for j > 0 && p.peers(j-1, j) {
			j--
		}
		return j
	}
	groupEnd := func(j int) int {
		for j+1 < n && p.peers(j+1, j) {
			j++
		}
		return j + 1
	}
	j := groupStart(i)
	if b.Kind == OffsetPreceding {
		for k := int64(0); k < off; k++ {
			if j == 0 {
				// Before the first group: the frame starts at the first
				// row and, as an end, is empty.
				return 0, nil
			}
			j = groupStart(j - 1)
		}
	} else {
		for k := int64(0); k < off; k++ {
			j = groupEnd(j)
			if j >= n {
				return n, nil
			}
		}
	}
	if isStart {
		return j, nil
	}
	return groupEnd(j), nil
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

// rangeOffsetRow finds the first row whose key is >= key(i) - offset
// (start, for PRECEDING in ascending order) or the row after the last one
// <= key(i) + offset (end), mirroring directions for DESC.
func rangeOffsetRow(ctx EvalContext, p *Partition, b Bound, i int, isStart bool) (int, error) {
	if p.Keys == nil || len(p.Keys[i]) != 1 {
		return 0, errUnsupported("RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column")
	}
	key := p.Keys[i][0]
	if types.IsNull(key) {
		// NULLs are peers of each other only.
		j := i
		if isStart {
			for j > 0 && types.IsNull(p.Keys[j-1][0]) {
				j--
			}
			return j, nil
		}
		for j+1 < p.Len() && types.IsNull(p.Keys[j+1][0]) {
			j++
		}
		return j + 1, nil
	}
	// "Preceding" moves against the sort direction.
	subtract := (b.Kind == OffsetPreceding) != p.Desc
	limit, err := offsetKey(ctx, key, b.Offset, subtract)
	if err != nil {
		return 0, err
	}
	// before(j): row j lies before the frame limit in sort order.
	before := func(j int) bool {
		k := p.Keys[j][0]
		if types.IsNull(k) {
			return false
		}
		c := types.Compare(k, limit)
		if p.Desc {
			c = -c
		}
		if isStart {
			return c < 0
		}
		return c <= 0
	}
	j := 0
	for j < p.Len() && before(j) {
		j++
	}
	return j, nil
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

func (k rankFunc) Compute(_ EvalContext, p *Partition, _ Frame, out []types.Datum) error {
	n := p.Len()
	rank, dense := 0, 0
	for i := 0; i < n; {
		j := i + 1
		for j < n && p.peers(i, j) {
			j++
		}
		rank, dense = i+1, dense+1
		for r := i; r < j; r++ {
			switch k {
			case "row_number":
				out[r] = types.DInt(r + 1)
			case "rank":
				out[r] = types.DInt(rank)
			case "dense_rank":
				out[r] = types.DInt(dense)
			case "percent_rank":
				if n == 1 {
					out[r] = types.DFloat(0)
				} else {
					out[r] = types.DFloat(float64(rank-1) / float64(n-1))
				}
			case "cume_dist":
				out[r] = types.DFloat(float64(j) / float64(n))
			}
		}
		i = j
	}
	return nil
}

type ntileFunc struct{}

func (ntileFunc) Compute(_ EvalContext, p *Partition, _ Frame, out []types.Datum) error {
	n := p.Len()
	if n == 0 {
		return nil
	}
	// The bucket count is evaluated once per partition, from the first row.
	arg := p.Args[0][0]
	if types.IsNull(arg) {
		for i := range out {
			out[i] = types.DNull
		}
		return nil
	}
	buckets := int64(arg.(types.DInt))
	if buckets <= 0 {
		return errInvalidArgWindow("argument of ntile must be greater than zero")
	}
	// The first n % buckets buckets get one extra row.
	per, extra := int64(n)/buckets, int64(n)%buckets
	row := int64(0)
	for b := int64(1); b <= buckets && row < int64(n); b++ {
		size := per
		if b <= extra {
			size++
		}
		for k := int64(0); k < size; k++ {
			out[row] = types.DInt(b)
			row++
		}
	}
	return nil
}

// shiftFunc is lag (dir -1) and lead (dir 1) with optional offset and
// default; they ignore the frame.
type shiftFunc struct{ dir int }

func (s shiftFunc) Compute(_ EvalContext, p *Partition, _ Frame, out []types.Datum) error {
	for i := range out {
		args := p.Args[i]
		off := int64(1)
		if len(args) > 1 {
			if types.IsNull(args[1]) {
				out[i] = types.DNull
				continue
			}
			off = int64(args[1].(types.DInt))
		}
		j := int64(i) + off*int64(s.dir)
		switch {
		case j >= 0 && j < int64(p.Len()):
			out[i] = p.Args[j][0]
		case len(args) > 2:
			out[i] = args[2]
		default:
			out[i] = types.DNull
		}
	}
	return nil
}

type nthFunc struct{ kind string }

func (f nthFunc) Compute(ctx EvalContext, p *Partition, frame Frame, out []types.Datum) error {
	for i := range out {
		s, e, err := FrameBounds(ctx, p, frame, i)
		if err != nil {
			return err
		}
		if frame.Exclude != ExcludeNoOthers {
			// The frame's rows that survive the exclusion, in order.
			var rows []int
			for j := s; j < e; j++ {
				if FrameIncludes(p, frame, i, j) {
					rows = append(rows, j)
				}
			}
			k := -1
			switch f.kind {
			case "first":
				k = 0
			case "last":
				k = len(rows) - 1
			default:
				if types.IsNull(p.Args[i][1]) {
					break
				}
				nth := int64(p.Args[i][1].(types.DInt))
				if nth <= 0 {
					return errInvalidArgWindow("argument of nth_value must be greater than zero")
				}
				k = int(min(nth-1, int64(len(rows))))
			}
			if k >= 0 && k < len(rows) {
				out[i] = p.Args[rows[k]][0]
			} else {
				out[i] = types.DNull
			}
			continue
		}
		var j int
		switch f.kind {
		case "first":
			j = s
		case "last":
			j = e - 1
		default:
			if types.IsNull(p.Args[i][1]) {
				out[i] = types.DNull
				continue
			}
			nth := int64(p.Args[i][1].(types.DInt))
			if nth <= 0 {
				return errInvalidArgWindow("argument of nth_value must be greater than zero")
			}
			j = s + int(min(nth-1, int64(p.Len())))
		}
		if j >= s && j < e {
			out[i] = p.Args[j][0]
		} else {
			out[i] = types.DNull
		}
	}
	return nil
}

// AggregateWindow runs an aggregate as a window function (sum(x) OVER
// ...). Frames that only grow (start fixed, end non-decreasing — the
// default frame and ROWS UNBOUNDED PRECEDING) reuse one accumulator;
// other frames re-aggregate each row's frame, which is O(rows × frame).
func AggregateWindow(newAgg func() Aggregate) WindowFunc { return aggWindow{newAgg} }

type aggWindow struct{ newAgg func() Aggregate }

func (w aggWindow) Compute(ctx EvalContext, p *Partition, frame Frame, out []types.Datum) error {
	var acc Aggregate
	accStart, accEnd := 0, 0
	for i := range out {
		s, e, err := FrameBounds(ctx, p, frame, i)
		if err != nil {
			return err
		}
		e = max(e, s)
		if frame.Exclude != ExcludeNoOthers {
			// The frame has holes: aggregate its surviving rows afresh.
			a := w.newAgg()
			for j := s; j < e; j++ {
				if !FrameIncludes(p, frame, i, j) {
					continue
				}
				if err := a.Add(ctx, p.Args[j]); err != nil {
					return err
				}
			}
			if out[i], err = a.Result(); err != nil {
				return err
			}
			continue
		}
		if acc == nil || s != accStart || e < accEnd {
			acc, accStart, accEnd = w.newAgg(), s, s
		}
		for ; accEnd < e; accEnd++ {
			if err := acc.Add(ctx, p.Args[accEnd]); err != nil {
				return err
			}
		}
		if out[i], err = acc.Result(); err != nil {
			return err
		}
	}
	return nil
}
