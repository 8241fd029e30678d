package session_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// modelRow is a row of rwTable in the model: id -> (a, b, c), nil NULL.
type modelRow struct {
	a, b *int
	c    *string
	u    *int // UNIQUE
}

func (r modelRow) String() string {
	f := func(p *int) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprint(*p)
	}
	c := "NULL"
	if r.c != nil {
		c = *r.c
	}
	return f(r.a) + "," + f(r.b) + "," + c + "," + f(r.u)
}

// uniqueU reports whether no two rows share a non-NULL u.
func uniqueU(rows map[int]modelRow) bool {
	seen := map[int]bool{}
	for _, r := range rows {
		if r.u != nil {
			if seen[*r.u] {
				return false
			}
			seen[*r.u] = true
		}
	}
	return true
}

// TestBufferedWritesRandomRowOps runs random transactions of partial and
// full UPDATEs, primary-key changes, DELETEs, INSERTs (a duplicate one
// inside a savepoint that is rolled back), INSERT ... ON CONFLICT and
// savepoint rollbacks over a few keys of one table, each in every
// cairn_buffered_writes mode and in a plain and a colocated database, and
// compares what the transaction reads after every statement and what it
// commits with a model of the rows. One session only: no statement may fail
// with 40001 (issue 13 item 3 was one that always did). The seed of a
// failing run is in its name.
func TestBufferedWritesRandomRowOps(t *testing.T) {
	ctx := context.Background()
	sqlURL, _ := startServerHTTP(t)
	admin := connect(t, sqlURL("postgres"), nil)
	mustExec(t, admin, "CREATE DATABASE rw_plain")
	mustExec(t, admin, "CREATE DATABASE rw_colo WITH colocated = true")
	for _, db := range []string{"rw_plain", "rw_colo"} {
		for _, mode := range []string{"off", "on", "auto"} {
			t.Run(db+"/"+mode, func(t *testing.T) {
				c := connect(t, sqlURL(db), nil)
				mustExec(t, c, "SET cairn_buffered_writes = "+mode)
				table := "t_" + mode
				mustExec(t, c, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, a int, b int, c text, u int UNIQUE)", table))
				mustExec(t, c, fmt.Sprintf("CREATE INDEX ON %s (b)", table))
				model := map[int]modelRow{}
				for seed := range uint64(40) {
					rng := rand.New(rand.NewPCG(seed, 13))
					model = randomRowTxn(ctx, t, c, table, rng, model, fmt.Sprintf("%s/%s seed %d", db, mode, seed))
				}
			})
		}
	}
}

