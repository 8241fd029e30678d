package exec

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// The DML tests run plans built by hand (the binder's shape, per
// plan.go) against a real node with a bootstrapped catalog, and read the
// results back from KV with a RowFetcher-based scan. Expected errors are
// PostgreSQL 15's messages, details and SQLSTATEs.

type dmlEnv struct {
	t  *testing.T
	db *kv.DB
}

func newDMLEnv(t *testing.T) *dmlEnv {
	t.Helper()
	db := testcluster.StartNode(t, testcluster.Options{}).DB
	if err := db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		return catalog.Bootstrap(ctx, txn, "")
	}); err != nil {
		t.Fatal(err)
	}
	return &dmlEnv{t: t, db: db}
}

// create stores tables (in order, so later ones may reference earlier
// ones' IDs, which create assigns) and returns their IDs.
func (e *dmlEnv) create(tables ...*catalog.Table) {
	e.t.Helper()
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		w := catalog.NewWriter(txn, nil)
		for _, tb := range tables {
			if err := w.Create(ctx, tb); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// table reads a table's current descriptor.
func (e *dmlEnv) table(id catalog.ID) *catalog.Table {
	e.t.Helper()
	var tb *catalog.Table
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) (err error) {
		tb, err = catalog.NewReader(txn, nil).TableByID(ctx, id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return tb
}

func (e *dmlEnv) context(txn *kv.Txn) *Context {
	r := catalog.NewReader(txn, nil)
	return &Context{Txn: txn, Eval: &sem.EvalContext{}, Catalog: r, PackedRows: true,
		Virtual: &plan.VirtualEnv{Txn: txn, Catalog: r}}
}

// exec runs p in its own transaction and returns its rows and count
// (execKept, dml_keep_test.go, without kept shapes or parameters).
func (e *dmlEnv) exec(p *plan.Plan) ([][]types.Datum, int64, error) {
	return e.execKept(p, nil)
}

func (e *dmlEnv) mustExec(p *plan.Plan) ([][]types.Datum, int64) {
	e.t.Helper()
	rows, n, err := e.exec(p)
	if err != nil {
		e.t.Fatalf("%s: %v", p.Tag, describeErr(err))
	}
	return rows, n
}

// rows reads every row of table id, formatted one string per row.
func (e *dmlEnv) rows(id catalog.ID) string {
	e.t.Helper()
	var out []string
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		out = nil
		s := newDMLState(e.context(txn), nil)
		ti, err := s.tableByID(ctx, id)
		if err != nil {
			return err
		}
		return s.scanAll(ctx, ti, func(row []types.Datum) error {
			out = append(out, fmtRow(row))
			return nil
		})
	}); err != nil {
		e.t.Fatal(err)
	}
	return strings.Join(out, " ")
}

// indexEntries counts the entries of index name of table id.
func (e *dmlEnv) indexEntries(id catalog.ID, name string) int {
	e.t.Helper()
	tb := e.table(id)
	l, err := tb.Layout()
	if err != nil {
		e.t.Fatal(err)
	}
	var idx *rowenc.IndexLayout
	for i := range l.Secondary {
		if l.Secondary[i].Name == name {
			idx = &l.Secondary[i]
		}
	}
	if idx == nil {
		e.t.Fatalf("no index %q", name)
	}
	span := l.IndexSpan(idx)
	n := 0
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		kvs, err := txn.Scan(ctx, span.Key, span.EndKey, 0)
		n = len(kvs)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func fmtRow(row []types.Datum) string {
	parts := make([]string, len(row))
	for i, d := range row {
		if types.IsNull(d) {
			parts[i] = "NULL"
		} else {
			parts[i] = d.String()
		}
	}
	return "(" + strings.Join(parts, ",") + ")"
}

func fmtRows(rows [][]types.Datum) string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmtRow(r)
	}
	return strings.Join(out, " ")
}

func describeErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	pe := pgerror.Flatten(err)
	s := pe.Code + " " + pe.Message
	if pe.Detail != "" {
		s += " | " + pe.Detail
	}
	if pe.Where != "" {
		s += " | CONTEXT: " + pe.Where
	}
	return s
}

// expectErr fails unless err has code, message and (when given) detail.
func expectErr(t *testing.T, err error, code, msg, detail string) {
	t.Helper()
	want := code + " " + msg
	if detail != "" {
		want += " | " + detail
	}
	if got := describeErr(err); got != want {
		t.Errorf("error:\n got %s\nwant %s", got, want)
	}
}

// --- building plans by hand ---

// planCols gives the columns of a table names' IDs starting at base.
type planScope struct {
	names []string
	ids   []sem.ColumnID
	typs  []*types.T
}

