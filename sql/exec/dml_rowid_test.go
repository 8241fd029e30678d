package exec

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/opt"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// nopkTable is a table created without a PRIMARY KEY, as sql/ddl's
// addRowID shapes it: nopk(a int8), keyed by the hidden rowid with the
// unique_rowid() default.
func nopkTable() *catalog.Table {
	tb := newTable("nopk",
		catalog.Column{Name: "a", Type: types.Int8, Nullable: true},
		catalog.Column{Name: catalog.RowIDColumnName, Type: types.Int8, Hidden: true, DefaultExpr: catalog.RowIDDefault},
	)
	tb.PrimaryIndex = pk("nopk_pkey", 2)
	return tb
}

// bind builds and optimizes q as the session does.
func bind(ctx context.Context, x *Context, q string) (*plan.Plan, error) {
	stmts, err := parser.Parse(q)
	if err != nil {
		return nil, err
	}
	db, err := x.Catalog.Database(ctx, "postgres")
	if err != nil {
		return nil, err
	}
	env := &plan.Env{Catalog: plan.NewCatalog(x.Catalog, db, []string{"public"}, func(string, string) plan.VirtualTable { return nil })}
	p, err := plan.Build(ctx, env, &stmts[0])
	if err != nil {
		return nil, err
	}
	return p, opt.Optimize(ctx, p)
}

// TestGeneratedRowIDKey: an INSERT whose rows take their key from the
// rowid default sends the row key as a generated CPut (no read at the
// statement); one that names rowid, handles conflicts, or writes a
// table with a declared key does not.
func TestGeneratedRowIDKey(t *testing.T) {
	e := newDMLEnv(t)
	e.create(tTable(), nopkTable())
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"INSERT INTO nopk (a) VALUES (1)", true},
		{"INSERT INTO nopk VALUES (2)", true},
		{"INSERT INTO nopk (a) SELECT a FROM nopk", true},
		{"INSERT INTO nopk (a, rowid) VALUES (3, 42)", false},
		{"INSERT INTO nopk (a) VALUES (1) ON CONFLICT DO NOTHING", false},
		{"INSERT INTO t (a, c) VALUES (9, 5)", false},
	} {
		var got bool
		if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			x := e.context(txn)
			p, err := bind(ctx, x, tc.sql)
			if err != nil {
				return err
			}
			n, ok := p.Root.(*plan.Insert)
			if !ok {
				t.Fatalf("%s: root %T, want *plan.Insert", tc.sql, p.Root)
			}
			s := newDMLState(x, nil)
			ti, err := s.table(n.Table)
			if err != nil {
				return err
			}
			given := make([]bool, len(n.Table.Columns))
			for _, id := range n.InsertCols {
				p, _ := ti.colPos(id)
				given[p] = true
			}
			got = generatedRowIDKey(n, ti, given)
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if got != tc.want {
			t.Errorf("%s: generated key = %v, want %v", tc.sql, got, tc.want)
		}
	}
}

// TestInsertGeneratedRowIDs: rows inserted with generated keys are all
// there, in a buffering transaction too (which reads its own), and a
// rowid a user chose twice is still a unique violation at the statement.
func TestInsertGeneratedRowIDs(t *testing.T) {
	e := newDMLEnv(t)
	e.create(nopkTable())
	e.mustSQL("INSERT INTO nopk (a) VALUES (1), (2)")
	e.mustSQL("INSERT INTO nopk (a) SELECT a + 10 FROM nopk")
	var got string
	if err := e.db.Txn(context.Background(), kv.ReadCommitted, func(ctx context.Context, txn *kv.Txn) error {
		txn.EnableWriteBuffering()
		x := e.context(txn)
		for _, q := range []string{"INSERT INTO nopk (a) VALUES (100)", "INSERT INTO nopk VALUES (101)"} {
			p, err := bind(ctx, x, q)
			if err != nil {
				return err
			}
			rs, err := Start(ctx, x, p)
			if err != nil {
				return err
			}
			for {
				row, err := rs.Next(ctx)
				if err != nil {
					rs.Close()
					return err
				}
				if row == nil {
					break
				}
			}
			rs.Close()
		}
		if n := txn.BufferedWrites(); n != 2 {
			t.Errorf("%d keys buffered, want 2", n)
		}
		p, err := bind(ctx, x, "SELECT count(*), sum(a) FROM nopk")
		if err != nil {
			return err
		}
		rs, err := Start(ctx, x, p)
		if err != nil {
			return err
		}
		defer rs.Close()
		row, err := rs.Next(ctx)
		if err != nil {
			return err
		}
		got = fmtRow(row)
		return nil
	}); err != nil {
		t.Fatal(describeErr(err))
	}
	if want := "(6,227)"; got != want {
		t.Errorf("inside the transaction: count, sum = %s, want %s", got, want)
	}
	if out, _ := e.mustSQL("SELECT count(*), sum(a) FROM nopk"); out != "(6,227)" {
		t.Errorf("after commit: count, sum = %s, want (6,227)", out)
	}
	e.mustSQL("INSERT INTO nopk (a, rowid) VALUES (7, 42)")
	_, _, err := e.sql("INSERT INTO nopk (a, rowid) VALUES (8, 42)")
	expectErr(t, err, pgerrcode.UniqueViolation, `duplicate key value violates unique constraint "nopk_pkey"`, "Key (rowid)=(42) already exists.")
}

