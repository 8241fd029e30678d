package exec

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/opt"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// sqlTxn runs statements in one transaction and returns the rows of the
// last.
func (e *dmlEnv) sqlTxn(qs ...string) string {
	e.t.Helper()
	var out string
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		var err error
		out, err = e.runSQL(ctx, txn, qs...)
		return err
	})
	if err != nil {
		e.t.Fatalf("%v: %s", qs, describeErr(err))
	}
	return out
}

// runSQL runs statements in txn and returns the rows of the last.
func (e *dmlEnv) runSQL(ctx context.Context, txn *kv.Txn, qs ...string) (string, error) {
	var out string
	for _, q := range qs {
		stmts, err := parser.Parse(q)
		if err != nil {
			return "", err
		}
		x := e.context(txn)
		db, err := x.Catalog.Database(ctx, "postgres")
		if err != nil {
			return "", err
		}
		env := &plan.Env{Catalog: plan.NewCatalog(x.Catalog, db, []string{"public"}, func(string, string) plan.VirtualTable { return nil })}
		p, err := plan.Build(ctx, env, &stmts[0])
		if err != nil {
			return "", err
		}
		if err := opt.Optimize(ctx, p); err != nil {
			return "", err
		}
		rs, err := Start(ctx, x, p)
		if err != nil {
			return "", err
		}
		var rows [][]types.Datum
		for {
			row, err := rs.Next(ctx)
			if err != nil {
				rs.Close()
				return "", err
			}
			if row == nil {
				break
			}
			rows = append(rows, append([]types.Datum(nil), row...))
		}
		rs.Close()
		out = fmtRows(rows)
	}
	return out, nil
}

// TestDeleteByPoint: a DELETE deletes a row its scan read as a lone row key
// by point, and any other row by its span. Rows re-inserted afterwards in
// the same transaction must not pick up column entries the point deletion
// would have left (a partial update earlier in the transaction writes
// them at the transaction's timestamp, where a packed row would merge
// them), whichever path (scan, index lookup) read them.
func TestDeleteByPoint(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	e.mustSQL("INSERT INTO t (a, b, c) VALUES (1, 'x', 5), (2, 'y', 15), (3, 'z', 25), (4, 'w', 35)")
	// Row 2 gets committed column entries (older than what follows).
	e.mustSQL("UPDATE t SET c = 50 WHERE a = 2")
	got := e.sqlTxn(
		"UPDATE t SET c = 60 WHERE a = 3", // column entries at this transaction's timestamp
		"UPDATE t SET c = 70 WHERE a = 4",
		"DELETE FROM t WHERE b = 'w'", // through the unique index, then the row
		"DELETE FROM t WHERE a < 4",
		"INSERT INTO t (a, b, c) VALUES (1, 'x1', 6), (2, 'y1', 7), (3, 'z1', 8), (4, 'w1', 9)",
		"SELECT a, b, c, d FROM t ORDER BY a",
	)
	if want := "(1,x1,6,12) (2,y1,7,14) (3,z1,8,16) (4,w1,9,18)"; got != want {
		t.Errorf("rows re-inserted in the deleting transaction = %s, want %s", got, want)
	}
	if got, want := e.rows(tb.ID), "(1,x1,6,12) (2,y1,7,14) (3,z1,8,16) (4,w1,9,18)"; got != want {
		t.Errorf("t = %s, want %s", got, want)
	}
	// Packed rows deleted by point and inserted again, in one transaction
	// and across transactions.
	e.mustSQL("INSERT INTO t (a, b, c) VALUES (5, 'v', 45)")
	e.mustSQL("DELETE FROM t WHERE a >= 3")
	if got := e.sqlTxn("INSERT INTO t (a, b, c) VALUES (5, 'v2', 46)", "DELETE FROM t WHERE a = 5",
		"INSERT INTO t (a, b, c) VALUES (5, 'v3', 47)", "SELECT a, b, c FROM t ORDER BY a"); got != "(1,x1,6) (2,y1,7) (5,v3,47)" {
		t.Errorf("after delete and re-insert in one transaction: %s", got)
	}
	if got, want := e.rows(tb.ID), "(1,x1,6,12) (2,y1,7,14) (5,v3,47,94)"; got != want {
		t.Errorf("t = %s, want %s", got, want)
	}
	if n := e.indexEntries(tb.ID, "t_b_key"); n != 3 {
		t.Errorf("t_b_key has %d entries, want 3", n)
	}
}