func (s planScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	name := fields[len(fields)-1]
	qual := ""
	if len(fields) == 2 {
		qual = fields[0]
	}
	for i, n := range s.names {
		if n == name || n == qual+"."+name {
			return s.ids[i], s.typs[i], name, nil
		}
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

// tableScope returns a scope over tb's columns with IDs base+i, and
// those IDs.
func scopeOf(tb *catalog.Table, base sem.ColumnID, prefix string) (planScope, []sem.ColumnID) {
	var s planScope
	for i, c := range tb.Columns {
		s.names = append(s.names, prefix+c.Name)
		s.ids = append(s.ids, base+sem.ColumnID(i))
		s.typs = append(s.typs, c.Type)
	}
	return s, s.ids
}

func mustExpr(t *testing.T, scope sem.Scope, sql string, want *types.T) sem.Expr {
	t.Helper()
	stmts, err := parser.Parse("SELECT " + sql)
	if err != nil {
		t.Fatal(err)
	}
	node := stmts[0].AST.GetStmt().GetSelectStmt().TargetList[0].GetResTarget().GetVal()
	e, err := sem.Build(sem.BuildContext{Scope: scope}, node, want)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return e
}

func c(d types.Datum, t *types.T) sem.Expr { return &sem.Const{Datum: d, T: t} }

func i8(v int64) sem.Expr   { return c(types.DInt(v), types.Int8) }
func i4(v int64) sem.Expr   { return c(types.DInt(v), types.Int4) }
func txt(v string) sem.Expr { return c(types.DString(v), types.Text) }
func null(t *types.T) sem.Expr {
	return c(types.DNull, t)
}

// values is a Values node of rows over the table columns named, with
// IDs from base.
func values(tb *catalog.Table, names []string, base sem.ColumnID, rows ...[]sem.Expr) *plan.Values {
	v := &plan.Values{Rows: rows}
	for i, n := range names {
		col := tb.ColumnByName(n)
		v.Cols = append(v.Cols, plan.Column{ID: base + sem.ColumnID(i), Name: n, T: col.Type})
	}
	return v
}

// insertPlan is INSERT INTO tb (names) VALUES rows with the table's
// defaults, generated columns and checks built from its descriptor text
// as the binder would (new-row IDs from 100).
func insertPlan(t *testing.T, tb *catalog.Table, names []string, rows ...[]sem.Expr) (*plan.Insert, *plan.Plan) {
	scope, ids := scopeOf(tb, 100, "")
	ins := &plan.Insert{Table: tb, Input: values(tb, names, 1, rows...), TableCols: ids,
		Defaults: make([]sem.Expr, len(tb.Columns)), Computed: make([]sem.Expr, len(tb.Columns))}
	for _, n := range names {
		ins.InsertCols = append(ins.InsertCols, tb.ColumnByName(n).ID)
	}
	for i, col := range tb.Columns {
		if col.DefaultExpr != "" && !slices.Contains(names, col.Name) {
			ins.Defaults[i] = mustExpr(t, nil, col.DefaultExpr, col.Type)
		}
		if col.ComputedExpr != "" {
			ins.Computed[i] = mustExpr(t, scope, col.ComputedExpr, col.Type)
		}
	}
	for _, ck := range tb.Checks {
		ins.Checks = append(ins.Checks, plan.Check{Name: ck.Name, Expr: mustExpr(t, scope, ck.Expr, types.Bool)})
	}
	return ins, &plan.Plan{Root: ins, Tag: "INSERT"}
}

// returning adds RETURNING exprs (SQL over the new row's names) to p.
func returning(t *testing.T, tb *catalog.Table, ids []sem.ColumnID, sqls ...string) *plan.Returning {
	scope := planScope{}
	for i, col := range tb.Columns {
		scope.names = append(scope.names, col.Name)
		scope.ids = append(scope.ids, ids[i])
		scope.typs = append(scope.typs, col.Type)
	}
	r := &plan.Returning{}
	for i, s := range sqls {
		e := mustExpr(t, scope, s, nil)
		r.Exprs = append(r.Exprs, e)
		r.Cols = append(r.Cols, plan.Column{ID: sem.ColumnID(900 + i), Name: s, T: e.Type()})
	}
	return r
}

// updatePlan is UPDATE tb SET setNames = ... over the given old rows
// (full rows as Values) and new values.
func updatePlan(t *testing.T, tb *catalog.Table, setNames []string, rows ...[]sem.Expr) (*plan.Update, *plan.Plan) {
	var names []string
	for _, col := range tb.Columns {
		names = append(names, col.Name)
	}
	in := values(tb, names, 1, rows...)
	up := &plan.Update{Table: tb, Input: in}
	for i := range tb.Columns {
		up.FetchCols = append(up.FetchCols, sem.ColumnID(1+i))
	}
	for i, n := range setNames {
		col := tb.ColumnByName(n)
		id := sem.ColumnID(50 + i)
		in.Cols = append(in.Cols, plan.Column{ID: id, Name: n, T: col.Type})
		up.SetCols = append(up.SetCols, col.ID)
		up.NewCols = append(up.NewCols, id)
	}
	scope, ids := scopeOf(tb, 100, "")
	up.TableCols = ids
	up.Computed = make([]sem.Expr, len(tb.Columns))
	for i, col := range tb.Columns {
		if col.ComputedExpr != "" {
			up.Computed[i] = mustExpr(t, scope, col.ComputedExpr, col.Type)
		}
	}
	for _, ck := range tb.Checks {
		up.Checks = append(up.Checks, plan.Check{Name: ck.Name, Expr: mustExpr(t, scope, ck.Expr, types.Bool)})
	}
	return up, &plan.Plan{Root: up, Tag: "UPDATE"}
}

// deletePlan is DELETE of the given full rows.
func deletePlan(tb *catalog.Table, rows ...[]sem.Expr) (*plan.Delete, *plan.Plan) {
	var names []string
	for _, col := range tb.Columns {
		names = append(names, col.Name)
	}
	del := &plan.Delete{Table: tb, Input: values(tb, names, 1, rows...)}
	for i := range tb.Columns {
		del.FetchCols = append(del.FetchCols, sem.ColumnID(1+i))
	}
	return del, &plan.Plan{Root: del, Tag: "DELETE"}
}

func pk(name string, cols ...rowenc.ColumnID) catalog.Index {
	dirs := make([]rowenc.Order, len(cols))
	return catalog.Index{ID: catalog.PrimaryIndexID, Name: name, Unique: true, KeyColumnIDs: cols, KeyDirections: dirs}
}

func secondary(id catalog.IndexID, name string, unique bool, pred string, cols ...rowenc.ColumnID) catalog.Index {
	dirs := make([]rowenc.Order, len(cols))
	return catalog.Index{ID: id, Name: name, Unique: unique, KeyColumnIDs: cols, KeyDirections: dirs, Predicate: pred}
}

func newTable(name string, cols ...catalog.Column) *catalog.Table {
	for i := range cols {
		cols[i].ID = rowenc.ColumnID(i + 1)
	}
	return &catalog.Table{DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: name,
		Columns: cols, RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1}}
}

// tTable is
//
//	t(a int8 PRIMARY KEY, b text NOT NULL DEFAULT 'dflt', c int4 CHECK (c > 0),
//	  d int8 GENERATED ALWAYS AS (c * 2) STORED)
//	t_b_key UNIQUE (b); t_c_part (c) WHERE c > 10
func tTable() *catalog.Table {
	tb := newTable("t",
		catalog.Column{Name: "a", Type: types.Int8},
		catalog.Column{Name: "b", Type: types.Text, DefaultExpr: "'dflt'"},
		catalog.Column{Name: "c", Type: types.Int4, Nullable: true},
		catalog.Column{Name: "d", Type: types.Int8, Nullable: true, ComputedExpr: "c * 2", Stored: true},
	)
	tb.PrimaryIndex = pk("t_pkey", 1)
	tb.Indexes = []catalog.Index{secondary(2, "t_b_key", true, "", 2), secondary(3, "t_c_part", false, "c > 10", 3)}
	tb.Checks = []catalog.Check{{Name: "t_c_check", Expr: "c > 0"}}
	return tb
}

func TestInsert(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)

	ins, p := insertPlan(t, tb, []string{"a", "c"}, []sem.Expr{i8(1), i4(5)})
	ins.Returning = returning(t, tb, ins.TableCols, "a", "b", "d", "d + a")
	p.Columns = ins.Returning.Cols
	rows, n := e.mustExec(p)
	if got, want := fmtRows(rows), "(1,dflt,10,11)"; got != want || n != 1 {
		t.Errorf("RETURNING = %s (%d rows), want %s (1)", got, n, want)
	}
	// A second row with b's default collides with the first on t_b_key.
	_, p = insertPlan(t, tb, []string{"a", "c"}, []sem.Expr{i8(2), i4(20)})
	_, _, err := e.exec(p)
	expectErr(t, err, pgerrcode.UniqueViolation, `duplicate key value violates unique constraint "t_b_key"`, "Key (b)=(dflt) already exists.")
	_, p = insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(3), txt("x"), i4(30)}, []sem.Expr{i8(4), txt("y"), null(types.Int4)})
	if rows, n := e.mustExec(p); n != 2 || rows != nil {
		t.Errorf("INSERT without RETURNING: count %d, rows %v", n, rows)
	}
	if got, want := e.rows(tb.ID), "(1,dflt,5,10) (3,x,30,60) (4,y,NULL,NULL)"; got != want {
		t.Errorf("table holds %s, want %s", got, want)
	}
}

