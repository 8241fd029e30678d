package exec

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// COPY tests: the statements are parsed from SQL, the table is resolved
// through a plan.Catalog over the test's catalog, and results are read
// back from KV. Expected errors are PostgreSQL 15's (the CONTEXT line
// PostgreSQL reports goes in the detail).

// readerCatalog resolves names in postgres.public for the tests.
type readerCatalog struct{ r *catalog.Reader }

func (c readerCatalog) LookupRelation(ctx context.Context, schema, name string) (plan.Relation, error) {
	if name == "vt" {
		return plan.Relation{Virtual: testVirtual{}}, nil
	}
	d, err := c.r.Relation(ctx, catalog.PostgresDatabaseID, catalog.PublicSchemaID, name)
	if err != nil {
		return plan.Relation{}, err
	}
	switch d := d.(type) {
	case *catalog.Table:
		return plan.Relation{Table: d}, nil
	case *catalog.View:
		return plan.Relation{View: d}, nil
	case *catalog.Sequence:
		return plan.Relation{Sequence: d}, nil
	}
	return plan.Relation{}, pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", name)
}

func (c readerCatalog) TableByID(ctx context.Context, id catalog.ID) (*catalog.Table, error) {
	return c.r.TableByID(ctx, id)
}

func copyStmt(t *testing.T, sql string) *pg_query.CopyStmt {
	t.Helper()
	stmts, err := parser.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	cs := stmts[0].AST.GetStmt().GetCopyStmt()
	if cs == nil {
		t.Fatalf("%s: not a COPY", sql)
	}
	return cs
}

// copyIn runs COPY ... FROM STDIN with data in its own transaction.
func (e *dmlEnv) copyIn(sql string, data []byte) (int64, error) {
	stmt := copyStmt(e.t, sql)
	var n int64
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) (err error) {
		x := e.context(txn)
		env := &plan.Env{Catalog: readerCatalog{x.Catalog}}
		if _, _, err := CopyFormat(ctx, env, stmt); err != nil {
			return err
		}
		n, err = CopyFrom(ctx, x, env, stmt, bytes.NewReader(data))
		return err
	})
	return n, err
}

// copyOut runs COPY ... TO STDOUT and returns the messages sent.
func (e *dmlEnv) copyOut(sql string) ([][]byte, int64, error) {
	stmt := copyStmt(e.t, sql)
	var msgs [][]byte
	var n int64
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) (err error) {
		msgs = nil
		x := e.context(txn)
		env := &plan.Env{Catalog: readerCatalog{x.Catalog}}
		n, err = CopyTo(ctx, x, env, stmt, func(row []byte) error {
			msgs = append(msgs, append([]byte(nil), row...))
			return nil
		})
		return err
	})
	return msgs, n, err
}

func TestCopyFromText(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	n, err := e.copyIn("COPY t FROM STDIN", []byte("1\tx\t5\n2\ty\t\\N\n\\.\n"))
	if err != nil || n != 2 {
		t.Fatalf("COPY = %d, %s", n, describeErr(err))
	}
	// Columns left out take their defaults.
	if n, err = e.copyIn("COPY t (a, c) FROM STDIN", []byte("3\t30\n")); err != nil || n != 1 {
		t.Fatalf("COPY with a column list = %d, %s", n, describeErr(err))
	}
	// WHERE filters rows.
	if n, err = e.copyIn("COPY t (c, b, a) FROM STDIN WHERE c > 10", []byte("1\tp\t4\n40\tq\t5\n")); err != nil || n != 1 {
		t.Fatalf("COPY WHERE = %d, %s", n, describeErr(err))
	}
	if got, want := e.rows(tb.ID), "(1,x,5,10) (2,y,NULL,NULL) (3,dflt,30,60) (5,q,40,80)"; got != want {
		t.Errorf("table = %s, want %s", got, want)
	}
	if got := e.indexEntries(tb.ID, "t_c_part"); got != 2 {
		t.Errorf("partial index entries = %d, want 2", got)
	}
}

