package exec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// takesPoint reports whether Start would run root through the point-read
// fast path (point.go).
func (e *env) takesPoint(root plan.Node) bool {
	return e.takesPointUnder(root, "")
}

// distsqlSetting is a session whose distsql setting is fixed.
type distsqlSetting struct {
	*builtins.FixedContext
	value string
}

func (d distsqlSetting) Setting(name string, missingOK bool) (string, bool, error) {
	if name == "distsql" {
		return d.value, true, nil
	}
	return "", false, nil
}

func (d distsqlSetting) SetSetting(name, value string, reset, local bool) (string, error) {
	return "", nil
}

// takesPointUnder is takesPoint on a node that distributes (a distsql
// runner in the context) with distsql set to distsql; "": no runner.
func (e *env) takesPointUnder(root plan.Node, distsqlValue string) bool {
	e.t.Helper()
	var o op
	e.txn(func(ctx context.Context, txn *kv.Txn) error {
		ev := &sem.EvalContext{}
		if distsqlValue != "" {
			ctx = distsql.WithRunner(ctx, &distsql.Runner{})
			ev.Fn = distsqlSetting{FixedContext: &builtins.FixedContext{}, value: distsqlValue}
		}
		r := newRunner(ctx, &Context{Txn: txn, Eval: ev}, &plan.Plan{Root: root})
		defer r.release()
		var err error
		o, err = r.buildPoint(root)
		return err
	})
	return o != nil
}

// TestPointRead: a read of one row by its whole primary key takes the fast
// path and returns what the general operators return (a Stats collector
// forces those: EXPLAIN ANALYZE never takes the fast path); anything else
// is left to the general path.
func TestPointRead(t *testing.T) {
	e := newEnv(t)
	var rows [][]types.Datum
	for i := int64(1); i <= 5; i++ {
		s := types.Datum(types.DString(fmt.Sprint("s", i)))
		if i == 3 {
			s = types.DNull
		}
		rows = append(rows, []types.Datum{types.DInt(i), types.DInt(10 * i), s})
	}
	point := func(vals ...int64) []plan.Span {
		v := ints(vals...)
		return []plan.Span{{Start: v, End: v, EndInclusive: true}}
	}
	for _, packed := range []bool{true, false} {
		name := fmt.Sprintf("packed=%v", packed)
		tbl := e.createTable(tableSpec{name: fmt.Sprintf("p%v", packed), cols: []string{"k int8", "k2 int8", "s text"},
			pk: []string{"k", "-k2"}, indexes: [][]string{{"s"}}, packed: packed}, rows...)
		hashed := e.createTable(tableSpec{name: fmt.Sprintf("h%v", packed), cols: []string{"k int8", "k2 int8", "s text"},
			pk: []string{"k", "k2"}, hash: 1, packed: packed}, rows...)
		for _, tc := range []struct {
			name string
			root func() plan.Node
			fast bool
			want string
		}{
			{"point", func() plan.Node {
				s := e.scan(tbl, nil, "s", "k")
				s.Spans = point(2, 20)
				return s
			}, true, lines("s2 2")},
			{"point, NULL column", func() plan.Node {
				s := e.scan(tbl, nil, "k", "s")
				s.Spans = point(3, 30)
				return s
			}, true, lines("3 NULL")},
			{"point, no row", func() plan.Node {
				s := e.scan(tbl, nil, "k", "s")
				s.Spans = point(2, 21)
				return s
			}, true, ""},
			{"point under a projection", func() plan.Node {
				s := e.scan(tbl, nil, "k", "k2", "s")
				s.Spans = point(4, 40)
				c := e.col("x", types.Int8)
				return &plan.Project{Input: s, Exprs: []sem.Expr{e.expr("k2 + k", s.Cols...), ref(s.Cols[2])}, Cols: []plan.Column{c, e.col("s", types.Text)}}
			}, true, lines("44 s4")},
			// The operator's own row buffers (pointRowBuf): a row of no
			// columns is still a row, not the end; a row wider than them
			// and two levels of projections each get their own.
			{"point of no columns", func() plan.Node {
				s := e.scan(tbl, nil, "k")
				s.Spans = point(4, 40)
				return &plan.Project{Input: s}
			}, true, lines("")},
			{"point wider than the buffers", func() plan.Node {
				s := e.scan(tbl, nil, "k", "k2", "s")
				s.Spans = point(4, 40)
				inner := &plan.Project{Input: s, Exprs: []sem.Expr{ref(s.Cols[0]), ref(s.Cols[1]), ref(s.Cols[2]), ref(s.Cols[0]), ref(s.Cols[1])},
					Cols: []plan.Column{e.col("a", types.Int8), e.col("b", types.Int8), e.col("c", types.Text), e.col("d", types.Int8), e.col("e", types.Int8)}}
				return &plan.Project{Input: inner, Exprs: []sem.Expr{ref(inner.Cols[4]), ref(inner.Cols[2])},
					Cols: []plan.Column{e.col("f", types.Int8), e.col("g", types.Text)}}
			}, true, lines("40 s4")},
			{"prefix of the key", func() plan.Node {
				s := e.scan(tbl, nil, "k", "s")
				s.Spans = point(2)
				return s
			}, false, lines("2 s2")},
			{"point with a filter", func() plan.Node {
				s := e.scan(tbl, nil, "k", "s")
				s.Spans = point(2, 20)
				s.Filter = e.expr("k > 1", s.Cols...)
				return s
			}, false, lines("2 s2")},
			{"locking point", func() plan.Node {
				s := e.scan(tbl, nil, "k", "s")
				s.Spans = point(2, 20)
				s.Lock = plan.LockForUpdate
				return s
			}, false, lines("2 s2")},
			{"secondary index", func() plan.Node {
				s := e.scan(tbl, &tbl.Indexes[0], "s", "k")
				s.Spans = []plan.Span{{Start: []types.Datum{types.DString("s5")}, End: []types.Datum{types.DString("s5")}, EndInclusive: true}}
				return s
			}, false, lines("s5 5")},
			{"hash-partitioned", func() plan.Node {
				s := e.scan(hashed, nil, "k", "s")
				s.Spans = point(1, 10)
				return s
			}, false, lines("1 s1")},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				root := tc.root()
				if got := e.takesPoint(root); got != tc.fast {
					t.Errorf("fast path taken: %v, want %v", got, tc.fast)
				}
				got := e.mustRun(root)
				if got != tc.want {
					t.Errorf("got\n%swant\n%s", got, tc.want)
				}
				general, err := e.run(&plan.Plan{Root: root}, &Stats{})
				if err != nil {
					t.Fatal(err)
				}
				if general != got {
					t.Errorf("general path got\n%sfast path\n%s", general, got)
				}
			})
		}
	}
}