// TestInsertDefaultsAndBatches inserts more rows than one batch holds and
// checks every row, the generated column and the partial index.
func TestInsertBatchesAndPartialIndex(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	var rows [][]sem.Expr
	const n = 2500
	for i := 1; i <= n; i++ {
		rows = append(rows, []sem.Expr{i8(int64(i)), txt(fmt.Sprintf("b%d", i)), i4(int64(i%20 + 1))})
	}
	_, p := insertPlan(t, tb, []string{"a", "b", "c"}, rows...)
	if _, cnt := e.mustExec(p); cnt != n {
		t.Fatalf("count = %d, want %d", cnt, n)
	}
	got := strings.Split(e.rows(tb.ID), " ")
	if len(got) != n {
		t.Fatalf("read %d rows, want %d", len(got), n)
	}
	for i, r := range got {
		a := i + 1
		c := a%20 + 1
		if want := fmt.Sprintf("(%d,b%d,%d,%d)", a, a, c, 2*c); r != want {
			t.Fatalf("row %d = %s, want %s", i, r, want)
		}
	}
	// c > 10 holds for c in 11..20: half of every 20 rows.
	if got := e.indexEntries(tb.ID, "t_c_part"); got != n/2 {
		t.Errorf("partial index entries = %d, want %d", got, n/2)
	}
	if got := e.indexEntries(tb.ID, "t_b_key"); got != n {
		t.Errorf("unique index entries = %d, want %d", got, n)
	}
}

func TestInsertErrors(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	_, p := insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(1), txt("x"), i4(5)})
	e.mustExec(p)

	for _, tc := range []struct {
		name              string
		cols              []string
		rows              [][]sem.Expr
		code, msg, detail string
	}{
		{"not null", []string{"a", "b", "c"}, [][]sem.Expr{{i8(5), null(types.Text), i4(3)}},
			pgerrcode.NotNullViolation, `null value in column "b" of relation "t" violates not-null constraint`,
			"Failing row contains (5, null, 3, 6)."},
		{"not null pk", []string{"b"}, [][]sem.Expr{{txt("q")}},
			pgerrcode.NotNullViolation, `null value in column "a" of relation "t" violates not-null constraint`,
			"Failing row contains (null, q, null, null)."},
		{"check", []string{"a", "b", "c"}, [][]sem.Expr{{i8(5), txt("z"), i4(-1)}},
			pgerrcode.CheckViolation, `new row for relation "t" violates check constraint "t_c_check"`,
			"Failing row contains (5, z, -1, -2)."},
		{"duplicate pk", []string{"a", "b"}, [][]sem.Expr{{i8(1), txt("other")}},
			pgerrcode.UniqueViolation, `duplicate key value violates unique constraint "t_pkey"`,
			"Key (a)=(1) already exists."},
		{"duplicate unique", []string{"a", "b"}, [][]sem.Expr{{i8(7), txt("x")}},
			pgerrcode.UniqueViolation, `duplicate key value violates unique constraint "t_b_key"`,
			"Key (b)=(x) already exists."},
		{"duplicate within statement", []string{"a", "b"}, [][]sem.Expr{{i8(8), txt("p")}, {i8(8), txt("q")}},
			pgerrcode.UniqueViolation, `duplicate key value violates unique constraint "t_pkey"`,
			"Key (a)=(8) already exists."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := insertPlan(t, tb, tc.cols, tc.rows...)
			_, _, err := e.exec(p)
			expectErr(t, err, tc.code, tc.msg, tc.detail)
		})
	}
	if got, want := e.rows(tb.ID), "(1,x,5,10)"; got != want {
		t.Errorf("after failed statements: %s, want %s", got, want)
	}
}

