package exec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/opt"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// query runs one statement bound by plan.Build and optimized by
// opt.Optimize, as the session runs it, and returns its rows one per line.
func (e *env) query(q string) (string, error) { return e.queryWith(context.Background(), q, nil) }

// queryWith is query with the exec.Context changed by mod (memory
// settings) and run under ctx.
func (e *env) queryWith(qctx context.Context, q string, mod func(*Context)) (string, error) {
	stmts, err := parser.Parse(q)
	if err != nil {
		return "", err
	}
	var out string
	err = e.db.Txn(qctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		rd := catalog.NewReader(txn, nil)
		db, err := rd.Database(ctx, "postgres")
		if err != nil {
			return err
		}
		env := &plan.Env{Catalog: plan.NewCatalog(rd, db, []string{"public"}, func(string, string) plan.VirtualTable { return nil })}
		p, err := plan.Build(ctx, env, &stmts[0])
		if err != nil {
			return err
		}
		if err := opt.Optimize(ctx, p); err != nil {
			return err
		}
		x := &Context{Txn: txn, Eval: &sem.EvalContext{}, Catalog: rd}
		if mod != nil {
			mod(x)
		}
		rs, err := Start(ctx, x, p)
		if err != nil {
			return err
		}
		defer rs.Close()
		var sb strings.Builder
		for {
			row, err := rs.Next(ctx)
			if err != nil {
				return err
			}
			if row == nil {
				break
			}
			for i, d := range row {
				if i > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(d.String())
			}
			sb.WriteByte('\n')
		}
		out = sb.String()
		return nil
	})
	return out, err
}

// row builds a row from Go values: int, string, nil (NULL).
func row(vs ...any) []types.Datum {
	out := make([]types.Datum, len(vs))
	for i, v := range vs {
		switch v := v.(type) {
		case int:
			out[i] = types.DInt(v)
		case string:
			out[i] = types.DString(v)
		case nil:
			out[i] = types.DNull
		default:
			panic(fmt.Sprintf("row: %T", v))
		}
	}
	return out
}

// TestQueriesMatchPostgres runs testdata/queries, whose expected results
// come from PostgreSQL 15 over the same rows.
func TestQueriesMatchPostgres(t *testing.T) {
	e := newEnv(t)
	e.createTable(tableSpec{name: "dept", cols: []string{"id int8", "dname text"}, pk: []string{"id"}, packed: true},
		row(1, "eng"), row(2, "ops"), row(3, "empty"))
	e.createTable(tableSpec{name: "emp", cols: []string{"id int8", "dept int8", "name text", "salary int8"}, pk: []string{"id"},
		indexes: [][]string{{"dept", "+name"}}, packed: true},
		row(1, 1, "ann", 100), row(2, 1, "bob", 120), row(3, 2, "cid", 90), row(4, nil, "dan", 80), row(5, 2, "eve", nil), row(6, 1, "fay", 120))
	var hrows [][]types.Datum
	for i := 1; i <= 500; i++ {
		hrows = append(hrows, row(i, i%10, fmt.Sprint("s", i)))
	}
	e.createTable(tableSpec{name: "h", cols: []string{"k int8", "v int8", "s text"}, pk: []string{"k"}, indexes: [][]string{{"v"}}, hash: 1, packed: true}, hrows...)
	datadriven.RunTest(t, "testdata/queries", func(t *testing.T, d *datadriven.TestData) string {
		out, err := e.query(d.Input)
		if err != nil {
			pe := pgerror.Flatten(err)
			return fmt.Sprintf("error %s: %s\n", pe.Code, pe.Message)
		}
		return out
	})
}