// TestPointReadDistSQL: with distsql = on, which distributes even one row,
// a point read is left to the general path; auto keeps one row local, as
// the fast path does, and off never distributes.
func TestPointReadDistSQL(t *testing.T) {
	e := newEnv(t)
	tbl := e.createTable(tableSpec{name: "d", cols: []string{"k int8", "v int8"}, pk: []string{"k"}}, ints(1, 10))
	for _, tc := range []struct {
		distsql string
		fast    bool
	}{{"on", false}, {"auto", true}, {"off", true}} {
		s := e.scan(tbl, nil, "k", "v")
		s.Spans = []plan.Span{{Start: ints(1), End: ints(1), EndInclusive: true}}
		if got := e.takesPointUnder(s, tc.distsql); got != tc.fast {
			t.Errorf("distsql = %s: fast path taken: %v, want %v", tc.distsql, got, tc.fast)
		}
	}
}

// TestPointReadResumes: a row of more column entries than one page of the
// Scan (an unpacked row of 300 columns) is read to its end.
func TestPointReadResumes(t *testing.T) {
	e := newEnv(t)
	const n = 300
	cols := []string{"k int8"}
	row := []types.Datum{types.DInt(7)}
	var names, want []string
	for i := 1; i <= n; i++ {
		cols = append(cols, fmt.Sprintf("c%d int8", i))
		row = append(row, types.DInt(int64(i)))
		names = append(names, fmt.Sprintf("c%d", i))
		want = append(want, fmt.Sprint(i))
	}
	tbl := e.createTable(tableSpec{name: "wide", cols: cols, pk: []string{"k"}}, row)
	s := e.scan(tbl, nil, names...)
	s.Spans = []plan.Span{{Start: ints(7), End: ints(7), EndInclusive: true}}
	if !e.takesPoint(s) {
		t.Fatal("the point read of a wide row did not take the fast path")
	}
	if got := e.mustRun(s); got != lines(strings.Join(want, " ")) {
		t.Errorf("got %q", got)
	}
}