// TestTableInfoPositions: a statement's tableInfo finds each column at
// its position in the descriptor's rows through the table's shared
// layout, and builds no position map of its own (each DML statement made
// one: two allocations of pgbench's UPDATE and INSERT each).
func TestTableInfoPositions(t *testing.T) {
	e := newDMLEnv(t)
	e.create(tTable(), nopkTable())
	for _, q := range []string{"INSERT INTO t (a, c) VALUES (9, 5)", "INSERT INTO nopk (a) VALUES (1)"} {
		if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			x := e.context(txn)
			p, err := bind(ctx, x, q)
			if err != nil {
				return err
			}
			desc := p.Root.(*plan.Insert).Table
			ti, err := newDMLState(x, nil).table(desc)
			if err != nil {
				return err
			}
			for i, c := range desc.Columns {
				if p, ok := ti.colPos(c.ID); !ok || p != i {
					t.Errorf("%s: column %s at %d, %v; want %d", desc.Name, c.Name, p, ok, i)
				}
			}
			if p, ok := ti.colPos(9999); ok {
				t.Errorf("%s: column 9999 at %d", desc.Name, p)
			}
			if raceEnabled {
				return nil
			}
			n := testing.AllocsPerRun(50, func() {
				if _, err := newDMLState(x, nil).table(desc); err != nil {
					t.Fatal(err)
				}
			})
			// nopk's: the tableInfo, its types context's copy, the
			// RowWriter's closures; t's also compiles its checks and
			// foreign keys.
			if want := map[string]float64{"nopk": 4}[desc.Name]; want > 0 && n > want {
				t.Errorf("%s: table() made %v allocations, want at most %v", desc.Name, n, want)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// typesCounter is a session's evaluation context that counts the times
// the statement asked for its type context (which a session makes with a
// reg* resolver over the catalog).
type typesCounter struct {
	builtins.FixedContext
	n int
}

func (c *typesCounter) Types() *types.Context { c.n++; return c.FixedContext.Types() }

// TestDMLTypesContextOnDemand: a DML statement asks the session for its
// type context only when it builds an expression from a descriptor's
// text (a partial index's predicate, a computed column): pgbench's UPDATE
// and INSERT, whose tables have neither, ask for none (each DML statement
// asked once, and the session made its reg* resolver for it).
func TestDMLTypesContextOnDemand(t *testing.T) {
	e := newDMLEnv(t)
	e.create(tTable(), nopkTable())
	for _, tc := range []struct {
		sql  string
		asks bool
	}{
		{"INSERT INTO nopk (a) VALUES (1)", false},
		{"UPDATE nopk SET a = a + 1 WHERE a = 1", false},
		{"INSERT INTO t (a, c) VALUES (9, 11)", true},
	} {
		fn := &typesCounter{}
		if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			fn.n = 0
			x := e.context(txn)
			p, err := bind(ctx, x, tc.sql)
			if err != nil {
				return err
			}
			x.Eval = &sem.EvalContext{Fn: fn}
			rs, err := Start(ctx, x, p)
			if err != nil {
				return err
			}
			defer rs.Close()
			for {
				row, err := rs.Next(ctx)
				if err != nil || row == nil {
					return err
				}
			}
		}); err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if got := fn.n > 0; got != tc.asks {
			t.Errorf("%s: asked for the type context %d times, want asks=%v", tc.sql, fn.n, tc.asks)
		}
	}
}

// rowsOp returns its rows, then nil.
type rowsOp struct {
	rows [][]types.Datum
	i    int
}

func (o *rowsOp) Next(context.Context) ([]types.Datum, error) {
	if o.i >= len(o.rows) {
		return nil, nil
	}
	o.i++
	return o.rows[o.i-1], nil
}
func (o *rowsOp) Close() {}

// TestEachTargetOnce: an UPDATE or DELETE visits each target row once,
// however often its input returns it, and a one-row input (pgbench's
// UPDATE) makes no map of the keys it has seen.
func TestEachTargetOnce(t *testing.T) {
	e := newDMLEnv(t)
	e.create(nopkTable())
	row := func(a, id int64) []types.Datum { return []types.Datum{types.DInt(a), types.DInt(id)} }
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		x := e.context(txn)
		p, err := bind(ctx, x, "INSERT INTO nopk (a) VALUES (1)")
		if err != nil {
			return err
		}
		ti, err := newDMLState(x, nil).table(p.Root.(*plan.Insert).Table)
		if err != nil {
			return err
		}
		visit := func(in [][]types.Datum) []int64 {
			var got []int64
			o := &dmlOp{input: &rowsOp{rows: in}}
			if err := o.eachTarget(ctx, ti, 2, []int{0, 1}, func(old, _ []types.Datum) error {
				got = append(got, int64(old[1].(types.DInt)))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := visit([][]types.Datum{row(1, 10), row(2, 20), row(1, 10), row(3, 30), row(2, 20)}); !slices.Equal(got, []int64{10, 20, 30}) {
			t.Errorf("visited %v, want [10 20 30]", got)
		}
		if got := visit([][]types.Datum{row(1, 10)}); !slices.Equal(got, []int64{10}) {
			t.Errorf("visited %v, want [10]", got)
		}
		if raceEnabled {
			return nil
		}
		one := [][]types.Datum{row(1, 10)}
		fn := func(_, _ []types.Datum) error { return nil }
		// The test's input, the input's copies (the slice of rows, the
		// row), the old row and its key, and the key's conversion to a
		// string: 6 (7 with the map of seen keys).
		if n := testing.AllocsPerRun(100, func() {
			o := dmlOp{input: &rowsOp{rows: one}}
			if err := o.eachTarget(ctx, ti, 2, []int{0, 1}, fn); err != nil {
				t.Fatal(err)
			}
		}); n > 6 {
			t.Errorf("one target row: %v allocations, want at most 6", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
