package session

import (
	"testing"

	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/types"
)

// TestShapeGroupAllocs: a query of a known shape (pgbench's statements
// sent as text) gets its statement group in one allocation, its
// constants inline, and the first start of its statement converts them
// into the group's own parameter slots: allocations for neither (the
// constants' slice and the parameters' were one each per statement). A
// query with more constants than fit inline still gets them all.
func TestShapeGroupAllocs(t *testing.T) {
	s := &Session{shapes: map[string]*shapeEntry{}}
	for _, sql := range []string{
		"UPDATE t SET a = a + 5 WHERE k = 7",
		"INSERT INTO h (a, b, c, d, e, f) VALUES (1, 2, 3, 4, 5, 6)",
	} {
		sh := shapeOf(sql, &queryShape{})
		if sh == nil {
			t.Fatalf("%s: no shape", sql)
		}
		se := &shapeEntry{st: &parser.Statement{}, nlits: len(sh.consts)}
		for k := range sh.consts {
			se.uses = append(se.uses, constUse{param: k})
		}
		s.shapes[string(sh.key)] = se
		g, ok := s.shapeGroup(sql, sh)
		if !ok || len(g.scanned.lits) != len(sh.consts) {
			t.Fatalf("%s: shapeGroup %v, %+v", sql, ok, g.scanned)
		}
		pts := make([]*types.T, len(sh.consts))
		for k, c := range sh.consts {
			pts[k] = types.Int8
			if l := g.scanned.lits[k]; !l.IsInt || l.Int != c.Int {
				t.Errorf("%s: constant %d is %+v, want %d", sql, k, l, c.Int)
			}
		}
		params, ok := literalParams(nil, pts, g.scanned.lits, g.scanned.paramBuf[:0])
		if !ok || len(params) != len(pts) || params[len(params)-1] != types.DInt(sh.consts[len(pts)-1].Int) {
			t.Errorf("%s: parameters %v, %v", sql, params, ok)
		}
		if raceEnabled || len(sh.consts) > scannedInline {
			continue
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = s.shapeGroup(sql, sh) }); n > 1 {
			t.Errorf("%s: shapeGroup made %v allocations, want 1", sql, n)
		}
		// Values under 256 box without allocating.
		if n := testing.AllocsPerRun(100, func() {
			_, _ = literalParams(nil, pts, g.scanned.lits, g.scanned.paramBuf[:0])
		}); n > 0 {
			t.Errorf("%s: literalParams made %v allocations, want 0", sql, n)
		}
	}
}

// TestShapeOfAllocs: a Query is scanned into the session's shape, whose
// key and constants' buffers serve the next Query: no allocation (the
// shape, its key and its constants' slice were three per Query), and
// the map of shapes is looked up by the key without a copy.
func TestShapeOfAllocs(t *testing.T) {
	s := &Session{shapes: map[string]*shapeEntry{}}
	var sh queryShape
	sqls := []string{
		"SELECT abalance FROM pgbench_accounts WHERE aid = 48213",
		"SELECT abalance FROM pgbench_accounts WHERE aid = 7",
	}
	first := shapeOf(sqls[0], &sh)
	if first == nil || len(first.consts) != 1 || first.consts[0].Int != 48213 {
		t.Fatalf("shape of %s: %+v", sqls[0], first)
	}
	key := string(first.key)
	s.shapes[key] = &shapeEntry{}
	if got := shapeOf(sqls[1], &sh); got == nil || string(got.key) != key || got.consts[0].Int != 7 || s.entryOf(got) != s.shapes[key] {
		t.Fatalf("shape of %s: %+v", sqls[1], got)
	}
	if raceEnabled {
		return
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		i++
		if sh := shapeOf(sqls[i%2], &sh); sh == nil || s.entryOf(sh) == nil {
			t.Fatal("no shape")
		}
	}); n != 0 {
		t.Errorf("shapeOf and entryOf: %v allocations per Query, want 0", n)
	}
}