// TestPointCache: plans instantiated from one cached plan (the same nodes
// but for the Scan's span, as the session's plan cache makes them) and
// started with one PointCache read what each would read alone; the shape
// is made at the first Start and kept by the later ones, and a plan of
// another shape given the same cache makes its own instead of reading
// with the kept one.
func TestPointCache(t *testing.T) {
	e := newEnv(t)
	var data [][]types.Datum
	for i := int64(1); i <= 4; i++ {
		data = append(data, []types.Datum{types.DInt(i), types.DInt(10 * i), types.DString(fmt.Sprint("s", i))})
	}
	a := e.createTable(tableSpec{name: "pca", cols: []string{"k int8", "k2 int8", "s text"}, pk: []string{"k", "-k2"}}, data...)
	b := e.createTable(tableSpec{name: "pcb", cols: []string{"k int8", "v int8"}, pk: []string{"k"}}, ints(1, 100), ints(2, 200))
	// The cached plans: a projection reading a parameter over a point
	// scan of a, and a bare point scan of b.
	sa := e.scan(a, nil, "k", "k2", "s")
	pa := &plan.Project{Input: sa, Exprs: []sem.Expr{e.expr("k2 + $1", sa.Cols...), ref(sa.Cols[2])},
		Cols: []plan.Column{e.col("x", types.Int8), e.col("s", types.Text)}}
	sb := e.scan(b, nil, "v")
	// instantiate copies the cached chain with a point span of vals, as
	// the session's genericPlan.instantiate does.
	instantiate := func(root plan.Node, vals ...int64) plan.Node {
		v := ints(vals...)
		sp := []plan.Span{{Start: v, End: v, EndInclusive: true}}
		if p, ok := root.(*plan.Project); ok {
			s := *p.Input.(*plan.Scan)
			s.Spans = sp
			c := *p
			c.Input = &s
			return &c
		}
		s := *root.(*plan.Scan)
		s.Spans = sp
		return &s
	}
	var pc PointCache
	run := func(name string, root plan.Node, pc *PointCache, params ...types.Datum) string {
		t.Helper()
		var out string
		err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			rs, err := Start(ctx, &Context{Txn: txn, Eval: &sem.EvalContext{Params: params}, Point: pc}, &plan.Plan{Root: root})
			if err != nil {
				return err
			}
			defer rs.Close()
			if _, ok := rs.(*rows).inner.(*pointOp); !ok {
				t.Errorf("%s: not the point operator", name)
			}
			out, err = drainRows(ctx, rs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var kept *pointShape
	for _, tc := range []struct {
		name   string
		root   plan.Node
		params []types.Datum
		want   string
		// same: the cache's shape must be the one kept from the
		// previous case.
		same bool
	}{
		{"a 2,20", instantiate(pa, 2, 20), ints(5), lines("25 s2"), false},
		{"a 3,30", instantiate(pa, 3, 30), ints(7), lines("37 s3"), true},
		{"a 3,31 (no row)", instantiate(pa, 3, 31), ints(7), "", true},
		{"a 4,40", instantiate(pa, 4, 40), ints(1), lines("41 s4"), true},
		// Another plan given the same cache: its own shape.
		{"b 2", instantiate(sb, 2), nil, lines("200"), false},
		{"b 1", instantiate(sb, 1), nil, lines("100"), true},
		{"a 1,10", instantiate(pa, 1, 10), ints(0), lines("10 s1"), false},
	} {
		got := run(tc.name, tc.root, &pc, tc.params...)
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		if alone := run(tc.name, tc.root, nil, tc.params...); alone != got {
			t.Errorf("%s: without the cache %q, with it %q", tc.name, alone, got)
		}
		if pc.root == nil {
			t.Fatalf("%s: the cache kept no shape", tc.name)
		}
		if (pc.root == kept) != tc.same {
			t.Errorf("%s: shape kept from the previous plan: %v, want %v", tc.name, pc.root == kept, tc.same)
		}
		kept = pc.root
	}
}
