package ddl

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// testEnv is one node with a bootstrapped catalog, running DDL as the
// session would: each call to exec is one transaction.
type testEnv struct {
	t       testing.TB
	db      *kv.DB
	dbName  string
	notices []string
	// describe stands in for the binder (CREATE VIEW).
	describe func(ctx context.Context, sql string) ([]plan.Column, error)
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	db := testcluster.StartNode(t, testcluster.Options{}).DB
	if err := db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		return catalog.Bootstrap(ctx, txn, "")
	}); err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, db: db, dbName: "postgres"}
}

// exec runs every statement of sql in one transaction and returns the
// last command tag; on error the transaction rolls back.
func (e *testEnv) exec(sql string) (string, error) {
	e.t.Helper()
	stmts, err := parser.Parse(sql)
	if err != nil {
		return "", err
	}
	var tag string
	e.notices = nil
	err = e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		w := catalog.NewWriter(txn, nil)
		dbd, err := w.Database(ctx, e.dbName)
		if err != nil {
			return err
		}
		x := &Context{Txn: txn, Writer: w, Database: dbd, User: "postgres", SearchPath: []string{"$user", "public"},
			Describe: e.describe, DB: e.db,
			Notice: func(code, msg string) { e.notices = append(e.notices, msg) }}
		for i := range stmts {
			if tag, err = Exec(ctx, x, &stmts[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return tag, err
}

func (e *testEnv) mustExec(sql string) string {
	e.t.Helper()
	tag, err := e.exec(sql)
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return tag
}

// read runs fn in a read transaction.
func (e *testEnv) read(fn func(ctx context.Context, txn *kv.Txn, r *catalog.Reader, db *catalog.Database) error) {
	e.t.Helper()
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		r := catalog.NewReader(txn, nil)
		db, err := r.Database(ctx, e.dbName)
		if err != nil {
			return err
		}
		return fn(ctx, txn, r, db)
	}); err != nil {
		e.t.Fatal(err)
	}
}

// relation returns relation name of schema public (nil if none).
func (e *testEnv) relation(name string) catalog.Descriptor {
	e.t.Helper()
	var d catalog.Descriptor
	e.read(func(ctx context.Context, txn *kv.Txn, r *catalog.Reader, db *catalog.Database) error {
		s, err := r.Schema(ctx, db.ID, "public")
		if err != nil {
			return err
		}
		d, err = r.Relation(ctx, db.ID, s.ID, name)
		if pgerror.Code(err) == "42P01" {
			d, err = nil, nil
		}
		return err
	})
	return d
}

func (e *testEnv) table(name string) *catalog.Table {
	e.t.Helper()
	d := e.relation(name)
	t, ok := d.(*catalog.Table)
	if !ok {
		e.t.Fatalf("relation %q is %T, want a table", name, d)
	}
	return t
}

// insert writes rows (one datum per table column) with rowenc's writer,
// standing in for the DML executor.
func (e *testEnv) insert(table string, rows ...[]types.Datum) {
	e.t.Helper()
	t := e.table(table)
	l, err := t.Layout()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		w := &rowenc.RowWriter{Table: l}
		b := &kv.Batch{}
		for _, r := range rows {
			if err := w.Insert(b, r); err != nil {
				return err
			}
		}
		return l.ConvertWriteError(txn.Run(ctx, b))
	}); err != nil {
		e.t.Fatal(err)
	}
}

// rows reads every row of a table through its primary index.
func (e *testEnv) rows(table string) [][]types.Datum {
	e.t.Helper()
	t := e.table(table)
	l, err := t.Layout()
	if err != nil {
		e.t.Fatal(err)
	}
	var out [][]types.Datum
	e.read(func(ctx context.Context, txn *kv.Txn, _ *catalog.Reader, _ *catalog.Database) error {
		out = nil
		f, err := rowenc.NewRowFetcher(l, &l.Primary, nil)
		if err != nil {
			return err
		}
		sp := l.IndexSpan(&l.Primary)
		kvs, err := txn.Scan(ctx, sp.Key, sp.EndKey, 0)
		if err != nil {
			return err
		}
		emit := func(r []types.Datum) error { out = append(out, append([]types.Datum(nil), r...)); return nil }
		if err := f.Add(kvs, emit); err != nil {
			return err
		}
		return f.Finish(emit)
	})
	return out
}

// indexRows reads the entries of a secondary index (key, primary-key and
// stored columns set, others nil).
func (e *testEnv) indexRows(table, index string) [][]types.Datum {
	e.t.Helper()
	t := e.table(table)
	l, err := t.Layout()
	if err != nil {
		e.t.Fatal(err)
	}
	idx := t.IndexByName(index)
	if idx == nil {
		e.t.Fatalf("table %q has no index %q", table, index)
	}
	il := l.Index(uint32(idx.ID))
	var out [][]types.Datum
	e.read(func(ctx context.Context, txn *kv.Txn, _ *catalog.Reader, _ *catalog.Database) error {
		out = nil
		f, err := rowenc.NewRowFetcher(l, il, nil)
		if err != nil {
			return err
		}
		sp := l.IndexSpan(il)
		kvs, err := txn.Scan(ctx, sp.Key, sp.EndKey, 0)
		if err != nil {
			return err
		}
		emit := func(r []types.Datum) error { out = append(out, append([]types.Datum(nil), r...)); return nil }
		if err := f.Add(kvs, emit); err != nil {
			return err
		}
		return f.Finish(emit)
	})
	return out
}

// countKeys counts the KVs in the table data keyspace.
func (e *testEnv) countKeys() int {
	e.t.Helper()
	kvs, err := e.db.Scan(context.Background(), []byte{0x03}, keys.PrefixEnd([]byte{0x03}), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(kvs)
}

func rowsText(rows [][]types.Datum) string {
	var b strings.Builder
	for i, r := range rows {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString("(")
		for j, d := range r {
			if j > 0 {
				b.WriteString(",")
			}
			if d == nil || types.IsNull(d) {
				b.WriteString("NULL")
			} else {
				b.WriteString(types.Format(nil, typeOf(d), d))
			}
		}
		b.WriteString(")")
	}
	return b.String()
}

func typeOf(d types.Datum) *types.T {
	switch d.(type) {
	case types.DInt:
		return types.Int8
	case types.DString:
		return types.Text
	case types.DBool:
		return types.Bool
	}
	return types.Text
}

func i(v int64) types.Datum  { return types.DInt(v) }
func s(v string) types.Datum { return types.DString(v) }
