package exec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// env is one node with the catalog bootstrapped, shared by a test's
// subtests.
type env struct {
	t      testing.TB
	db     *kv.DB
	node   *testcluster.Node
	nextID sem.ColumnID
}

func newEnv(t testing.TB) *env {
	t.Helper()
	n := testcluster.StartNode(t, testcluster.Options{})
	e := &env{t: t, db: n.DB, node: n, nextID: 100}
	e.txn(func(ctx context.Context, txn *kv.Txn) error { return catalog.Bootstrap(ctx, txn, "") })
	return e
}

func (e *env) txn(f func(ctx context.Context, txn *kv.Txn) error) {
	e.t.Helper()
	if err := e.db.Txn(context.Background(), kv.Serializable, f); err != nil {
		e.t.Fatal(err)
	}
}

// tableSpec describes a test table: columns "name type", the primary key
// (column names, "-name" for DESC), secondary indexes and how it is laid out.
type tableSpec struct {
	name    string
	cols    []string // "a int8"; all nullable except the key
	pk      []string
	indexes [][]string // each: key columns, then "+col" stored columns
	hash    int        // hash-partitioned on this many leading PK columns
	packed  bool
	global  bool // secondary indexes are global
}

func (e *env) createTable(s tableSpec, rows ...[]types.Datum) *catalog.Table {
	e.t.Helper()
	tbl := &catalog.Table{DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: s.name,
		RowFormat: catalog.RowFormat{Packed: s.packed, SchemaVersion: 1}}
	byName := map[string]rowenc.ColumnID{}
	for i, c := range s.cols {
		f := strings.Fields(c)
		typ, err := types.LookupName(f[1])
		if err != nil {
			e.t.Fatal(err)
		}
		id := rowenc.ColumnID(i + 1)
		byName[f[0]] = id
		tbl.Columns = append(tbl.Columns, catalog.Column{ID: id, Name: f[0], Type: typ, Nullable: true})
	}
	keyOf := func(names []string) (ids []rowenc.ColumnID, dirs []rowenc.Order, store []rowenc.ColumnID) {
		for _, n := range names {
			switch {
			case strings.HasPrefix(n, "+"):
				store = append(store, byName[n[1:]])
			case strings.HasPrefix(n, "-"):
				ids, dirs = append(ids, byName[n[1:]]), append(dirs, rowenc.Desc)
			default:
				ids, dirs = append(ids, byName[n]), append(dirs, rowenc.Asc)
			}
		}
		return
	}
	ids, dirs, _ := keyOf(s.pk)
	tbl.PrimaryIndex = catalog.Index{ID: catalog.PrimaryIndexID, Name: s.name + "_pkey", Unique: true, KeyColumnIDs: ids, KeyDirections: dirs, Kind: catalog.IndexBTree, State: catalog.IndexPublic}
	for _, id := range ids {
		tbl.Columns[id-1].Nullable = false
	}
	for i, ix := range s.indexes {
		ids, dirs, store := keyOf(ix)
		idx := catalog.Index{Name: fmt.Sprintf("%s_idx%d", s.name, i), KeyColumnIDs: ids, KeyDirections: dirs, StoreColumnIDs: store, Kind: catalog.IndexBTree, State: catalog.IndexPublic, Placement: catalog.IndexLocal}
		if s.global {
			idx.Placement = catalog.IndexGlobal
		}
		tbl.Indexes = append(tbl.Indexes, idx)
	}
	if s.hash > 0 {
		tbl.Partitioning = catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: s.hash}
	}
	var out *catalog.Table
	e.txn(func(ctx context.Context, txn *kv.Txn) error {
		if err := catalog.NewWriter(txn, nil).Create(ctx, tbl); err != nil {
			return err
		}
		var err error
		out, err = catalog.NewReader(txn, nil).Table(ctx, catalog.PostgresDatabaseID, catalog.PublicSchemaID, s.name)
		return err
	})
	e.insert(out, rows...)
	return out
}

func (e *env) insert(tbl *catalog.Table, rows ...[]types.Datum) {
	e.t.Helper()
	l, err := tbl.Layout()
	if err != nil {
		e.t.Fatal(err)
	}
	e.txn(func(ctx context.Context, txn *kv.Txn) error {
		w := &rowenc.RowWriter{Table: l, PackedRows: tbl.RowFormat.Packed}
		b := &kv.Batch{}
		for _, r := range rows {
			if err := w.Insert(b, r); err != nil {
				return err
			}
		}
		return l.ConvertWriteError(txn.Run(ctx, b))
	})
}

// col allocates a plan column.
func (e *env) col(name string, t *types.T) plan.Column {
	e.nextID++
	return plan.Column{ID: e.nextID, Name: name, T: t}
}

