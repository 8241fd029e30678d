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