// fkTables are
//
//	p(id int8 PRIMARY KEY, u int8 UNIQUE)
//	c(a int8 PRIMARY KEY, pid int8 DEFAULT 0 REFERENCES p(id) ON DELETE del ON UPDATE upd)
//	  with c_pid_idx (pid)
//	c2(a int8 PRIMARY KEY, pu int8 REFERENCES p(u))   (no index on pu)
//
// holding p (0,0) (1,10) (2,20), c (1,1) (2,1) (3,2) (4,NULL) and c2 (1,10).
func fkTables(t *testing.T, e *dmlEnv, del, upd catalog.RefAction) (p, c, c2 *catalog.Table) {
	p = newTable("p", catalog.Column{Name: "id", Type: types.Int8}, catalog.Column{Name: "u", Type: types.Int8, Nullable: true})
	p.PrimaryIndex = pk("p_pkey", 1)
	p.Indexes = []catalog.Index{secondary(2, "p_u_key", true, "", 2)}
	e.create(p)
	c = newTable("c", catalog.Column{Name: "a", Type: types.Int8}, catalog.Column{Name: "pid", Type: types.Int8, Nullable: true, DefaultExpr: "0"})
	c.PrimaryIndex = pk("c_pkey", 1)
	c.Indexes = []catalog.Index{secondary(2, "c_pid_idx", false, "", 2)}
	c.ForeignKeys = []catalog.ForeignKey{{Name: "c_pid_fkey", ColumnIDs: []rowenc.ColumnID{2}, ReferencedTableID: p.ID,
		ReferencedColumnIDs: []rowenc.ColumnID{1}, OnDelete: del, OnUpdate: upd}}
	c2 = newTable("c2", catalog.Column{Name: "a", Type: types.Int8}, catalog.Column{Name: "pu", Type: types.Int8, Nullable: true})
	c2.PrimaryIndex = pk("c2_pkey", 1)
	c2.ForeignKeys = []catalog.ForeignKey{{Name: "c2_pu_fkey", ColumnIDs: []rowenc.ColumnID{2}, ReferencedTableID: p.ID,
		ReferencedColumnIDs: []rowenc.ColumnID{2}}}
	e.create(c, c2)
	p = e.table(p.ID)
	_, ip := insertPlan(t, p, []string{"id", "u"}, []sem.Expr{i8(0), i8(0)}, []sem.Expr{i8(1), i8(10)}, []sem.Expr{i8(2), i8(20)})
	e.mustExec(ip)
	_, ip = insertPlan(t, c, []string{"a", "pid"}, []sem.Expr{i8(1), i8(1)}, []sem.Expr{i8(2), i8(1)}, []sem.Expr{i8(3), i8(2)}, []sem.Expr{i8(4), null(types.Int8)})
	e.mustExec(ip)
	_, ip = insertPlan(t, c2, []string{"a", "pu"}, []sem.Expr{i8(1), i8(10)})
	e.mustExec(ip)
	return p, c, c2
}

func TestForeignKeyChild(t *testing.T) {
	e := newDMLEnv(t)
	p, c, c2 := fkTables(t, e, catalog.NoAction, catalog.NoAction)
	if len(p.ReferencedBy) != 2 {
		t.Fatalf("p.ReferencedBy = %v", p.ReferencedBy)
	}
	_, ip := insertPlan(t, c, []string{"a", "pid"}, []sem.Expr{i8(9), i8(99)})
	_, _, err := e.exec(ip)
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `insert or update on table "c" violates foreign key constraint "c_pid_fkey"`,
		`Key (pid)=(99) is not present in table "p".`)
	// Through the referenced unique (non-primary) index.
	_, ip = insertPlan(t, c2, []string{"a", "pu"}, []sem.Expr{i8(9), i8(30)})
	_, _, err = e.exec(ip)
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `insert or update on table "c2" violates foreign key constraint "c2_pu_fkey"`,
		`Key (pu)=(30) is not present in table "p".`)
	_, ip = insertPlan(t, c2, []string{"a", "pu"}, []sem.Expr{i8(9), i8(20)}, []sem.Expr{i8(10), null(types.Int8)})
	e.mustExec(ip)
	// An update that changes the key is checked; one that does not is not.
	_, up := updatePlan(t, c, []string{"pid"}, []sem.Expr{i8(3), i8(2), i8(42)})
	_, _, err = e.exec(up)
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `insert or update on table "c" violates foreign key constraint "c_pid_fkey"`,
		`Key (pid)=(42) is not present in table "p".`)
	_, up = updatePlan(t, c, []string{"pid"}, []sem.Expr{i8(3), i8(2), i8(1)})
	e.mustExec(up)
	if got, want := e.rows(c.ID), "(1,1) (2,1) (3,1) (4,NULL)"; got != want {
		t.Errorf("c = %s, want %s", got, want)
	}
	// A parent row referenced through its unique column.
	_, dp := deletePlan(c, []sem.Expr{i8(1), i8(1)}, []sem.Expr{i8(2), i8(1)}, []sem.Expr{i8(3), i8(1)})
	e.mustExec(dp)
	_, dp = deletePlan(p, []sem.Expr{i8(1), i8(10)})
	_, _, err = e.exec(dp)
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `update or delete on table "p" violates foreign key constraint "c2_pu_fkey" on table "c2"`,
		`Key (u)=(10) is still referenced from table "c2".`)
}

func TestForeignKeySelfReference(t *testing.T) {
	e := newDMLEnv(t)
	emp := newTable("emp", catalog.Column{Name: "id", Type: types.Int8}, catalog.Column{Name: "boss", Type: types.Int8, Nullable: true})
	emp.PrimaryIndex = pk("emp_pkey", 1)
	e.create(emp)
	emp = e.table(emp.ID)
	c := *emp
	c.ForeignKeys = []catalog.ForeignKey{{Name: "emp_boss_fkey", ColumnIDs: []rowenc.ColumnID{2}, ReferencedTableID: emp.ID,
		ReferencedColumnIDs: []rowenc.ColumnID{1}, OnDelete: catalog.Cascade}}
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		return catalog.NewWriter(txn, nil).Update(ctx, &c)
	}); err != nil {
		t.Fatal(err)
	}
	emp = e.table(emp.ID)
	// Rows of one statement may reference each other: the check runs at
	// the end of the statement.
	_, ip := insertPlan(t, emp, []string{"id", "boss"}, []sem.Expr{i8(1), i8(2)}, []sem.Expr{i8(2), null(types.Int8)}, []sem.Expr{i8(3), i8(1)})
	e.mustExec(ip)
	_, ip = insertPlan(t, emp, []string{"id", "boss"}, []sem.Expr{i8(4), i8(9)})
	_, _, err := e.exec(ip)
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `insert or update on table "emp" violates foreign key constraint "emp_boss_fkey"`,
		`Key (boss)=(9) is not present in table "emp".`)
	_, ip = insertPlan(t, emp, []string{"id", "boss"}, []sem.Expr{i8(5), null(types.Int8)})
	e.mustExec(ip)
	// Deleting 2 cascades to 1, whose deletion cascades to 3.
	del, dp := deletePlan(emp, []sem.Expr{i8(2), null(types.Int8)})
	del.Returning = returning(t, emp, del.FetchCols, "id")
	rows, n := e.mustExec(dp)
	if fmtRows(rows) != "(2)" || n != 1 {
		t.Errorf("DELETE RETURNING = %s, count %d; want (2), 1", fmtRows(rows), n)
	}
	if got, want := e.rows(emp.ID), "(5,NULL)"; got != want {
		t.Errorf("emp = %s, want %s", got, want)
	}
}

