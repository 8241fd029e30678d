package exec

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// countingReader is an ImplicitReader over a kv.DB that counts the
// batches it read.
type countingReader struct {
	db      *kv.DB
	batches int
}

func (c *countingReader) ReadImplicit(ctx context.Context, b *kv.Batch) error {
	c.batches++
	return c.db.RunImplicitRead(ctx, b)
}

// TestImplicitStart: a point read started without a transaction reads its
// row in one batch before Start returns and answers what a transaction
// reads; a plan the point operator does not take, a locking read, and a
// row longer than one page (a second batch would be a second snapshot)
// are refused with ErrImplicitRetry. ImplicitPointRead accepts only point
// reads whose projections evaluate nothing.
func TestImplicitStart(t *testing.T) {
	e := newEnv(t)
	tbl := e.createTable(tableSpec{name: "ip", cols: []string{"k int8", "v int8", "s text"}, pk: []string{"k"}},
		[]types.Datum{types.DInt(1), types.DInt(10), types.DString("one")},
		[]types.Datum{types.DInt(2), types.DInt(20), types.DString("two")})
	point := func(k int64) []plan.Span { return []plan.Span{{Start: ints(k), End: ints(k), EndInclusive: true}} }
	start := func(root plan.Node) (string, int, error) {
		t.Helper()
		ctx := context.Background()
		cr := &countingReader{db: e.db}
		rs, err := Start(ctx, &Context{Implicit: cr, Eval: &sem.EvalContext{}}, &plan.Plan{Root: root, ReadOnly: true})
		if err != nil {
			return "", cr.batches, err
		}
		defer rs.Close()
		before := cr.batches
		out, err := drainRows(ctx, rs)
		if cr.batches != before {
			t.Errorf("Next read %d more batches: the row must be read in Start", cr.batches-before)
		}
		return out, cr.batches, err
	}

	s := e.scan(tbl, nil, "v", "s")
	s.Spans = point(2)
	if !ImplicitPointRead(&plan.Plan{Root: s, ReadOnly: true}) {
		t.Fatal("ImplicitPointRead refused a point read")
	}
	got, n, err := start(s)
	if err != nil || n != 1 || got != e.mustRun(s) || got != lines("20 two") {
		t.Fatalf("point read: %q in %d batches, %v; a transaction reads %q", got, n, err, e.mustRun(s))
	}
	s = e.scan(tbl, nil, "v")
	s.Spans = point(3)
	if got, n, err := start(s); err != nil || n != 1 || got != "" {
		t.Fatalf("missing row: %q in %d batches, %v", got, n, err)
	}

	// Refused before reading: a lock, a span of two rows.
	lock := e.scan(tbl, nil, "v")
	lock.Spans = point(1)
	lock.Lock = plan.LockForUpdate
	two := e.scan(tbl, nil, "v")
	two.Spans = []plan.Span{{Start: ints(1), End: ints(2), EndInclusive: true}}
	prefix := e.scan(tbl, nil, "v")
	prefix.Spans = []plan.Span{{Start: []types.Datum{}, End: []types.Datum{}, EndInclusive: true}}
	for name, root := range map[string]plan.Node{"FOR UPDATE": lock, "two rows": two, "no key column": prefix} {
		if ImplicitPointRead(&plan.Plan{Root: root, ReadOnly: true}) && name != "two rows" {
			// (Two rows of a one-column key pass the filter, which does
			// not compare the span's ends; Start refuses them.)
			t.Errorf("%s: ImplicitPointRead accepted it", name)
		}
		if _, n, err := start(root); !errors.Is(err, ErrImplicitRetry) || n != 0 {
			t.Errorf("%s: %d batches, %v; want ErrImplicitRetry before any read", name, n, err)
		}
	}

	// A projection that evaluates something, and a reg* output: not for
	// the session to start without a transaction.
	s = e.scan(tbl, nil, "k", "v")
	s.Spans = point(1)
	add := &plan.Project{Input: s, Exprs: []sem.Expr{e.expr("v + 1", s.Cols...)}, Cols: []plan.Column{e.col("x", types.Int8)}}
	cols := &plan.Project{Input: s, Exprs: []sem.Expr{ref(s.Cols[1]), cint(5)}, Cols: []plan.Column{e.col("v", types.Int8), e.col("c", types.Int8)}}
	reg := &plan.Project{Input: s, Exprs: []sem.Expr{&sem.Const{Datum: types.DInt(1), T: types.RegClass}}, Cols: []plan.Column{e.col("r", types.RegClass)}}
	for _, tc := range []struct {
		name string
		root plan.Node
		ok   bool
	}{{"v + 1", add, false}, {"columns and constants", cols, true}, {"regclass", reg, false}} {
		if got := ImplicitPointRead(&plan.Plan{Root: tc.root, ReadOnly: true}); got != tc.ok {
			t.Errorf("%s: ImplicitPointRead %v, want %v", tc.name, got, tc.ok)
		}
	}
	if got, _, err := start(cols); err != nil || got != lines("10 5") {
		t.Fatalf("columns and constants: %q, %v", got, err)
	}

	// A row of more entries than a page: one batch read, then refused.
	wideCols := []string{"k int8"}
	row := []types.Datum{types.DInt(7)}
	var names []string
	for i := 1; i <= 300; i++ {
		wideCols = append(wideCols, fmt.Sprintf("c%d int8", i))
		row = append(row, types.DInt(int64(i)))
		names = append(names, fmt.Sprintf("c%d", i))
	}
	wide := e.createTable(tableSpec{name: "wide", cols: wideCols, pk: []string{"k"}}, row)
	ws := e.scan(wide, nil, names...)
	ws.Spans = point(7)
	if _, n, err := start(ws); !errors.Is(err, ErrImplicitRetry) || n != 1 {
		t.Fatalf("wide row: %d batches, %v; want ErrImplicitRetry after one", n, err)
	}
}