// scan builds a Scan of the named table columns (through index idx, nil:
// primary).
func (e *env) scan(tbl *catalog.Table, idx *catalog.Index, names ...string) *plan.Scan {
	s := &plan.Scan{Table: tbl, Index: idx}
	for _, n := range names {
		c := tbl.ColumnByName(n)
		if c == nil {
			e.t.Fatalf("no column %s", n)
		}
		pc := e.col(n, c.Type)
		pc.Table, pc.TableCol = tbl.ID, c.ID
		s.Cols = append(s.Cols, pc)
		s.TableCols = append(s.TableCols, c.ID)
	}
	return s
}

// run runs p in one transaction and returns its rows formatted one per
// line ("1 one NULL").
func (e *env) run(p *plan.Plan, stats *Stats, params ...types.Datum) (string, error) {
	var out string
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		rs, err := Start(ctx, &Context{Txn: txn, Eval: &sem.EvalContext{Params: params}, Stats: stats}, p)
		if err != nil {
			return err
		}
		defer rs.Close()
		out, err = drainRows(ctx, rs)
		return err
	})
	return out, err
}

// drainRows reads rs to its end and returns its rows formatted one per
// line ("1 one NULL").
func drainRows(ctx context.Context, rs Rows) (string, error) {
	var sb strings.Builder
	for {
		row, err := rs.Next(ctx)
		if err != nil {
			return "", err
		}
		if row == nil {
			return sb.String(), nil
		}
		for i, d := range row {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(d.String())
		}
		sb.WriteByte('\n')
	}
}

func (e *env) mustRun(root plan.Node, subs ...*plan.Subquery) string {
	e.t.Helper()
	out, err := e.run(&plan.Plan{Root: root, Subqueries: subs}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func ints(vs ...int64) []types.Datum {
	out := make([]types.Datum, len(vs))
	for i, v := range vs {
		out[i] = types.DInt(v)
	}
	return out
}

func ref(c plan.Column) *sem.ColRef { return &sem.ColRef{ID: c.ID, T: c.T, Name: c.Name} }

func cint(v int64) *sem.Const { return &sem.Const{Datum: types.DInt(v), T: types.Int8} }

func lines(rows ...string) string {
	if len(rows) == 0 {
		return ""
	}
	return strings.Join(rows, "\n") + "\n"
}

// colScope resolves names to plan columns (the first column of that name).
type colScope []plan.Column

func (s colScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	name := fields[len(fields)-1]
	for _, c := range s {
		if c.Name == name {
			return c.ID, c.T, c.Name, nil
		}
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

// expr builds a scalar expression over cols from SQL text.
func (e *env) expr(sql string, cols ...plan.Column) sem.Expr {
	e.t.Helper()
	stmts, err := parser.Parse("SELECT " + sql)
	if err != nil {
		e.t.Fatal(err)
	}
	node := stmts[0].AST.Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
	x, err := sem.Build(sem.BuildContext{Scope: colScope(cols), Params: sem.NewParamTypes(types.Int8), AllowAggregates: true, AllowWindows: true}, node, nil)
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return x
}

// agg builds an aggregate call (e.g. "sum(a) FILTER (WHERE b > 1)").
func (e *env) agg(sql string, cols ...plan.Column) plan.Aggregate {
	e.t.Helper()
	a := sem.Aggregates(e.expr(sql, cols...))[0]
	return plan.Aggregate{Fn: a.Fn, Name: a.Name, Args: a.Args, Star: a.Star, Distinct: a.Distinct, Filter: a.Filter}
}

// vals builds a Values node: names are the columns, each row is a
// comma-separated list of SQL expressions ("1, 'x', NULL::int8").
func (e *env) vals(names string, rows ...string) *plan.Values {
	e.t.Helper()
	v := &plan.Values{}
	for ri, row := range rows {
		stmts, err := parser.Parse("SELECT " + row)
		if err != nil {
			e.t.Fatal(err)
		}
		var exprs []sem.Expr
		for _, tgt := range stmts[0].AST.Stmt.GetSelectStmt().TargetList {
			x, err := sem.Build(sem.BuildContext{}, tgt.GetResTarget().Val, nil)
			if err != nil {
				e.t.Fatalf("%s: %v", row, err)
			}
			exprs = append(exprs, x)
		}
		if ri == 0 {
			for i, n := range strings.Split(names, ",") {
				v.Cols = append(v.Cols, e.col(strings.TrimSpace(n), exprs[i].Type()))
			}
		}
		v.Rows = append(v.Rows, exprs)
	}
	return v
}

func builtinsDefaultFrame() builtins.Frame { return builtins.DefaultFrame }