func TestForeignKeyActions(t *testing.T) {
	for _, tc := range []struct {
		action         catalog.RefAction
		afterDelete    string // c after DELETE FROM p WHERE id = 1 ("" : error)
		afterUpdate    string // c after UPDATE p SET id = 5 WHERE id = 2
		deleteErrOnKey string
	}{
		{catalog.NoAction, "", "", "1"},
		{catalog.Restrict, "", "", "1"},
		{catalog.Cascade, "(3,2) (4,NULL)", "(1,1) (2,1) (3,5) (4,NULL)", ""},
		{catalog.SetNull, "(1,NULL) (2,NULL) (3,2) (4,NULL)", "(1,1) (2,1) (3,NULL) (4,NULL)", ""},
		{catalog.SetDefault, "(1,0) (2,0) (3,2) (4,NULL)", "(1,1) (2,1) (3,0) (4,NULL)", ""},
	} {
		t.Run(string(tc.action)+"_delete", func(t *testing.T) {
			e := newDMLEnv(t)
			p, c, _ := fkTables(t, e, tc.action, tc.action)
			// c2 references p.u = 10 with NO ACTION: drop that row first.
			c2 := e.table(p.ReferencedBy[1])
			if c2.Name != "c2" {
				c2 = e.table(p.ReferencedBy[0])
			}
			_, d2 := deletePlan(c2, []sem.Expr{i8(1), i8(10)})
			e.mustExec(d2)
			_, dp := deletePlan(p, []sem.Expr{i8(1), i8(10)})
			_, _, err := e.exec(dp)
			if tc.afterDelete == "" {
				expectErr(t, err, pgerrcode.ForeignKeyViolation, `update or delete on table "p" violates foreign key constraint "c_pid_fkey" on table "c"`,
					`Key (id)=(1) is still referenced from table "c".`)
				return
			}
			if err != nil {
				t.Fatal(describeErr(err))
			}
			if got := e.rows(c.ID); got != tc.afterDelete {
				t.Errorf("c = %s, want %s", got, tc.afterDelete)
			}
		})
		t.Run(string(tc.action)+"_update", func(t *testing.T) {
			e := newDMLEnv(t)
			p, c, _ := fkTables(t, e, tc.action, tc.action)
			_, up := updatePlan(t, p, []string{"id"}, []sem.Expr{i8(2), i8(20), i8(5)})
			_, _, err := e.exec(up)
			if tc.afterUpdate == "" {
				expectErr(t, err, pgerrcode.ForeignKeyViolation, `update or delete on table "p" violates foreign key constraint "c_pid_fkey" on table "c"`,
					`Key (id)=(2) is still referenced from table "c".`)
				return
			}
			if err != nil {
				t.Fatal(describeErr(err))
			}
			if got := e.rows(c.ID); got != tc.afterUpdate {
				t.Errorf("c = %s, want %s", got, tc.afterUpdate)
			}
		})
	}
}

// TestForeignKeySetDefaultMissing: SET DEFAULT to a key the parent does
// not hold fails as the child's own check.
func TestForeignKeySetDefaultMissing(t *testing.T) {
	e := newDMLEnv(t)
	p, _, _ := fkTables(t, e, catalog.SetDefault, catalog.SetDefault)
	_, dp := deletePlan(p, []sem.Expr{i8(0), i8(0)})
	e.mustExec(dp)
	_, dp = deletePlan(p, []sem.Expr{i8(2), i8(20)})
	_, _, err := e.exec(dp)
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `insert or update on table "c" violates foreign key constraint "c_pid_fkey"`,
		`Key (pid)=(0) is not present in table "p".`)
}

// TestForeignKeyNoActionMovedKey: NO ACTION passes when the statement
// leaves a row holding the old key; RESTRICT does not.
func TestForeignKeyNoActionMovedKey(t *testing.T) {
	for _, tc := range []struct {
		action catalog.RefAction
		ok     bool
	}{{catalog.NoAction, true}, {catalog.Restrict, false}} {
		t.Run(string(tc.action), func(t *testing.T) {
			e := newDMLEnv(t)
			p, c, _ := fkTables(t, e, tc.action, tc.action)
			// c (3,2) must go so that only key 1 is referenced.
			_, dp := deletePlan(c, []sem.Expr{i8(3), i8(2)})
			e.mustExec(dp)
			// UPDATE p SET id = CASE id WHEN 1 THEN 7 ELSE 1 END WHERE id IN (1, 2)
			_, up := updatePlan(t, p, []string{"id"}, []sem.Expr{i8(1), i8(10), i8(7)}, []sem.Expr{i8(2), i8(20), i8(1)})
			_, _, err := e.exec(up)
			if tc.ok {
				if err != nil {
					t.Fatal(describeErr(err))
				}
				if got, want := e.rows(p.ID), "(0,0) (1,20) (7,10)"; got != want {
					t.Errorf("p = %s, want %s", got, want)
				}
				return
			}
			expectErr(t, err, pgerrcode.ForeignKeyViolation, `update or delete on table "p" violates foreign key constraint "c_pid_fkey" on table "c"`,
				`Key (id)=(1) is still referenced from table "c".`)
		})
	}
}

// onConflict builds ON CONFLICT DO UPDATE SET names = sqls WHERE where
// (SQL over t.<col> and excluded.<col>), arbiter the named index.
func onConflict(t *testing.T, tb *catalog.Table, arbiter string, names, sqls []string, where string) *plan.OnConflict {
	ex, exIDs := scopeOf(tb, 200, tb.Name+".")
	in, inIDs := scopeOf(tb, 300, "excluded.")
	both := planScope{names: append(ex.names, in.names...), ids: append(ex.ids, in.ids...), typs: append(ex.typs, in.typs...)}
	oc := &plan.OnConflict{Arbiter: tb.IndexByName(arbiter), ExistingCols: exIDs, ExcludedCols: inIDs}
	for i, n := range names {
		col := tb.ColumnByName(n)
		oc.SetCols = append(oc.SetCols, col.ID)
		oc.Set = append(oc.Set, mustExpr(t, both, sqls[i], col.Type))
	}
	if where != "" {
		oc.Where = mustExpr(t, both, where, types.Bool)
	}
	return oc
}