func TestCopyFromCSV(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	data := "a;b;c\n1;NA;3\n2;\"x;y\";NA\n3;'q''';7\n"
	n, err := e.copyIn(`COPY t (a, b, c) FROM STDIN WITH (FORMAT csv, HEADER match, DELIMITER ';', NULL 'NA', FORCE_NOT_NULL (b))`,
		[]byte(strings.Replace(data, "'q'''", `"q"""`, 1)))
	if err != nil || n != 3 {
		t.Fatalf("COPY = %d, %s", n, describeErr(err))
	}
	if got, want := e.rows(tb.ID), `(1,NA,3,6) (2,x;y,NULL,NULL) (3,q",7,14)`; got != want {
		t.Errorf("table = %s, want %s", got, want)
	}
}

func TestCopyErrors(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	if _, err := e.copyIn("COPY t FROM STDIN", []byte("1\tx\t5\n")); err != nil {
		t.Fatal(describeErr(err))
	}
	for _, tc := range []struct {
		sql, data         string
		code, msg, detail string
	}{
		{"COPY t FROM STDIN", "7\tz\t5\n2\t\\N\t6\n", pgerrcode.NotNullViolation,
			`null value in column "b" of relation "t" violates not-null constraint`, "Failing row contains (2, null, 6, 12). | CONTEXT: COPY t, line 2"},
		{"COPY t (a, b, c) FROM STDIN", "x\tfoo\t1\n", pgerrcode.InvalidTextRepresentation,
			`invalid input syntax for type bigint: "x"`, `CONTEXT: COPY t, line 1, column a: "x"`},
		{"COPY t (a, b, c) FROM STDIN", "7\ta\t1\n8\tb\n", pgerrcode.BadCopyFileFormat,
			`missing data for column "c"`, "CONTEXT: COPY t, line 2"},
		{"COPY t (a, b, c) FROM STDIN", "7\ta\t1\t5\n", pgerrcode.BadCopyFileFormat,
			"extra data after last expected column", "CONTEXT: COPY t, line 1"},
		{"COPY t (a, b, c) FROM STDIN", "7\tq\t-1\n", pgerrcode.CheckViolation,
			`new row for relation "t" violates check constraint "t_c_check"`, "Failing row contains (7, q, -1, -2). | CONTEXT: COPY t, line 1"},
		{"COPY t (a, b, c) FROM STDIN (FORMAT csv, FORCE_NULL (b))", "3,\"\",4\n", pgerrcode.NotNullViolation,
			`null value in column "b" of relation "t" violates not-null constraint`, "Failing row contains (3, null, 4, 8). | CONTEXT: COPY t, line 1"},
		{"COPY t (a, b, c) FROM STDIN", "5\tx\t1\n", pgerrcode.UniqueViolation,
			`duplicate key value violates unique constraint "t_b_key"`, "Key (b)=(x) already exists. | CONTEXT: COPY t, line 1"},
		{"COPY t (a, b, c) FROM STDIN", "5\tv\t1\n6\tw\t1\n1\tu\t1\n", pgerrcode.UniqueViolation,
			`duplicate key value violates unique constraint "t_pkey"`, "Key (a)=(1) already exists. | CONTEXT: COPY t, line 3"},
		{"COPY t FROM STDIN (FORMAT csv, HEADER match)", "a,bb,c\n", pgerrcode.BadCopyFileFormat,
			`column name mismatch in header line field 2: got "bb", expected "b"`, "CONTEXT: COPY t, line 1"},
		{"COPY t (a, d) FROM STDIN", "", pgerrcode.InvalidColumnReference,
			`column "d" is a generated column`, "Generated columns cannot be used in COPY."},
		{"COPY t (a, zz) FROM STDIN", "", pgerrcode.UndefinedColumn, `column "zz" of relation "t" does not exist`, ""},
		{"COPY t (a, a) FROM STDIN", "", pgerrcode.DuplicateColumn, `column "a" specified more than once`, ""},
		{"COPY t FROM STDIN (FORMAT xml)", "", pgerrcode.InvalidParameterValue, `COPY format "xml" not recognized`, ""},
		{"COPY t FROM STDIN (FORMAT binary, DELIMITER ',')", "", pgerrcode.SyntaxError, "cannot specify DELIMITER in BINARY mode", ""},
		{"COPY t FROM STDIN (FORMAT csv, FORCE_QUOTE (a))", "", pgerrcode.FeatureNotSupported, "COPY force quote only available using COPY TO", ""},
		{"COPY t FROM STDIN (FORMAT csv, FORCE_NOT_NULL (zz))", "", pgerrcode.UndefinedColumn, `column "zz" of relation "t" does not exist`, ""},
		{"COPY t (a) FROM STDIN (FORMAT csv, FORCE_NOT_NULL (b))", "", pgerrcode.InvalidColumnReference, `FORCE_NOT_NULL column "b" not referenced by COPY`, ""},
		{"COPY t FROM STDIN (HEADER 2)", "", pgerrcode.SyntaxError, `header requires a Boolean value or "match"`, ""},
		{"COPY t FROM '/etc/passwd'", "", pgerrcode.FeatureNotSupported, "COPY to or from a file or program is not supported", ""},
		{"COPY nope FROM STDIN", "", pgerrcode.UndefinedTable, `relation "nope" does not exist`, ""},
		{"COPY t FROM STDIN WHERE d > 1", "", pgerrcode.FeatureNotSupported,
			"generated columns are not supported in COPY FROM WHERE conditions", `Column "d" is a generated column.`},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			_, err := e.copyIn(tc.sql, []byte(tc.data))
			expectErr(t, err, tc.code, tc.msg, tc.detail)
		})
	}
	for _, tc := range []struct{ sql, code, msg string }{
		{"COPY t TO STDOUT (FORMAT csv, FORCE_NOT_NULL (a))", pgerrcode.FeatureNotSupported, "COPY force not null only available using COPY FROM"},
		{"COPY t TO STDOUT (FORMAT text, FORCE_QUOTE (a))", pgerrcode.FeatureNotSupported, "COPY force quote available only in CSV mode"},
		{"COPY t TO STDOUT (FORMAT csv, HEADER match)", pgerrcode.FeatureNotSupported, `cannot use "match" with HEADER in COPY TO`},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			_, _, err := e.copyOut(tc.sql)
			expectErr(t, err, tc.code, tc.msg, "")
		})
	}
	if got, want := e.rows(tb.ID), "(1,x,5,10)"; got != want {
		t.Errorf("after failed COPYs: %s, want %s", got, want)
	}
}

