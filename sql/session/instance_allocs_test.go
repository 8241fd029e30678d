package session

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestPlanInstanceAllocs: an Execute of a kept point plan copies the plan
// in one allocation (planInstance), and each copy is its own: the cached
// plan is unchanged and an earlier instance keeps its span when a later
// Execute binds another key (a suspended portal still reads it).
func TestPlanInstanceAllocs(t *testing.T) {
	scan := &plan.Scan{}
	gp := &genericPlan{
		p:    &plan.Plan{Root: &plan.Project{Input: scan}, Tag: "SELECT", ReadOnly: true},
		scan: true,
		keys: []sem.Expr{&sem.Param{Index: 1, T: types.Int8}},
	}
	spanKey := func(p *plan.Plan) types.Datum {
		t.Helper()
		pr, ok := p.Root.(*plan.Project)
		if !ok {
			t.Fatalf("root %T, want *plan.Project", p.Root)
		}
		sc, ok := pr.Input.(*plan.Scan)
		if !ok || sc == scan {
			t.Fatalf("input %T (the cached Scan itself: %t), want a copy", pr.Input, sc == scan)
		}
		if len(sc.Spans) != 1 || len(sc.Spans[0].Start) != 1 || !sc.Spans[0].EndInclusive {
			t.Fatalf("spans %+v, want one point span", sc.Spans)
		}
		return sc.Spans[0].Start[0]
	}
	first := gp.instantiate([]types.Datum{types.DInt(1000)}, nil)
	second := gp.instantiate([]types.Datum{types.DInt(2000)}, nil)
	if k := spanKey(first); k != types.DInt(1000) {
		t.Errorf("first instance's key %v after a second Execute, want 1000", k)
	}
	if k := spanKey(second); k != types.DInt(2000) {
		t.Errorf("second instance's key %v, want 2000", k)
	}
	if len(scan.Spans) != 0 || gp.p.Root.(*plan.Project).Input != scan {
		t.Errorf("the cached plan changed: spans %+v", scan.Spans)
	}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	params := []types.Datum{types.DInt(1000)}
	if n := testing.AllocsPerRun(200, func() { gp.instantiate(params, nil) }); n > 1 {
		t.Errorf("instantiate: %v allocations, want 1", n)
	}
}

// TestBindAllocs: Bind of a statement with one int8 parameter allocates
// the portal, which holds the parameter's slot, and the value's datum:
// not a slice of values apart from the portal, nor the string
// types.ParseDatum reads (intParam).
func TestBindAllocs(t *testing.T) {
	ps := &preparedStatement{s: &Session{}, paramTypes: []*types.T{types.Int8}}
	bp := pgwire.BindParams{Values: [][]byte{[]byte("1000")}, Formats: []int16{0}}
	ctx := context.Background()
	pt, err := ps.Bind(ctx, bp)
	if err != nil {
		t.Fatal(err)
	}
	if got := pt.(*portal).params; len(got) != 1 || got[0] != types.DInt(1000) {
		t.Fatalf("params %v, want [1000]", got)
	}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = ps.Bind(ctx, bp) }); n > 2 {
		t.Errorf("Bind: %v allocations, want at most 2 (the portal, the value's datum)", n)
	}
}