func TestOnConflict(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	_, p := insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(1), txt("x"), i4(5)}, []sem.Expr{i8(2), txt("y"), i4(6)})
	e.mustExec(p)

	// DO NOTHING without an arbiter: a conflict on any unique index skips
	// the row, and so does a duplicate within the statement.
	ins, p := insertPlan(t, tb, []string{"a", "b", "c"},
		[]sem.Expr{i8(1), txt("new"), i4(7)}, // pk conflict
		[]sem.Expr{i8(3), txt("x"), i4(7)},   // t_b_key conflict
		[]sem.Expr{i8(4), txt("z"), i4(8)},   // inserted
		[]sem.Expr{i8(4), txt("w"), i4(9)})   // conflicts with the row before
	ins.OnConflict = &plan.OnConflict{DoNothing: true}
	ins.Returning = returning(t, tb, ins.TableCols, "a")
	rows, n := e.mustExec(p)
	if fmtRows(rows) != "(4)" || n != 1 {
		t.Errorf("DO NOTHING: returned %s, count %d; want (4), 1", fmtRows(rows), n)
	}
	// DO NOTHING with an arbiter: other unique indexes still fail.
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(9), txt("x"), i4(7)})
	ins.OnConflict = &plan.OnConflict{DoNothing: true, Arbiter: tb.IndexByName("t_pkey")}
	_, _, err := e.exec(p)
	expectErr(t, err, pgerrcode.UniqueViolation, `duplicate key value violates unique constraint "t_b_key"`, "Key (b)=(x) already exists.")

	// DO UPDATE on the primary key: the update sees both rows, recomputes
	// the generated column and returns the new row; WHERE false skips.
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"},
		[]sem.Expr{i8(1), txt("ignored"), i4(100)},
		[]sem.Expr{i8(2), txt("ignored2"), i4(100)},
		[]sem.Expr{i8(5), txt("v"), i4(11)})
	ins.OnConflict = onConflict(t, tb, "t_pkey", []string{"c"}, []string{"t.c + excluded.c"}, "t.b <> 'y'")
	ins.Returning = returning(t, tb, ins.TableCols, "a", "b", "c", "d")
	rows, n = e.mustExec(p)
	if got, want := fmtRows(rows), "(1,x,105,210) (5,v,11,22)"; got != want || n != 2 {
		t.Errorf("DO UPDATE returned %s, count %d; want %s, 2", got, n, want)
	}
	// DO UPDATE through a unique secondary index.
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(50), txt("v"), i4(1)})
	ins.OnConflict = onConflict(t, tb, "t_b_key", []string{"b"}, []string{"excluded.b || '!'"}, "")
	e.mustExec(p)
	if got, want := e.rows(tb.ID), "(1,x,105,210) (2,y,6,12) (4,z,8,16) (5,v!,11,22)"; got != want {
		t.Errorf("table = %s, want %s", got, want)
	}
	// The update is checked like any other.
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(2), txt("q"), i4(1)})
	ins.OnConflict = onConflict(t, tb, "t_pkey", []string{"c"}, []string{"t.c - 100"}, "")
	_, _, err = e.exec(p)
	expectErr(t, err, pgerrcode.CheckViolation, `new row for relation "t" violates check constraint "t_c_check"`, "Failing row contains (2, y, -94, -188).")
	// A row proposed twice in one command.
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(7), txt("s"), i4(1)}, []sem.Expr{i8(7), txt("s2"), i4(2)})
	ins.OnConflict = onConflict(t, tb, "t_pkey", []string{"c"}, []string{"excluded.c"}, "")
	_, _, err = e.exec(p)
	expectErr(t, err, pgerrcode.CardinalityViolation, "ON CONFLICT DO UPDATE command cannot affect row a second time", "")
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(1), txt("s"), i4(1)}, []sem.Expr{i8(1), txt("s2"), i4(2)})
	ins.OnConflict = onConflict(t, tb, "t_pkey", []string{"c"}, []string{"excluded.c"}, "")
	_, _, err = e.exec(p)
	expectErr(t, err, pgerrcode.CardinalityViolation, "ON CONFLICT DO UPDATE command cannot affect row a second time", "")
}

func TestUpdateDelete(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	_, p := insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(1), txt("x"), i4(5)}, []sem.Expr{i8(2), txt("y"), i4(15)}, []sem.Expr{i8(3), txt("z"), i4(25)})
	e.mustExec(p)
	if got := e.indexEntries(tb.ID, "t_c_part"); got != 2 {
		t.Fatalf("partial index entries = %d, want 2", got)
	}
	// UPDATE t SET b = 'x2', c = 12 WHERE a = 1 RETURNING *; the row enters
	// the partial index, the generated column follows c, and the old
	// unique key is free again. The same target row twice counts once.
	old1 := []sem.Expr{i8(1), txt("x"), i4(5), i8(10)}
	up, p := updatePlan(t, tb, []string{"b", "c"}, append(old1, txt("x2"), i4(12)), append(old1, txt("x3"), i4(13)))
	up.Returning = returning(t, tb, up.TableCols, "a", "b", "c", "d")
	rows, n := e.mustExec(p)
	if got, want := fmtRows(rows), "(1,x2,12,24)"; got != want || n != 1 {
		t.Errorf("UPDATE returned %s, count %d; want %s, 1", got, n, want)
	}
	if got := e.indexEntries(tb.ID, "t_c_part"); got != 3 {
		t.Errorf("partial index entries after update = %d, want 3", got)
	}
	_, p = insertPlan(t, tb, []string{"a", "b", "c"}, []sem.Expr{i8(4), txt("x"), i4(1)})
	e.mustExec(p)

	// Errors.
	_, p = updatePlan(t, tb, []string{"c"}, []sem.Expr{i8(2), txt("y"), i4(15), i8(30), i4(0)})
	_, _, err := e.exec(p)
	expectErr(t, err, pgerrcode.CheckViolation, `new row for relation "t" violates check constraint "t_c_check"`, "Failing row contains (2, y, 0, 0).")
	_, p = updatePlan(t, tb, []string{"b"}, []sem.Expr{i8(2), txt("y"), i4(15), i8(30), null(types.Text)})
	_, _, err = e.exec(p)
	expectErr(t, err, pgerrcode.NotNullViolation, `null value in column "b" of relation "t" violates not-null constraint`, "Failing row contains (2, null, 15, 30).")
	_, p = updatePlan(t, tb, []string{"b"}, []sem.Expr{i8(2), txt("y"), i4(15), i8(30), txt("z")})
	_, _, err = e.exec(p)
	expectErr(t, err, pgerrcode.UniqueViolation, `duplicate key value violates unique constraint "t_b_key"`, "Key (b)=(z) already exists.")
	// Moving the primary key.
	_, p = updatePlan(t, tb, []string{"a"}, []sem.Expr{i8(3), txt("z"), i4(25), i8(50), i8(30)})
	e.mustExec(p)
	if got, want := e.rows(tb.ID), "(1,x2,12,24) (2,y,15,30) (4,x,1,2) (30,z,25,50)"; got != want {
		t.Errorf("after updates: %s, want %s", got, want)
	}

	del, p := deletePlan(tb, []sem.Expr{i8(2), txt("y"), i4(15), i8(30)}, []sem.Expr{i8(30), txt("z"), i4(25), i8(50)})
	del.Returning = returning(t, tb, del.FetchCols, "b", "d")
	rows, n = e.mustExec(p)
	if got, want := fmtRows(rows), "(y,30) (z,50)"; got != want || n != 2 {
		t.Errorf("DELETE returned %s, count %d; want %s, 2", got, n, want)
	}
	if got, want := e.rows(tb.ID), "(1,x2,12,24) (4,x,1,2)"; got != want {
		t.Errorf("after delete: %s, want %s", got, want)
	}
	if got := e.indexEntries(tb.ID, "t_c_part"); got != 1 {
		t.Errorf("partial index entries after delete = %d, want 1", got)
	}
	if got := e.indexEntries(tb.ID, "t_b_key"); got != 2 {
		t.Errorf("unique index entries after delete = %d, want 2", got)
	}
}

