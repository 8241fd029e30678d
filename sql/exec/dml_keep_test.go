package exec

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// execKept runs p in its own transaction with parameters params and the
// kept shapes of pc, as a session runs an Execute of a cached plan.
func (e *dmlEnv) execKept(p *plan.Plan, pc *PointCache, params ...types.Datum) ([][]types.Datum, int64, error) {
	var out [][]types.Datum
	var n int64
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		out, n = nil, 0
		x := e.context(txn)
		x.Eval.Params, x.Point = params, pc
		rs, err := Start(ctx, x, p)
		if err != nil {
			return err
		}
		defer rs.Close()
		for {
			row, err := rs.Next(ctx)
			if err != nil {
				return err
			}
			if row == nil {
				break
			}
			out = append(out, append([]types.Datum(nil), row...))
		}
		n = rs.RowsAffected()
		return nil
	})
	return out, n, err
}

// TestKeptInsert runs INSERTs of cached plans (one PointCache, as a
// session keeps with a plan) in sequences where what an execution
// leaves must not reach the next: other parameters, a failed execution
// then a good one, another plan using the same cache, a new descriptor
// of the table (an ALTER TABLE's), RETURNING, and a default that reads a
// row is not kept. Each execution's rows are what the same plan without
// the cache writes.
func TestKeptInsert(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	par := func(i int, t *types.T) sem.Expr { return &sem.Param{Index: i, T: t} }
	// INSERT INTO t (a, c) VALUES ($1, $2): b from its default, d generated.
	insAC, pAC := insertPlan(t, tb, []string{"a", "c"}, []sem.Expr{par(1, types.Int8), par(2, types.Int4)})
	// INSERT INTO t (a, b, c) VALUES ($1, $2, $3) RETURNING a, b, d + a.
	insABC, pABC := insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{par(1, types.Int8), par(2, types.Text), par(3, types.Int4)})
	insABC.Returning = returning(t, tb, insABC.TableCols, "a", "b", "d + a")
	pABC.Columns = insABC.Returning.Cols
	pc := &PointCache{}
	var shapes []*insertShape
	for i, tc := range []struct {
		name    string
		p       *plan.Plan
		params  []types.Datum
		want    string // RETURNING rows, or the error's SQLSTATE
		newDesc bool   // read the table's descriptor again first
	}{
		{"first", pAC, []types.Datum{types.DInt(1), types.DInt(5)}, "", false},
		{"other parameters", pABC, []types.Datum{types.DInt(2), types.DString("x"), types.DInt(7)}, "(2,x,16)", false},
		{"again", pABC, []types.Datum{types.DInt(3), types.DString("y"), types.DInt(8)}, "(3,y,19)", false},
		{"check fails", pABC, []types.Datum{types.DInt(4), types.DString("z"), types.DInt(-1)}, pgerrcode.CheckViolation, false},
		{"unique fails", pABC, []types.Datum{types.DInt(4), types.DString("x"), types.DInt(9)}, pgerrcode.UniqueViolation, false},
		{"after failures", pABC, []types.Datum{types.DInt(4), types.DString("z"), types.DInt(9)}, "(4,z,22)", false},
		{"cast fails", pAC, []types.Datum{types.DInt(5), types.DInt(1 << 40)}, pgerrcode.NumericValueOutOfRange, false},
		{"new descriptor", pABC, []types.Datum{types.DInt(6), types.DString("w"), types.DInt(10)}, "(6,w,26)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.newDesc {
				// The descriptor of a later catalog generation is another
				// object: the plans made under it hold it, not tb.
				nd := e.table(tb.ID)
				insAC.Table, insABC.Table = nd, nd
			}
			rows, _, err := e.execKept(tc.p, pc, tc.params...)
			if len(tc.want) == 5 && tc.want[0] != '(' {
				if err == nil || !strings.HasPrefix(describeErr(err), tc.want+" ") {
					t.Fatalf("error %v, want SQLSTATE %s", err, tc.want)
				}
			} else if err != nil {
				t.Fatal(describeErr(err))
			} else if got := fmtRows(rows); got != tc.want {
				t.Errorf("RETURNING %s, want %s", got, tc.want)
			}
			if pc.insert == nil {
				t.Fatal("no shape kept")
			}
			shapes = append(shapes, pc.insert)
			// The shape is kept while the plan is the same one and made
			// again for another plan or descriptor.
			if i > 0 && (shapes[i] == shapes[i-1]) != (tc.p == [...]*plan.Plan{pAC, pABC, pABC, pABC, pABC, pABC, pAC, pABC}[i-1] && !tc.newDesc) {
				t.Errorf("shape kept: %t", shapes[i] == shapes[i-1])
			}
		})
	}

	// A default that reads more than constants and parameters is
	// compiled per statement; such a plan keeps nothing.
	ins, p := insertPlan(t, tb, []string{"a", "c"}, []sem.Expr{par(1, types.Int8), par(2, types.Int4)})
	scope, _ := scopeOf(tb, 100, "")
	cat, ok := mustExpr(t, scope, "b || 'f'", types.Text).(*sem.BinOp)
	if !ok {
		t.Fatal("b || 'f' is not a *sem.BinOp")
	}
	cat.Left = txt("d") // 'd' || 'f', not folded
	ins.Defaults[1] = cat
	if _, _, err := e.execKept(p, pc, types.DInt(7), types.DInt(11)); err != nil {
		t.Fatal(describeErr(err))
	}
	if pc.insert != nil {
		t.Error("a shape kept for a default that is not kept")
	}
	if got, want := e.rows(tb.ID), "(1,dflt,5,10) (2,x,7,14) (3,y,8,16) (4,z,9,18) (6,w,10,20) (7,df,11,22)"; got != want {
		t.Errorf("table holds %s, want %s", got, want)
	}
}

