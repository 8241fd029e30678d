package builtins

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// collectAgg is an aggregate that lists the rows it was given (their
// first argument, a row number), so a test sees each frame's rows.
type collectAgg struct{ rows []string }

func (a *collectAgg) Add(_ EvalContext, args []types.Datum) error {
	a.rows = append(a.rows, args[0].String())
	return nil
}

func (a *collectAgg) Result() (types.Datum, error) {
	return types.DString(strings.Join(a.rows, ",")), nil
}

// memRows is a partition held behind PartitionRows, as a spilled one is.
type memRows struct{ p *Partition }

func (m memRows) Len() int { return len(m.p.Args) }
func (m memRows) Row(i int) ([]types.Datum, []types.Datum, error) {
	var k []types.Datum
	if m.p.Keys != nil {
		k = m.p.Keys[i]
	}
	return m.p.Args[i], k, nil
}

// TestFrameCursorModel checks the frame cursor (bounds that only move
// forward) against frames decided row by row from the definitions, over
// random sorted partitions with ties and NULL keys, both sort directions
// and NULL placements, every frame mode, bound kind and EXCLUDE, and
// with the partition in memory and behind PartitionRows.
func TestFrameCursorModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 15))
	kinds := []BoundKind{UnboundedPreceding, OffsetPreceding, CurrentRow, OffsetFollowing, UnboundedFollowing}
	for iter := range 3000 {
		n := 1 + rng.IntN(25)
		desc, nullsFirst := rng.IntN(2) == 0, rng.IntN(2) == 0
		keys := make([]types.Datum, n)
		for j := range keys {
			if rng.IntN(6) == 0 {
				keys[j] = types.DNull
			} else {
				keys[j] = types.DInt(rng.IntN(8))
			}
		}
		// Sort order: ascending or descending, NULLs first or last.
		cmp := func(a, b types.Datum) int {
			an, bn := types.IsNull(a), types.IsNull(b)
			switch {
			case an && bn:
				return 0
			case an != bn:
				if an == nullsFirst {
					return -1
				}
				return 1
			}
			c := types.Compare(a, b)
			if desc {
				c = -c
			}
			return c
		}
		slices.SortStableFunc(keys, cmp)
		p := &Partition{Desc: desc, NullsFirst: nullsFirst}
		for j, k := range keys {
			p.Args = append(p.Args, []types.Datum{types.DInt(j)})
			p.Keys = append(p.Keys, []types.Datum{k})
		}
		f := Frame{Mode: FrameMode(rng.IntN(3)), Exclude: FrameExclude(rng.IntN(4))}
		f.Start = Bound{Kind: kinds[rng.IntN(4)]}
		f.End = Bound{Kind: kinds[1+rng.IntN(4)]}
		for _, b := range []*Bound{&f.Start, &f.End} {
			b.Offset = types.DInt(rng.IntN(4))
		}
		// group[j]: row j's peer group number.
		group := make([]int, n)
		for j := 1; j < n; j++ {
			group[j] = group[j-1]
			if cmp(keys[j-1], keys[j]) != 0 {
				group[j]++
			}
		}
		// in reports whether row j is in row i's frame, from the
		// definitions.
		in := func(i, j int) bool {
			ok := func(b Bound, start bool) bool {
				off := int(b.Offset.(types.DInt))
				sign := 1
				if start {
					sign = -1
				}
				var pos, at int // compare at with pos: start wants at >= pos
				switch b.Kind {
				case UnboundedPreceding, UnboundedFollowing:
					return true
				}
				if b.Kind == OffsetPreceding {
					off = -off
				} else if b.Kind == CurrentRow {
					off = 0
				}
				switch f.Mode {
				case Rows:
					pos, at = i+off, j
				case Groups:
					pos, at = group[i]+off, group[j]
				case Range:
					if b.Kind == CurrentRow || types.IsNull(keys[i]) {
						// The current row's peer group.
						pos, at = group[i], group[j]
						break
					}
					if types.IsNull(keys[j]) {
						// NULLs lie before a start (first) or after an
						// end (last) of a non-NULL row's frame.
						return start != nullsFirst
					}
					// The key's distance in sort order.
					d := int(keys[j].(types.DInt) - keys[i].(types.DInt))
					if desc {
						d = -d
					}
					pos, at = off, d
				}
				return sign*(at-pos) <= 0
			}
			if !ok(f.Start, true) || !ok(f.End, false) {
				return false
			}
			switch f.Exclude {
			case ExcludeCurrentRow:
				return j != i
			case ExcludeGroup:
				return group[j] != group[i]
			case ExcludeTies:
				return j == i || group[j] != group[i]
			}
			return true
		}
		var want []string
		for i := range n {
			var rows []string
			for j := range n {
				if in(i, j) {
					rows = append(rows, fmt.Sprint(j))
				}
			}
			want = append(want, strings.Join(rows, ","))
		}
		w := AggregateWindow(func() Aggregate { return &collectAgg{} })
		for _, part := range []*Partition{p, {Rows: memRows{p}, Desc: desc, NullsFirst: nullsFirst}} {
			var got []string
			err := w.Compute(testCtx(), part, f, func(d types.Datum) error {
				got = append(got, string(d.(types.DString)))
				return nil
			})
			if err != nil {
				t.Fatalf("iteration %d: %+v: %v", iter, f, err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("iteration %d: keys %v (desc %v, nulls first %v), frame %+v (rows behind PartitionRows: %v):\ngot  %q\nwant %q", iter, keys, desc, nullsFirst, f, part.Rows != nil, got, want)
			}
		}
	}
}