// TestForeignKeyBulk deletes many parents at once: the lookups of one
// statement's events are batched, and every child is reached once.
func TestForeignKeyBulk(t *testing.T) {
	e := newDMLEnv(t)
	p, c, c2 := fkTables(t, e, catalog.Cascade, catalog.SetNull)
	_, d2 := deletePlan(c2, []sem.Expr{i8(1), i8(10)})
	e.mustExec(d2)
	// More keys than one lookup batch holds (lookupChunk).
	const n = 2*lookupChunk + 100
	var prows, crows, dels, ups [][]sem.Expr
	for i := int64(100); i < 100+n; i++ {
		prows = append(prows, []sem.Expr{i8(i), i8(i * 10)})
		crows = append(crows, []sem.Expr{i8(i), i8(i)}, []sem.Expr{i8(i + 100000), i8(i)})
		if i%2 == 0 {
			dels = append(dels, []sem.Expr{i8(i), i8(i * 10)})
		} else {
			ups = append(ups, []sem.Expr{i8(i), i8(i * 10), i8(i + 5000)})
		}
	}
	_, ip := insertPlan(t, p, []string{"id", "u"}, prows...)
	e.mustExec(ip)
	_, ip = insertPlan(t, c, []string{"a", "pid"}, crows...)
	e.mustExec(ip)
	_, dp := deletePlan(p, dels...)
	if _, cnt := e.mustExec(dp); cnt != n/2 {
		t.Errorf("deleted %d parents, want %d", cnt, n/2)
	}
	_, up := updatePlan(t, p, []string{"id"}, ups...)
	e.mustExec(up)
	got := strings.Split(e.rows(c.ID), " ")
	// c keeps its four original rows, and the children of updated
	// parents with a NULL key; the children of deleted parents are gone.
	nulls := 0
	for _, r := range got {
		if strings.HasSuffix(r, ",NULL)") {
			nulls++
		}
	}
	if len(got) != 4+n || nulls != 1+n {
		t.Errorf("c has %d rows, %d with NULL keys; want %d and %d", len(got), nulls, 4+n, 1+n)
	}
}

// TestCheckOrder: with several CHECKs failing, PostgreSQL reports the
// first by name, whatever the order they were declared in.
func TestCheckOrder(t *testing.T) {
	e := newDMLEnv(t)
	tb := newTable("ck", catalog.Column{Name: "a", Type: types.Int8}, catalog.Column{Name: "c", Type: types.Int4, Nullable: true})
	tb.PrimaryIndex = pk("ck_pkey", 1)
	tb.Checks = []catalog.Check{{Name: "zz", Expr: "c > 0"}, {Name: "aa", Expr: "c > 1"}}
	e.create(tb)
	_, p := insertPlan(t, tb, []string{"a", "c"}, []sem.Expr{i8(1), i4(0)})
	_, _, err := e.exec(p)
	expectErr(t, err, pgerrcode.CheckViolation, `new row for relation "ck" violates check constraint "aa"`, "Failing row contains (1, 0).")
	// The same through the descriptor's own text (COPY).
	_, err = e.copyIn("COPY ck FROM STDIN", []byte("1\t0\n"))
	expectErr(t, err, pgerrcode.CheckViolation, `new row for relation "ck" violates check constraint "aa"`, "Failing row contains (1, 0). | CONTEXT: COPY ck, line 1")
}

// TestOnConflictChunks upserts more rows than one probe batch holds, with
// duplicates of earlier rows of the same statement far apart.
func TestOnConflictChunks(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	var pre [][]sem.Expr
	for a := int64(0); a < 400; a += 4 {
		pre = append(pre, []sem.Expr{i8(a), txt(fmt.Sprint("b", a)), i4(1)})
	}
	_, p := insertPlan(t, tb, []string{"a", "b", "c"}, pre...)
	e.mustExec(p)
	var rows [][]sem.Expr
	for i := int64(0); i < 600; i++ {
		a := i % 400
		rows = append(rows, []sem.Expr{i8(a), txt(fmt.Sprint("b", a)), i4(2)})
	}
	ins, p := insertPlan(t, tb, []string{"a", "b", "c"}, rows...)
	ins.OnConflict = &plan.OnConflict{DoNothing: true}
	if _, n := e.mustExec(p); n != 300 {
		t.Errorf("DO NOTHING inserted %d rows, want 300", n)
	}
	// Every key once: DO UPDATE touches all 400 rows.
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"}, rows[:400]...)
	ins.OnConflict = onConflict(t, tb, "t_pkey", []string{"c"}, []string{"t.c + 10"}, "")
	if _, n := e.mustExec(p); n != 400 {
		t.Errorf("DO UPDATE affected %d rows, want 400", n)
	}
	got := strings.Split(e.rows(tb.ID), " ")
	if len(got) != 400 {
		t.Fatalf("%d rows, want 400", len(got))
	}
	for _, r := range got {
		var a, c, d int
		var b string
		if _, err := fmt.Sscanf(strings.NewReplacer("(", "", ")", "", ",", " ").Replace(r), "%d %s %d %d", &a, &b, &c, &d); err != nil {
			t.Fatal(err)
		}
		want := 12
		if a%4 == 0 {
			want = 11
		}
		if c != want {
			t.Fatalf("row %s: c = %d, want %d", r, c, want)
		}
	}
	// A duplicate 300 rows later is still the same row twice.
	ins, p = insertPlan(t, tb, []string{"a", "b", "c"}, rows...)
	ins.OnConflict = onConflict(t, tb, "t_pkey", []string{"c"}, []string{"t.c + 10"}, "")
	_, _, err := e.exec(p)
	expectErr(t, err, pgerrcode.CardinalityViolation, "ON CONFLICT DO UPDATE command cannot affect row a second time", "")
}