// hTable is pgbench_history's shape: h(tid int4, bid int4, aid int4,
// delta int4, rowid int8 DEFAULT unique_rowid() PRIMARY KEY).
func hTable() *catalog.Table {
	tb := newTable("h",
		catalog.Column{Name: "tid", Type: types.Int4, Nullable: true},
		catalog.Column{Name: "bid", Type: types.Int4, Nullable: true},
		catalog.Column{Name: "aid", Type: types.Int4, Nullable: true},
		catalog.Column{Name: "delta", Type: types.Int4, Nullable: true},
		catalog.Column{Name: "rowid", Type: types.Int8, DefaultExpr: catalog.RowIDDefault, Hidden: true},
	)
	tb.PrimaryIndex = pk("h_pkey", 5)
	return tb
}

// TestKeptInsertAllocs: the build of an INSERT ... VALUES of a cached
// plan (pgbench's INSERT into pgbench_history: four parameters and the
// rowid's default) compiles neither its VALUES items nor its default,
// whose closures, evaluators and slices were 15 objects of every
// INSERT.
func TestKeptInsertAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	e := newDMLEnv(t)
	tb := hTable()
	e.create(tb)
	var vals []sem.Expr
	for i := range 4 {
		vals = append(vals, &sem.Param{Index: i + 1, T: types.Int4})
	}
	ins, p := insertPlan(t, tb, []string{"tid", "bid", "aid", "delta"}, vals)
	params := []types.Datum{types.DInt(1), types.DInt(2), types.DInt(3), types.DInt(4)}
	build := func(x *Context) float64 {
		return testing.AllocsPerRun(100, func() {
			r := newRunner(context.Background(), x, p)
			o, err := r.buildInsert(ins)
			if err != nil {
				t.Fatal(err)
			}
			o.Close()
			r.release()
		})
	}
	var kept, fresh float64
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		x := e.context(txn)
		x.Eval.Params = params
		fresh = build(x)
		x.Point = &PointCache{}
		kept = build(x)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if kept > fresh-15 {
		t.Errorf("a kept INSERT's build allocates %v objects, without the cache %v: want at least 15 fewer", kept, fresh)
	} else {
		t.Logf("%v objects kept, %v without", kept, fresh)
	}
}

