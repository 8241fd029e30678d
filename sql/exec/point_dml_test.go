package exec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/opt"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// sqlPath runs q as e.sql does, through the general operators when
// general is set (a Stats collector, as EXPLAIN ANALYZE, keeps the fast
// path out), and reports whether the statement's input would take the
// point DML fast path (point.go): a pointOp, locking its row for an
// UPDATE.
func (e *dmlEnv) sqlPath(q string, general bool) (out string, n int64, fast bool, err error) {
	e.t.Helper()
	stmts, err := parser.Parse(q)
	if err != nil {
		e.t.Fatal(err)
	}
	err = e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		x := e.context(txn)
		if general {
			x.Stats = &Stats{}
		}
		db, err := x.Catalog.Database(ctx, "postgres")
		if err != nil {
			return err
		}
		env := &plan.Env{Catalog: plan.NewCatalog(x.Catalog, db, []string{"public"}, func(string, string) plan.VirtualTable { return nil })}
		p, err := plan.Build(ctx, env, &stmts[0])
		if err != nil {
			return err
		}
		if err := opt.Optimize(ctx, p); err != nil {
			return err
		}
		r := newRunner(ctx, x, p)
		var input plan.Node
		switch v := p.Root.(type) {
		case *plan.Update:
			input, r.lockOnRead = v.Input, lockingPointScan(v)
		case *plan.Delete:
			input = v.Input
		}
		if input != nil {
			o, err := r.buildPoint(input)
			if err != nil {
				r.release()
				return err
			}
			po, ok := o.(*pointOp)
			fast = ok && (po.lock != nil) == (r.lockOnRead != nil)
		}
		r.release()
		rs, err := Start(ctx, x, p)
		if err != nil {
			return err
		}
		defer rs.Close()
		var rows [][]types.Datum
		for {
			row, err := rs.Next(ctx)
			if err != nil {
				return err
			}
			if row == nil {
				break
			}
			rows = append(rows, append([]types.Datum(nil), row...))
		}
		out, n = fmtRows(rows), rs.RowsAffected()
		return nil
	})
	return out, n, fast, err
}

// namedTTable is tTable under another name (its index and constraint
// names prefixed alike).
func namedTTable(name string) *catalog.Table {
	tb := tTable()
	tb.Name = name
	tb.PrimaryIndex.Name = name + "_pkey"
	tb.Indexes[0].Name = name + "_b_key"
	tb.Indexes[1].Name = name + "_c_part"
	tb.Checks[0].Name = name + "_c_check"
	return tb
}

// TestPointDML: an UPDATE or DELETE of one row by its whole primary key
// reads its row through the fast path (one operator; an UPDATE locks the
// row in the read's batch), and every answer, row count, error and side
// effect (secondary, unique and partial indexes, CHECK, a generated
// column, RETURNING) equals the general path's, run on a twin table;
// anything else is left to the general path.
func TestPointDML(t *testing.T) {
	e := newDMLEnv(t)
	fastT, genT := namedTTable("f"), namedTTable("g")
	e.create(fastT, genT)
	for _, tb := range []string{"f", "g"} {
		e.mustSQL(fmt.Sprintf("INSERT INTO %s (a, b, c) VALUES (1, 'x', 5), (2, 'y', 15), (3, 'z', 25), (4, 'w', NULL)", tb))
	}
	for _, tc := range []struct {
		sql  string // %s: the table
		fast bool
	}{
		{"UPDATE %s SET c = c + 1 WHERE a = 1", true},
		{"UPDATE %s SET c = c + 10 WHERE a = 1 RETURNING a, c, d", true},
		{"UPDATE %s SET c = c + 1 WHERE a = 99", true},
		{"UPDATE %s SET c = c - 100 WHERE a = 2", true},                 // CHECK
		{"UPDATE %s SET b = 'z' WHERE a = 2", true},                     // unique
		{"UPDATE %s SET b = NULL WHERE a = 2", true},                    // NOT NULL
		{"UPDATE %s SET c = 3 WHERE a = 3 RETURNING d, c * 2, b", true}, // leaves the partial index
		{"UPDATE %s SET c = 30, b = b || '!' WHERE a = 4 RETURNING *", true},
		{"UPDATE %s SET a = 5 WHERE a = 4", true}, // the key itself
		{"UPDATE %s SET c = c + 1 WHERE a = 5 AND c > 100", false},
		{"UPDATE %s SET c = c + 1 WHERE a > 2", false},
		{"UPDATE %s SET c = c + 1 WHERE b = 'x'", false},
		{"DELETE FROM %s WHERE a = 3 RETURNING a, b, d", true},
		{"DELETE FROM %s WHERE a = 3", true},
		{"DELETE FROM %s WHERE a = 2", true},
		{"DELETE FROM %s WHERE a = 1 AND c = 0", false},
		{"DELETE FROM %s WHERE c = 31", false},
	} {
		fq, gq := fmt.Sprintf(tc.sql, "f"), fmt.Sprintf(tc.sql, "g")
		fOut, fN, fast, fErr := e.sqlPath(fq, false)
		gOut, gN, _, gErr := e.sqlPath(gq, true)
		if fast != tc.fast {
			t.Errorf("%s: fast path %v, want %v", fq, fast, tc.fast)
		}
		fe, ge := describeErr(fErr), describeErr(gErr)
		if fErr == nil {
			fe = ""
		}
		if gErr == nil {
			ge = ""
		}
		if fOut != gOut || fN != gN || strings.ReplaceAll(fe, `"f`, `"g`) != ge {
			t.Errorf("%s:\n fast    %q %d %s\n general %q %d %s", fq, fOut, fN, fe, gOut, gN, ge)
		}
		if got, want := e.rows(fastT.ID), e.rows(genT.ID); got != want {
			t.Fatalf("after %s: f = %s, g = %s", fq, got, want)
		}
		for _, idx := range []string{"_b_key", "_c_part"} {
			if got, want := e.indexEntries(fastT.ID, "f"+idx), e.indexEntries(genT.ID, "g"+idx); got != want {
				t.Fatalf("after %s: %s has %d entries, the general path's %d", fq, idx, got, want)
			}
		}
	}
	if got, want := e.rows(fastT.ID), "(1,x,17,34)"; got != want {
		t.Errorf("f = %s, want %s", got, want)
	}

	// Foreign keys: a parent's point UPDATE is refused while referenced
	// (RESTRICT); its point DELETE cascades to the children.
	_, c, _ := fkTables(t, e, catalog.Cascade, catalog.Restrict)
	if _, _, fast, err := e.sqlPath("UPDATE p SET id = 9 WHERE id = 2", false); !fast {
		t.Error("UPDATE p: no fast path")
	} else {
		expectErr(t, err, pgerrcode.ForeignKeyViolation, `update or delete on table "p" violates foreign key constraint "c_pid_fkey" on table "c"`,
			`Key (id)=(2) is still referenced from table "c".`)
	}
	e.mustSQL("DELETE FROM c2") // references p's u (NO ACTION)
	if _, n, fast, err := e.sqlPath("DELETE FROM p WHERE id = 1", false); err != nil || n != 1 || !fast {
		t.Errorf("DELETE p 1: %d rows, fast %v, %v", n, fast, err)
	}
	if got, want := e.rows(c.ID), "(3,2) (4,NULL)"; got != want {
		t.Errorf("c = %s, want %s", got, want)
	}
}