// TestForeignKeyHashPartitioned: keys are found in hash-partitioned
// tables through the bucket the key fixes, or by a scan when it does not.
func TestForeignKeyHashPartitioned(t *testing.T) {
	e := newDMLEnv(t)
	hash := catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1}
	p := newTable("hp", catalog.Column{Name: "id", Type: types.Int8})
	p.PrimaryIndex = pk("hp_pkey", 1)
	p.Partitioning = hash
	e.create(p)
	// hc's primary key (pid, a) is hashed on pid, the foreign key; hc2's on
	// a, so its children of a key lie in any bucket.
	hc := newTable("hc", catalog.Column{Name: "pid", Type: types.Int8}, catalog.Column{Name: "a", Type: types.Int8})
	hc.PrimaryIndex = pk("hc_pkey", 1, 2)
	hc.Partitioning = hash
	hc.ForeignKeys = []catalog.ForeignKey{{Name: "hc_pid_fkey", ColumnIDs: []rowenc.ColumnID{1}, ReferencedTableID: p.ID,
		ReferencedColumnIDs: []rowenc.ColumnID{1}, OnDelete: catalog.Cascade}}
	hc2 := newTable("hc2", catalog.Column{Name: "a", Type: types.Int8}, catalog.Column{Name: "pid", Type: types.Int8, Nullable: true})
	hc2.PrimaryIndex = pk("hc2_pkey", 1)
	hc2.Partitioning = hash
	hc2.ForeignKeys = []catalog.ForeignKey{{Name: "hc2_pid_fkey", ColumnIDs: []rowenc.ColumnID{2}, ReferencedTableID: p.ID,
		ReferencedColumnIDs: []rowenc.ColumnID{1}, OnDelete: catalog.SetNull}}
	e.create(hc, hc2)
	p = e.table(p.ID)
	var prows, crows, c2rows [][]sem.Expr
	for i := int64(1); i <= 20; i++ {
		prows = append(prows, []sem.Expr{i8(i)})
		crows = append(crows, []sem.Expr{i8(i), i8(1)}, []sem.Expr{i8(i), i8(2)})
		c2rows = append(c2rows, []sem.Expr{i8(i), i8(i%2 + 1)})
	}
	_, ip := insertPlan(t, p, []string{"id"}, prows...)
	e.mustExec(ip)
	_, ip = insertPlan(t, hc, []string{"pid", "a"}, crows...)
	e.mustExec(ip)
	_, ip = insertPlan(t, hc2, []string{"a", "pid"}, c2rows...)
	e.mustExec(ip)
	_, ip = insertPlan(t, hc, []string{"pid", "a"}, []sem.Expr{i8(21), i8(1)})
	_, _, err := e.exec(ip)
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `insert or update on table "hc" violates foreign key constraint "hc_pid_fkey"`,
		`Key (pid)=(21) is not present in table "hp".`)
	_, dp := deletePlan(p, []sem.Expr{i8(1)}, []sem.Expr{i8(7)})
	e.mustExec(dp)
	for _, r := range strings.Split(e.rows(hc.ID), " ") {
		if strings.HasPrefix(r, "(1,") || strings.HasPrefix(r, "(7,") {
			t.Errorf("hc still holds %s", r)
		}
	}
	if got := len(strings.Split(e.rows(hc.ID), " ")); got != 36 {
		t.Errorf("hc has %d rows, want 36", got)
	}
	nulls := strings.Count(e.rows(hc2.ID), "NULL")
	if nulls != 10 {
		t.Errorf("hc2 has %d NULL keys, want 10 (the children of 1)", nulls)
	}
}

// TestForeignKeyActionBuildsOnlyWhatItUses: an action builds only the
// child's defaults it uses; another column's default may name an object
// this test's session cannot resolve (a serial's 'seq'::regclass).
func TestForeignKeyActionBuildsOnlyWhatItUses(t *testing.T) {
	e := newDMLEnv(t)
	p := newTable("p", catalog.Column{Name: "id", Type: types.Int8})
	p.PrimaryIndex = pk("p_pkey", 1)
	e.create(p)
	k := newTable("kids", catalog.Column{Name: "id", Type: types.Int8, DefaultExpr: "nextval('kids_id_seq'::regclass)"},
		catalog.Column{Name: "pid", Type: types.Int8, Nullable: true})
	k.PrimaryIndex = pk("kids_pkey", 1)
	k.ForeignKeys = []catalog.ForeignKey{{Name: "kids_pid_fkey", ColumnIDs: []rowenc.ColumnID{2}, ReferencedTableID: p.ID,
		ReferencedColumnIDs: []rowenc.ColumnID{1}, OnDelete: catalog.SetNull}}
	e.create(k)
	p = e.table(p.ID)
	_, ip := insertPlan(t, p, []string{"id"}, []sem.Expr{i8(1)})
	e.mustExec(ip)
	_, ip = insertPlan(t, k, []string{"id", "pid"}, []sem.Expr{i8(10), i8(1)})
	e.mustExec(ip)
	_, dp := deletePlan(p, []sem.Expr{i8(1)})
	e.mustExec(dp)
	if got, want := e.rows(k.ID), "(10,NULL)"; got != want {
		t.Errorf("kids = %s, want %s", got, want)
	}
}