// TestDistOnAllocs: deciding that a statement (an INSERT, which never
// distributes) does not distribute allocates nothing beyond its runner:
// the state of distributed planning is held in the runner (made on
// first use, it was an object of every INSERT and UPDATE).
func TestDistOnAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	x := &Context{Eval: &sem.EvalContext{Fn: &builtins.FixedContext{}}}
	p := &plan.Plan{Tag: "INSERT"}
	if n := testing.AllocsPerRun(100, func() {
		r := newRunner(context.Background(), x, p)
		if r.distOn() {
			t.Fatal("an INSERT distributes")
		}
	}); n > 1 {
		t.Errorf("%v allocations, want 1 (the runner)", n)
	}
}

// TestKeptUpdatePositions runs UPDATEs of cached plans with one
// PointCache: the kept column positions serve executions of one plan
// with any parameters, also after a failed one, and are made again for
// another plan or a new descriptor; kept, they cost nothing (they were
// three objects of every UPDATE).
func TestKeptUpdatePositions(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	_, ins := insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(1), txt("x"), i4(5)})
	e.mustExec(ins)
	par := func(i int, t *types.T) sem.Expr { return &sem.Param{Index: i, T: t} }
	// UPDATE t SET c = $2 (the old row x, c = $1) and SET b = $3, c = $2.
	upC, pC := updatePlan(t, tb, []string{"c"}, []sem.Expr{i8(1), txt("x"), par(1, types.Int4), c(types.DNull, types.Int8), par(2, types.Int4)})
	upBC, pBC := updatePlan(t, tb, []string{"b", "c"}, []sem.Expr{i8(1), txt("x"), par(1, types.Int4), c(types.DNull, types.Int8), par(3, types.Text), par(2, types.Int4)})
	pc := &PointCache{}
	var last *updateShape
	for _, tc := range []struct {
		name    string
		p       *plan.Plan
		params  []types.Datum
		fails   bool
		kept    bool // the shape of the execution before serves
		newDesc bool
		want    string
	}{
		{"first", pC, []types.Datum{types.DInt(5), types.DInt(6)}, false, false, false, "(1,x,6,12)"},
		{"other parameters", pC, []types.Datum{types.DInt(6), types.DInt(7)}, false, true, false, "(1,x,7,14)"},
		{"check fails", pC, []types.Datum{types.DInt(7), types.DInt(-1)}, true, true, false, "(1,x,7,14)"},
		{"after the failure", pC, []types.Datum{types.DInt(7), types.DInt(8)}, false, true, false, "(1,x,8,16)"},
		{"another plan", pBC, []types.Datum{types.DInt(8), types.DInt(9), types.DString("x")}, false, false, false, "(1,x,9,18)"},
		{"back", pC, []types.Datum{types.DInt(9), types.DInt(10)}, false, false, false, "(1,x,10,20)"},
		{"new descriptor", pC, []types.Datum{types.DInt(10), types.DInt(11)}, false, false, true, "(1,x,11,22)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.newDesc {
				nd := e.table(tb.ID)
				upC.Table, upBC.Table = nd, nd
			}
			_, n, err := e.execKept(tc.p, pc, tc.params...)
			if tc.fails != (err != nil) || !tc.fails && n != 1 {
				t.Fatalf("%d rows, error %v; want a failure: %t", n, err, tc.fails)
			}
			if got := e.rows(tb.ID); got != tc.want {
				t.Errorf("table holds %s, want %s", got, tc.want)
			}
			if pc.update == nil {
				t.Fatal("no shape kept")
			}
			if kept := pc.update == last; kept != tc.kept {
				t.Errorf("shape kept: %t, want %t", kept, tc.kept)
			}
			last = pc.update
		})
	}
	if raceEnabled {
		return
	}
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		r := newRunner(ctx, e.context(txn), pC)
		ti, err := newDMLState(r.x, nil).table(upC.Table)
		if err != nil {
			return err
		}
		inCols := upC.Input.Columns()
		for _, tc := range []struct {
			pc   *PointCache
			want float64
		}{{nil, 3}, {pc, 0}} {
			r.x.Point = tc.pc
			if n := testing.AllocsPerRun(100, func() {
				if _, err := r.updatePositions(upC, ti, inCols); err != nil {
					t.Fatal(err)
				}
			}); n != tc.want && (tc.want == 0 || n < tc.want) {
				t.Errorf("positions with cache %t: %v allocations, want %v", tc.pc != nil, n, tc.want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