// randomRowTxn runs one random transaction over table starting from the
// committed state model, checks it, and returns the new committed state.
func randomRowTxn(ctx context.Context, t *testing.T, c *pgx.Conn, table string, rng *rand.Rand, committed map[int]modelRow, name string) map[int]modelRow {
	t.Helper()
	const keys = 4
	model := maps.Clone(committed)
	var log []string
	exec := func(q string, args ...any) error {
		log = append(log, q)
		_, err := c.Exec(ctx, q, args...)
		return err
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s\nstatements:\n  %s", name, fmt.Sprintf(format, args...), strings.Join(log, "\n  "))
	}
	must := func(q string) {
		t.Helper()
		if err := exec(q); err != nil {
			fail("%s: %v", q, err)
		}
	}
	val := func() *int {
		if rng.IntN(5) == 0 {
			return nil
		}
		v := rng.IntN(100)
		return &v
	}
	uval := func() *int {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := rng.IntN(6)
		return &v
	}
	text := func() *string {
		if rng.IntN(5) == 0 {
			return nil
		}
		s := fmt.Sprintf("s%d", rng.IntN(100))
		return &s
	}
	lit := func(p *int) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprint(*p)
	}
	tlit := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return "'" + *p + "'"
	}
	values := func(id int, r modelRow) string {
		return fmt.Sprintf("(%d, %s, %s, %s, %s)", id, lit(r.a), lit(r.b), tlit(r.c), lit(r.u))
	}
	check := func(when string) {
		t.Helper()
		rows, err := c.Query(ctx, fmt.Sprintf("SELECT id, a, b, c, u FROM %s ORDER BY id", table))
		if err != nil {
			fail("%s: reading back: %v", when, err)
		}
		got := map[int]modelRow{}
		for rows.Next() {
			var id int
			var r modelRow
			if err := rows.Scan(&id, &r.a, &r.b, &r.c, &r.u); err != nil {
				fail("%s: %v", when, err)
			}
			got[id] = r
		}
		if err := rows.Err(); err != nil {
			fail("%s: reading back: %v", when, err)
		}
		if g, w := fmtRows(got), fmtRows(model); g != w {
			fail("%s: table holds\n  %s\nwant\n  %s", when, g, w)
		}
		// The secondary indexes agree: a scan of each (an index scan over
		// every non-NULL value) finds exactly the model's rows.
		for _, col := range []string{"b", "u"} {
			var want []string
			for id, r := range model {
				if v := map[string]*int{"b": r.b, "u": r.u}[col]; v != nil {
					want = append(want, fmt.Sprintf("%03d/%d", *v, id))
				}
			}
			slices.Sort(want)
			rows, err := c.Query(ctx, fmt.Sprintf("SELECT %s, id FROM %s WHERE %[1]s BETWEEN 0 AND 99 ORDER BY %[1]s, id", col, table))
			if err != nil {
				fail("%s: scanning %s: %v", when, col, err)
			}
			var got []string
			var v, id int
			_, err = pgx.ForEachRow(rows, []any{&v, &id}, func() error {
				got = append(got, fmt.Sprintf("%03d/%d", v, id))
				return nil
			})
			if err != nil {
				fail("%s: scanning %s: %v", when, col, err)
			}
			if !slices.Equal(got, want) {
				fail("%s: index on %s holds %v, want %v", when, col, got, want)
			}
		}
	}
	must("BEGIN ISOLATION LEVEL " + []string{"SERIALIZABLE", "REPEATABLE READ", "READ COMMITTED"}[rng.IntN(3)])
	type mark struct {
		name  string
		model map[int]modelRow
	}
	var marks []mark
	// apply runs a statement whose effect is next: a clash on the unique
	// column u must fail it with 23505 and change nothing, which a
	// savepoint around it then undoes.
	apply := func(q string, next map[int]modelRow) {
		t.Helper()
		if !uniqueU(next) {
			must("SAVEPOINT uq")
			if err := exec(q); sqlState(err) != "23505" {
				fail("%s: %v, want 23505 (u is not unique after it)", q, err)
			}
			must("ROLLBACK TO SAVEPOINT uq")
			return
		}
		must(q)
		model = next
	}
	row := func() modelRow { return modelRow{val(), val(), text(), uval()} }
	for step := range 14 {
		id := 1 + rng.IntN(keys)
		cur, exists := model[id]
		next := maps.Clone(model)
		switch op := rng.IntN(12); {
		case op < 2: // UPDATE of some columns
			sets := []string{}
			nr := cur
			if rng.IntN(2) == 0 {
				nr.a = val()
				sets = append(sets, "a = "+lit(nr.a))
			}
			if rng.IntN(2) == 0 {
				nr.b = val()
				sets = append(sets, "b = "+lit(nr.b))
			}
			if rng.IntN(3) == 0 {
				nr.u = uval()
				sets = append(sets, "u = "+lit(nr.u))
			}
			if len(sets) == 0 || rng.IntN(2) == 0 {
				nr.c = text()
				sets = append(sets, "c = "+tlit(nr.c))
			}
			if exists {
				next[id] = nr
			}
			apply(fmt.Sprintf("UPDATE %s SET %s WHERE id = %d", table, strings.Join(sets, ", "), id), next)
		case op < 3: // UPDATE of several rows from their own values
			v := val()
			for k, r := range next {
				if k >= id {
					a := 1
					if r.a != nil {
						a += *r.a
					}
					r.a, r.b = &a, v
					next[k] = r
				}
			}
			apply(fmt.Sprintf("UPDATE %s SET a = coalesce(a, 0) + 1, b = %s WHERE id >= %d", table, lit(v), id), next)
		case op < 4: // DELETE of one row or of a range
			if rng.IntN(3) == 0 {
				for k := range next {
					if k > id {
						delete(next, k)
					}
				}
				apply(fmt.Sprintf("DELETE FROM %s WHERE id > %d", table, id), next)
				break
			}
			delete(next, id)
			apply(fmt.Sprintf("DELETE FROM %s WHERE id = %d", table, id), next)
		case op < 5: // INSERT; a duplicate key inside a savepoint rolled back
			r := row()
			q := fmt.Sprintf("INSERT INTO %s VALUES %s", table, values(id, r))
			if !exists {
				next[id] = r
				apply(q, next)
				break
			}
			must("SAVEPOINT dup")
			if err := exec(q); sqlState(err) != "23505" {
				fail("%s on an existing row: %v, want 23505", q, err)
			}
			must("ROLLBACK TO SAVEPOINT dup")
		case op < 6: // INSERT of several rows, the ones absent
			var vals []string
			for k := 1; k <= keys; k++ {
				if _, ok := next[k]; !ok && rng.IntN(2) == 0 {
					r := row()
					next[k] = r
					vals = append(vals, values(k, r))
				}
			}
			if len(vals) > 0 {
				apply(fmt.Sprintf("INSERT INTO %s VALUES %s", table, strings.Join(vals, ", ")), next)
			}
		case op < 7: // INSERT ... ON CONFLICT (an upsert, or nothing)
			r := row()
			switch rng.IntN(3) {
			case 0:
				next[id] = r
				apply(fmt.Sprintf("INSERT INTO %s VALUES %s ON CONFLICT (id) DO UPDATE SET a = excluded.a, b = excluded.b, c = excluded.c, u = excluded.u", table, values(id, r)), next)
			case 1:
				if exists {
					cur.b = r.b
					next[id] = cur
				} else {
					next[id] = r
				}
				apply(fmt.Sprintf("INSERT INTO %s VALUES %s ON CONFLICT (id) DO UPDATE SET b = excluded.b", table, values(id, r)), next)
			default:
				if !exists {
					next[id] = r
				}
				apply(fmt.Sprintf("INSERT INTO %s VALUES %s ON CONFLICT (id) DO NOTHING", table, values(id, r)), next)
			}
		case op < 8: // change of primary key
			to := 1 + rng.IntN(keys)
			if _, taken := model[to]; !exists || taken {
				break
			}
			delete(next, id)
			next[to] = cur
			apply(fmt.Sprintf("UPDATE %s SET id = %d WHERE id = %d", table, to, id), next)
		case op < 10:
			sp := fmt.Sprintf("s%d", step)
			must("SAVEPOINT " + sp)
			marks = append(marks, mark{sp, maps.Clone(model)})
		case op < 11:
			if len(marks) == 0 {
				break
			}
			i := rng.IntN(len(marks))
			must("ROLLBACK TO SAVEPOINT " + marks[i].name)
			model = maps.Clone(marks[i].model)
			marks = marks[:i+1]
		default:
			if len(marks) == 0 {
				break
			}
			// RELEASE destroys the savepoint and every later one.
			i := rng.IntN(len(marks))
			must("RELEASE SAVEPOINT " + marks[i].name)
			marks = marks[:i]
		}
		check(fmt.Sprintf("after statement %d", len(log)))
	}
	must("COMMIT")
	check("after COMMIT")
	return model
}

func fmtRows(rows map[int]modelRow) string {
	ids := slices.Sorted(maps.Keys(rows))
	var out []string
	for _, id := range ids {
		out = append(out, fmt.Sprintf("%d:%s", id, rows[id]))
	}
	return strings.Join(out, " ")
}
