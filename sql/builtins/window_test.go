package builtins

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// Expected columns come from PostgreSQL 15.18:
//
//	SELECT x, row_number() OVER w, rank() OVER w, ... FROM
//	  (VALUES (1),(2),(2),(3),(5),(8)) v(x) WINDOW w AS (ORDER BY x)

var windowInput = []int64{1, 2, 2, 3, 5, 8}

// partition builds the sorted partition of windowInput with the given
// extra constant arguments after x, ordered by x (desc reverses it).
func partition(extra []types.Datum, desc bool) *Partition {
	p := &Partition{Desc: desc}
	for i := range windowInput {
		x := windowInput[i]
		if desc {
			x = windowInput[len(windowInput)-1-i]
		}
		p.Args = append(p.Args, append([]types.Datum{types.DInt(x)}, extra...))
		p.Keys = append(p.Keys, []types.Datum{types.DInt(x)})
	}
	return p
}

func runWindow(t *testing.T, name string, frame Frame, extra []types.Datum, desc bool) string {
	t.Helper()
	argTypes := []*types.T{types.Int4}
	for range extra {
		argTypes = append(argTypes, types.Int4)
	}
	switch name {
	case "row_number", "rank", "dense_rank", "percent_rank", "cume_dist":
		argTypes = nil
	case "ntile":
		argTypes = []*types.T{types.Int4}
	}
	r, err := ResolveFunc(name, argTypes)
	if err != nil {
		t.Fatal(err)
	}
	var w WindowFunc
	switch r.Overload.Class {
	case WindowClass:
		w = r.Overload.NewWindow(r.ArgTypes)
	case AggregateClass:
		w = AggregateWindow(func() Aggregate { return r.Overload.NewAggregate(r.ArgTypes) })
	default:
		t.Fatalf("%s is not a window function", name)
	}
	p := partition(extra, desc)
	if name == "ntile" {
		for i := range p.Args {
			p.Args[i] = extra
		}
	}
	var out []types.Datum
	if err := w.Compute(testCtx(), p, frame, func(d types.Datum) error { out = append(out, d); return nil }); err != nil {
		return "ERROR: " + err.Error()
	}
	// The same partition behind PartitionRows (as a spilled one is read)
	// gives the same results.
	var behind []types.Datum
	rows := &Partition{Rows: memRows{p}, Desc: p.Desc, NullsFirst: p.NullsFirst}
	if err := w.Compute(testCtx(), rows, frame, func(d types.Datum) error { behind = append(behind, d); return nil }); err != nil {
		t.Fatalf("%s behind PartitionRows: %v", name, err)
	}
	if len(behind) != len(out) {
		t.Fatalf("%s behind PartitionRows: %d results, in memory %d", name, len(behind), len(out))
	}
	for i := range out {
		if types.Compare(behind[i], out[i]) != 0 {
			t.Fatalf("%s behind PartitionRows: row %d is %v, in memory %v", name, i, behind[i], out[i])
		}
	}
	s := make([]string, len(out))
	for i, d := range out {
		s[i] = types.Format(nil, r.Return, d)
	}
	return strings.Join(s, " ")
}

func rows(s, e Bound) Frame   { return Frame{Mode: Rows, Start: s, End: e} }
func rng(s, e Bound) Frame    { return Frame{Mode: Range, Start: s, End: e} }
func preceding(n int64) Bound { return Bound{Kind: OffsetPreceding, Offset: types.DInt(n)} }
func following(n int64) Bound { return Bound{Kind: OffsetFollowing, Offset: types.DInt(n)} }

var (
	unbPre  = Bound{Kind: UnboundedPreceding}
	unbFol  = Bound{Kind: UnboundedFollowing}
	current = Bound{Kind: CurrentRow}
)

func TestWindowFunctions(t *testing.T) {
	d := DefaultFrame
	for _, tc := range []struct {
		name  string
		frame Frame
		extra []types.Datum
		want  string
	}{
		{"row_number", d, nil, "1 2 3 4 5 6"},
		{"rank", d, nil, "1 2 2 4 5 6"},
		{"dense_rank", d, nil, "1 2 2 3 4 5"},
		{"percent_rank", d, nil, "0 0.2 0.2 0.6 0.8 1"},
		{"cume_dist", d, nil, "0.16666666666666666 0.5 0.5 0.6666666666666666 0.8333333333333334 1"},
		{"ntile", d, []types.Datum{types.DInt(3)}, "1 1 2 2 3 3"},
		{"lag", d, nil, "NULL 1 2 2 3 5"},
		{"lead", d, []types.Datum{types.DInt(2), types.DInt(-1)}, "2 3 5 8 -1 -1"},
		{"first_value", d, nil, "1 1 1 1 1 1"},
		{"last_value", d, nil, "1 2 2 3 5 8"},
		{"nth_value", d, []types.Datum{types.DInt(2)}, "NULL 2 2 2 2 2"},
		{"sum", d, nil, "1 5 5 8 13 21"},
		{"sum", rows(preceding(1), following(1)), nil, "3 5 7 10 16 13"},
		{"sum", rng(preceding(2), current), nil, "1 5 5 8 8 8"},
		{"count", rows(current, unbFol), nil, "6 5 4 3 2 1"},
		{"avg", rows(unbPre, unbFol), nil, strings.Repeat("3.5000000000000000 ", 5) + "3.5000000000000000"},
		{"nth_value", rows(preceding(1), following(1)), []types.Datum{types.DInt(0)}, "ERROR: argument of nth_value must be greater than zero"},
		{"sum", rows(preceding(-1), current), nil, "ERROR: frame starting offset must not be negative"},
	} {
		if got := runWindow(t, tc.name, tc.frame, tc.extra, false); got != tc.want {
			t.Errorf("%s over %+v: got %s, want %s", tc.name, tc.frame, got, tc.want)
		}
	}
}

// TestRangeOffsetDescending: with ORDER BY x DESC, "1 PRECEDING" means
// values up to 1 larger. Postgres 15:
//
//	SELECT x, sum(x) OVER (ORDER BY x DESC RANGE BETWEEN 1 PRECEDING AND CURRENT ROW)
//	FROM (VALUES (1),(2),(2),(3),(5),(8)) v(x)  →  8:8 5:5 3:3 2:7 2:7 1:5
func TestRangeOffsetDescending(t *testing.T) {
	got := runWindow(t, "sum", rng(preceding(1), current), nil, true)
	if want := "8 5 3 7 7 5"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