func TestCopyTo(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	if _, err := e.copyIn("COPY t FROM STDIN", []byte("1\tx\t5\n2\ta\\tb\t\\N\n")); err != nil {
		t.Fatal(describeErr(err))
	}
	for _, tc := range []struct{ sql, want string }{
		// Generated columns are left out, as in PostgreSQL 15.
		{"COPY t TO STDOUT", "1\tx\t5\n|2\ta\\tb\t\\N\n"},
		{"COPY t (c, a) TO STDOUT WITH (HEADER)", "c\ta\n|5\t1\n|\\N\t2\n"},
		{"COPY t TO STDOUT (FORMAT csv, FORCE_QUOTE *, HEADER)", "a,b,c\n|\"1\",\"x\",\"5\"\n|\"2\",\"a\tb\",\n"},
		{"COPY t TO STDOUT (FORMAT csv, FORCE_QUOTE (b), NULL 'N/A', DELIMITER '|')", "1|\"x\"|5\n|2|\"a\tb\"|N/A\n"},
	} {
		t.Run(tc.sql, func(t *testing.T) {
			msgs, n, err := e.copyOut(tc.sql)
			if err != nil {
				t.Fatal(describeErr(err))
			}
			var parts []string
			for _, m := range msgs {
				parts = append(parts, string(m))
			}
			if got := strings.Join(parts, "|"); got != tc.want || n != 2 {
				t.Errorf("got %q (%d rows), want %q (2)", got, n, tc.want)
			}
		})
	}
	// Binary out, then in again into a table of the same shape.
	msgs, _, err := e.copyOut("COPY t TO STDOUT (FORMAT binary)")
	if err != nil {
		t.Fatal(describeErr(err))
	}
	u := tTable()
	u.Name = "u"
	u.PrimaryIndex.Name, u.Indexes[0].Name, u.Indexes[1].Name = "u_pkey", "u_b_key", "u_c_part"
	e.create(u)
	n, err := e.copyIn("COPY u FROM STDIN (FORMAT binary)", bytes.Join(msgs, nil))
	if err != nil || n != 2 {
		t.Fatalf("binary COPY FROM = %d, %s", n, describeErr(err))
	}
	if got, want := e.rows(u.ID), e.rows(tb.ID); got != want {
		t.Errorf("binary round trip: %s, want %s", got, want)
	}
	// CopyFormat announces the width.
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		env := &plan.Env{Catalog: readerCatalog{catalog.NewReader(txn, nil)}}
		for _, tc := range []struct {
			sql    string
			binary bool
			n      int
		}{{"COPY t FROM STDIN", false, 3}, {"COPY t (a, b) TO STDOUT (FORMAT binary)", true, 2}} {
			b, n, err := CopyFormat(ctx, env, copyStmt(t, tc.sql))
			if err != nil || b != tc.binary || n != tc.n {
				t.Errorf("CopyFormat(%s) = %v, %d, %v; want %v, %d", tc.sql, b, n, err, tc.binary, tc.n)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCopyQueryTo(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	if _, err := e.copyIn("COPY t FROM STDIN", []byte("1\tx\t5\n2\ty\t15\n3\tz\t25\n")); err != nil {
		t.Fatal(describeErr(err))
	}
	msgs, n, err := e.copyOut("COPY (SELECT a, b || '!' AS b, d FROM t WHERE c > 5 ORDER BY a DESC) TO STDOUT (FORMAT csv, HEADER)")
	if err != nil {
		t.Fatal(describeErr(err))
	}
	if got, want := string(bytes.Join(msgs, nil)), "a,b,d\n3,z!,50\n2,y!,30\n"; got != want || n != 2 {
		t.Errorf("got %q (%d rows), want %q (2)", got, n, want)
	}
	// DML with RETURNING may be copied out; its writes happen.
	msgs, n, err = e.copyOut("COPY (DELETE FROM t WHERE a = 1 RETURNING a, c) TO STDOUT")
	if err != nil || string(bytes.Join(msgs, nil)) != "1\t5\n" || n != 1 {
		t.Errorf("COPY (DELETE ... RETURNING) = %q, %d, %s", bytes.Join(msgs, nil), n, describeErr(err))
	}
	if got, want := e.rows(tb.ID), "(2,y,15,30) (3,z,25,50)"; got != want {
		t.Errorf("t = %s, want %s", got, want)
	}
}

// counterSeqs is a session's sequences for tests: each sequence counts
// from 1.
type counterSeqs struct {
	builtins.FixedContext
	vals map[uint32]int64
}

func (c *counterSeqs) Sequences() builtins.SequenceOps { return c }
func (c *counterSeqs) NextVal(oid uint32) (int64, error) {
	c.vals[oid]++
	return c.vals[oid], nil
}
func (c *counterSeqs) CurrVal(oid uint32) (int64, error) { return c.vals[oid], nil }
func (c *counterSeqs) SetVal(oid uint32, v int64, _ bool) (int64, error) {
	c.vals[oid] = v
	return v, nil
}
func (c *counterSeqs) LastVal() (int64, error) { return 0, nil }

// TestCopyIdentity: COPY fills an identity column left out from its
// sequence.
func TestCopyIdentity(t *testing.T) {
	e := newDMLEnv(t)
	tb := newTable("ids", catalog.Column{Name: "a", Type: types.Int8, Identity: catalog.IdentityAlways, SequenceID: 777},
		catalog.Column{Name: "v", Type: types.Text, Nullable: true})
	tb.PrimaryIndex = pk("ids_pkey", 1)
	e.create(tb)
	seqs := &counterSeqs{vals: map[uint32]int64{777: 10}}
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		x := e.context(txn)
		x.Eval.Fn = seqs
		env := &plan.Env{Catalog: readerCatalog{x.Catalog}}
		n, err := CopyFrom(ctx, x, env, copyStmt(t, "COPY ids (v) FROM STDIN"), strings.NewReader("x\ny\n"))
		if err == nil && n != 2 {
			t.Errorf("COPY = %d rows, want 2", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(describeErr(err))
	}
	if got, want := e.rows(tb.ID), "(11,x) (12,y)"; got != want {
		t.Errorf("ids = %s, want %s", got, want)
	}
}

// TestCopyFromDrains: COPY FROM reads the client's stream to its end,
// after the end marker and after a failed row alike.
func TestCopyFromDrains(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	for _, tc := range []struct {
		data string
		code string
	}{
		{"1\tx\t5\n\\.\nignored after the end marker\n", ""},
		{"2\ty\t-5\n3\tz\t5\n4\tw\t5\n", pgerrcode.CheckViolation},
	} {
		src := strings.NewReader(tc.data)
		err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			x := e.context(txn)
			_, err := CopyFrom(ctx, x, &plan.Env{Catalog: readerCatalog{x.Catalog}}, copyStmt(t, "COPY t (a, b, c) FROM STDIN"), src)
			return err
		})
		if pgerror.Code(err) != tc.code && !(tc.code == "" && err == nil) {
			t.Errorf("%q: %s", tc.data, describeErr(err))
		}
		if src.Len() != 0 {
			t.Errorf("%q: %d bytes left unread", tc.data, src.Len())
		}
	}
	if got, want := e.rows(tb.ID), "(1,x,5,10)"; got != want {
		t.Errorf("t = %s, want %s", got, want)
	}
}

// testVirtual is a system catalog of two rows.
type testVirtual struct{}

func (testVirtual) Schema() string { return "pg_catalog" }
func (testVirtual) Name() string   { return "vt" }
func (testVirtual) OID() uint32    { return 9999 }
func (testVirtual) Columns() []plan.VirtualColumn {
	return []plan.VirtualColumn{{Name: "oid", T: types.Oid}, {Name: "name", T: types.Text}}
}
func (testVirtual) Rows(context.Context, *plan.VirtualEnv) ([][]types.Datum, error) {
	return [][]types.Datum{{types.DOid(1), types.DString("one")}, {types.DOid(2), types.DNull}}, nil
}

func TestCopyVirtual(t *testing.T) {
	e := newDMLEnv(t)
	msgs, n, err := e.copyOut("COPY vt (name, oid) TO STDOUT (FORMAT csv)")
	if got, want := string(bytes.Join(msgs, nil)), "one,1\n,2\n"; err != nil || got != want || n != 2 {
		t.Errorf("COPY vt = %q, %d, %s; want %q, 2", got, n, describeErr(err), want)
	}
	_, err = e.copyIn("COPY vt FROM STDIN", nil)
	expectErr(t, err, pgerrcode.InsufficientPrivilege, `permission denied: "vt" is a system catalog`, "")
}

// TestCopyFromPipelined: COPY's parse stage runs ahead of the writes
// (copy_parse.go) in batches; rows spanning many batches are all written
// in order, and an error in a later batch names its line and leaves
// nothing (the statement fails after the rows before it were written,
// as the sequential loop did).
func TestCopyFromPipelined(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	const rows = 10*copyParseBatch + 17
	var data strings.Builder
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&data, "%d\tr%d\t%d\n", i, i, i)
	}
	n, err := e.copyIn("COPY t (a, b, c) FROM STDIN", []byte(data.String()))
	if err != nil || n != rows {
		t.Fatalf("COPY = %d, %s", n, describeErr(err))
	}
	if got := strings.Count(e.rows(tb.ID), "("); got != rows {
		t.Fatalf("table holds %d rows, want %d", got, rows)
	}
	data.Reset()
	const bad = 7*copyParseBatch + 3
	for i := 1; i <= rows; i++ {
		v := fmt.Sprint(i)
		if i == bad {
			v = "notanint"
		}
		fmt.Fprintf(&data, "%d\ts%d\t%s\n", rows+i, i, v)
	}
	_, err = e.copyIn("COPY t (a, b, c) FROM STDIN", []byte(data.String()))
	if err == nil || !strings.Contains(describeErr(err), fmt.Sprintf("line %d", bad)) {
		t.Fatalf("COPY with a bad line %d: %s", bad, describeErr(err))
	}
	if got := strings.Count(e.rows(tb.ID), "("); got != rows {
		t.Fatalf("table holds %d rows after the failed COPY, want %d", got, rows)
	}
}
