package exec

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/jackc/pgerrcode"
)

// spillEnv runs queries with a memory budget and temporary storage.
type spillEnv struct {
	*env
	node *mon.Budget
	temp *rowcontainer.TempStorage
}

func newSpillEnv(t testing.TB, diskLimit int64) *spillEnv {
	temp, err := rowcontainer.NewTempStorage(t.TempDir()+"/temp", diskLimit)
	if err != nil {
		t.Fatal(err)
	}
	return &spillEnv{env: newEnv(t), node: mon.NewBudget("SQL memory", 0), temp: temp}
}

func (e *spillEnv) run(ctx context.Context, q string, workMem int64) (string, error) {
	return e.queryWith(ctx, q, func(x *Context) {
		x.Memory, x.WorkMem, x.TempStorage = e.node, workMem, e.temp
	})
}

// leftovers fails the test if the statement left memory reserved or
// temporary files behind.
func (e *spillEnv) leftovers(t testing.TB, q string) {
	t.Helper()
	if used := e.node.Used(); used != 0 {
		t.Errorf("%s: %d bytes of SQL memory still reserved", q, used)
	}
	if used := e.temp.Disk().Used(); used != 0 {
		t.Errorf("%s: %d bytes of temporary disk still reserved", q, used)
	}
	ents, err := os.ReadDir(e.temp.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("%s: %d temporary entries left (%s...)", q, len(ents), ents[0].Name())
	}
}

func sortedLines(s string) string {
	l := strings.Split(s, "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

// TestSpillingOperators runs each operator that holds rows with work_mem
// of 1 byte (everything spills, every partition recursively) and with
// none, and wants the same rows: in the same order where the query or
// the operator defines one. Each spilled run must have written temporary
// files, and none may be left afterwards.
func TestSpillingOperators(t *testing.T) {
	e := newSpillEnv(t, 0)
	// Every spilling case holds more than minSpillRows rows or keys.
	const g = `(SELECT g, g % 7 AS m, g % 300 AS k, CASE WHEN g % 5 = 0 THEN NULL ELSE 'v' || (g % 130)::text END AS s FROM generate_series(1, 3000) g) t`
	const g2 = `(SELECT g AS h, g % 11 AS n, g % 200 AS j FROM generate_series(-50, 2000, 3) g) u`
	cases := []struct {
		name    string
		q       string
		ordered bool // the output order is defined
		noSpill bool // no operator holds rows
	}{
		{"sort", `SELECT g, s FROM ` + g + ` ORDER BY s DESC NULLS LAST, g`, true, false},
		{"sort stable ties", `SELECT g, m FROM ` + g + ` ORDER BY m`, true, false},
		// A top-k sort of 7 rows holds them in a heap (under MinRunRows:
		// past work_mem); of 2005 rows, it sorts externally.
		{"sort limit", `SELECT g FROM ` + g + ` ORDER BY g DESC LIMIT 7`, true, true},
		{"sort big limit", `SELECT g, m FROM ` + g + ` ORDER BY m DESC LIMIT 2000 OFFSET 5`, true, false},
		{"group by", `SELECT s, count(*), sum(g), min(g) FROM ` + g + ` GROUP BY s`, false, false},
		{"group by few groups", `SELECT m, count(*) FROM ` + g + ` GROUP BY m`, false, true},
		{"group by many groups", `SELECT g / 2, count(*) FROM ` + g + ` GROUP BY g / 2`, false, false},
		{"group by ordered agg", `SELECT k, string_agg(g::text, ',' ORDER BY g DESC), count(DISTINCT s) FROM ` + g + ` GROUP BY k`, false, false},
		{"scalar agg", `SELECT count(*), sum(g) FROM ` + g, true, true},
		// One group at a time (no GROUP BY, a streaming one): DISTINCT
		// and ORDER BY aggregates' inputs spill to a sorter.
		{"scalar distinct agg", `SELECT count(DISTINCT g), sum(DISTINCT k), count(DISTINCT s), max(DISTINCT s) FROM ` + g, true, false},
		{"scalar ordered agg", `SELECT string_agg(g::text, ',' ORDER BY k, g DESC), array_agg(DISTINCT m ORDER BY m), array_agg(s ORDER BY m) FROM ` + g, true, false},
		{"streaming distinct agg", `SELECT m, count(DISTINCT k), string_agg(DISTINCT s, ',' ORDER BY s) FROM (SELECT * FROM ` + g + ` ORDER BY m) o GROUP BY m`, false, false},
		{"distinct", `SELECT DISTINCT s FROM ` + g, true, false},
		{"distinct on", `SELECT DISTINCT ON (k) k, g FROM ` + g + ` ORDER BY k, g DESC`, true, false},
		{"union", `SELECT k FROM ` + g + ` UNION SELECT j FROM ` + g2, true, false},
		{"union all", `SELECT m FROM ` + g + ` UNION ALL SELECT n FROM ` + g2, true, true},
		{"intersect", `SELECT k FROM ` + g + ` INTERSECT SELECT j FROM ` + g2, false, false},
		{"intersect all", `SELECT k FROM ` + g + ` INTERSECT ALL SELECT j FROM ` + g2, false, false},
		{"except", `SELECT g FROM ` + g + ` EXCEPT SELECT h FROM ` + g2, false, false},
		{"except all", `SELECT k FROM ` + g + ` EXCEPT ALL SELECT j FROM ` + g2, false, false},
		{"inner join", `SELECT g, h FROM ` + g + ` JOIN ` + g2 + ` ON g = h`, false, false},
		{"left join", `SELECT g, h, n FROM ` + g + ` LEFT JOIN ` + g2 + ` ON m = n AND g < h`, false, false},
		{"right join", `SELECT g, h FROM ` + g + ` RIGHT JOIN ` + g2 + ` ON g = h`, false, false},
		{"full join", `SELECT g, h FROM ` + g + ` FULL JOIN ` + g2 + ` ON g = h`, false, false},
		{"join null keys", `SELECT s, t2 FROM ` + g + ` FULL JOIN (SELECT CASE WHEN n > 3 THEN 'v' || n::text END AS t2 FROM ` + g2 + `) u2 ON s = t2`, false, false},
		// Nested-loop joins spill their inner side (a block nested loop).
		// [NOT] IN (subquery) in a WHERE spills its set and keeps its
		// input's order (inset.go).
		{"nested loop", `SELECT g, h FROM ` + g + ` JOIN ` + g2 + ` ON h BETWEEN g AND g + 1`, false, false},
		{"nested loop left", `SELECT g, h FROM ` + g + ` LEFT JOIN ` + g2 + ` ON h BETWEEN g AND g + 2 AND m = 3`, false, false},
		{"nested loop right", `SELECT g, h FROM ` + g + ` RIGHT JOIN ` + g2 + ` ON h > g * 2 AND g < 5`, false, false},
		{"nested loop full", `SELECT g, h FROM ` + g + ` FULL JOIN ` + g2 + ` ON h > g * 2 AND g < 5`, false, false},
		{"in subquery", `SELECT g, s FROM ` + g + ` WHERE g IN (SELECT h FROM ` + g2 + `) AND g % 3 = 1`, true, false},
		{"in subquery strings", `SELECT g, s FROM ` + g + ` WHERE s IN (SELECT 'v' || j::text FROM ` + g2 + ` WHERE j % 2 = 0)`, true, false},
		{"not in subquery", `SELECT g FROM ` + g + ` WHERE g NOT IN (SELECT h FROM ` + g2 + `)`, true, false},
		{"not in subquery null", `SELECT g FROM ` + g + ` WHERE g NOT IN (SELECT CASE WHEN h = 1000 THEN NULL ELSE h END FROM ` + g2 + `)`, true, false},
		{"not in null left", `SELECT g, s FROM ` + g + ` WHERE s NOT IN (SELECT 'v' || j::text FROM ` + g2 + ` WHERE j > 60)`, true, false},
		// Correlated sublinks are semi and anti hash joins
		// (sql/opt/decorrelate.go), which spill.
		{"not exists", `SELECT g FROM ` + g + ` WHERE NOT EXISTS (SELECT 1 FROM ` + g2 + ` WHERE h = g)`, false, false},
		{"exists", `SELECT g, s FROM ` + g + ` WHERE EXISTS (SELECT 1 FROM ` + g2 + ` WHERE j = k AND n > m)`, false, false},
		{"in correlated", `SELECT g FROM ` + g + ` WHERE k IN (SELECT j FROM ` + g2 + ` WHERE n = m)`, false, false},
		{"not in correlated", `SELECT g, s FROM ` + g + ` WHERE k NOT IN (SELECT CASE WHEN h = 1000 THEN NULL ELSE j END FROM ` + g2 + ` WHERE n = m + 1)`, false, false},
		{"in int widths", `SELECT g FROM ` + g + ` WHERE g IN (SELECT h::int2 FROM ` + g2 + `)`, false, false},
		{"in cast", `SELECT g FROM ` + g + ` WHERE g::numeric IN (SELECT h FROM ` + g2 + `)`, false, false},
		{"window", `SELECT g, m, row_number() OVER (PARTITION BY m ORDER BY g DESC), sum(g) OVER (PARTITION BY s) FROM ` + g, true, false},
		{"window ordered", `SELECT g, rank() OVER (ORDER BY m), lag(g) OVER (ORDER BY g) FROM ` + g + ` ORDER BY g`, true, false},
		// Functions and frames read by position over a spilled partition
		// (window_spill.go, computeSpilledRandom): lag, lead, nth_value,
		// sliding ROWS/RANGE/GROUPS frames, EXCLUDE, NULL keys both ways.
		{"window lag lead", `SELECT g, lag(g, 3) OVER w, lead(s, 700, 'none') OVER w, lag(g, m) OVER w FROM ` + g + ` WINDOW w AS (PARTITION BY g % 2 ORDER BY k, g)`, true, false},
		// lag/lead by constants share one pass over a ring of rows
		// (computeSpilledRing): negative and zero offsets, defaults read
		// from the current row, offsets past the partition, and one
		// reaching past the ring (read by position instead).
		{"window lag lead constants", `SELECT g, lag(g, -2) OVER w, lead(g, 0) OVER w, lag(g, 5, g * 10) OVER w, lead(s, 2999, 'end') OVER w, lead(g, 2500) OVER w, lag(k, 1) OVER (ORDER BY g DESC) FROM ` + g + ` WINDOW w AS (ORDER BY m, g)`, true, false},
		// A stage of nothing but such lag/lead is computed straight
		// from its sorted rows, never written to a Buffer
		// (windowStage.streamSorted): as the last stage (the rows Next
		// returns), as an earlier one, over partitions ending one after
		// another, with a second stage mixing a shift with an aggregate
		// (the Buffer path).
		{"window shifts streamed last", `SELECT g, lag(g, 3) OVER w, lead(s, 1, 'end') OVER w, lag(g, 0) OVER w, lead(g, -2, g * 10) OVER w, row_number() OVER (ORDER BY g) FROM ` + g + ` WINDOW w AS (PARTITION BY g % 3 ORDER BY k DESC, g)`, true, false},
		{"window shifts streamed first", `SELECT g, row_number() OVER (ORDER BY g DESC), lag(g, 2) OVER w, lead(s, 40) OVER w, lag(g, 1, -1) OVER (ORDER BY m, g), sum(g) OVER (ORDER BY m, g) FROM ` + g + ` WINDOW w AS (PARTITION BY m ORDER BY k, g)`, true, false},
		// A stage of nothing but forward-only functions (row_number,
		// rank, dense_rank, running aggregates, first_value, last_value
		// to the current row; window_forward.go) is computed straight
		// from its sorted rows: peers (k repeats within m), NULL
		// arguments, FILTER, several stages, the last one streamed and
		// an earlier one emitted, partitions ending one after another;
		// with percent_rank beside them the stage goes through a
		// Buffer.
		{"window forward streamed", `SELECT g, row_number() OVER w, rank() OVER w, dense_rank() OVER w, sum(g) OVER (w ROWS UNBOUNDED PRECEDING), count(s) FILTER (WHERE g % 3 = 0) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), first_value(s) OVER w, last_value(s) OVER (w ROWS UNBOUNDED PRECEDING), rank() OVER (ORDER BY k DESC), row_number() OVER (PARTITION BY s ORDER BY g DESC) FROM ` + g + ` WINDOW w AS (PARTITION BY m ORDER BY k)`, false, false},
		{"window forward no order", `SELECT g, row_number() OVER (PARTITION BY m), rank() OVER (PARTITION BY m), dense_rank() OVER (), sum(k) OVER (PARTITION BY m ROWS UNBOUNDED PRECEDING) FROM ` + g, false, false},
		{"window forward buffered", `SELECT g, row_number() OVER w, percent_rank() OVER w, rank() OVER w FROM ` + g + ` WINDOW w AS (PARTITION BY m ORDER BY k, g)`, true, false},
		{"window nth_value", `SELECT g, nth_value(g, 5) OVER (ORDER BY g ROWS BETWEEN 2 PRECEDING AND 10 FOLLOWING), nth_value(s, 600) OVER (ORDER BY k, g) FROM ` + g, true, false},
		{"window rows sliding", `SELECT g, sum(g) OVER (ORDER BY g ROWS BETWEEN 3 PRECEDING AND 2 FOLLOWING), count(s) OVER (ORDER BY g DESC ROWS BETWEEN 1 FOLLOWING AND 900 FOLLOWING) FROM ` + g, true, false},
		// Aggregates over ROWS frames with constant offsets are ring
		// functions too (ringIter): frames behind, around and ahead of
		// the row, empty ones (start after end), CURRENT ROW alone,
		// FILTER, partitions ending one after another, a frame reaching
		// past the ring (read by position instead); alone in their stage
		// (streamed from the sorted rows, windowStage.streamSorted) and
		// sharing one with lag and with row_number (a Buffer's pass).
		{"window rows ring streamed", `SELECT g, sum(g) OVER w, avg(k) OVER (PARTITION BY m ORDER BY g ROWS BETWEEN 7 PRECEDING AND 2 PRECEDING), count(s) OVER (PARTITION BY m ORDER BY g ROWS BETWEEN 3 FOLLOWING AND 1 FOLLOWING), min(s) OVER (PARTITION BY m ORDER BY g ROWS BETWEEN CURRENT ROW AND CURRENT ROW), count(*) FILTER (WHERE s IS NULL) OVER (PARTITION BY m ORDER BY g ROWS BETWEEN 40 PRECEDING AND 900 FOLLOWING), lag(g, 2) OVER w FROM ` + g + ` WINDOW w AS (PARTITION BY m ORDER BY g ROWS BETWEEN 5 PRECEDING AND 5 FOLLOWING)`, true, false},
		{"window rows ring buffered", `SELECT g, row_number() OVER w, sum(g) OVER (w ROWS BETWEEN 2 FOLLOWING AND 6 FOLLOWING), string_agg(s, ',') OVER (w ROWS BETWEEN 4 PRECEDING AND CURRENT ROW), max(g) OVER (w ROWS BETWEEN 2990 PRECEDING AND 1 PRECEDING), lead(g, 3, 0) OVER w FROM ` + g + ` WINDOW w AS (ORDER BY k DESC, g)`, true, false},
		{"window range sliding", `SELECT g, sum(g) OVER (ORDER BY k RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING), max(g) OVER (ORDER BY k DESC RANGE BETWEEN 5 PRECEDING AND 5 PRECEDING) FROM ` + g, true, false},
		{"window range nulls", `SELECT g, count(*) OVER (ORDER BY CASE WHEN m = 0 THEN NULL ELSE k END RANGE BETWEEN 3 PRECEDING AND 3 FOLLOWING), count(*) OVER (ORDER BY CASE WHEN m = 0 THEN NULL ELSE k END DESC RANGE BETWEEN 3 PRECEDING AND 3 FOLLOWING), sum(g) OVER (ORDER BY CASE WHEN m = 1 THEN NULL ELSE k END NULLS FIRST RANGE BETWEEN CURRENT ROW AND 40 FOLLOWING) FROM ` + g, false, false},
		{"window groups", `SELECT g, sum(g) OVER (ORDER BY k GROUPS BETWEEN 1 PRECEDING AND 2 FOLLOWING), first_value(g) OVER (ORDER BY k GROUPS BETWEEN 3 FOLLOWING AND 300 FOLLOWING) FROM ` + g, false, false},
		{"window exclude", `SELECT g, sum(g) OVER (ORDER BY m ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING EXCLUDE CURRENT ROW), count(*) OVER (ORDER BY k RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP), string_agg(g::text, ',') OVER (ORDER BY k ROWS BETWEEN 3 PRECEDING AND 3 FOLLOWING EXCLUDE TIES), nth_value(g, 2) OVER (ORDER BY m ROWS BETWEEN CURRENT ROW AND 5 FOLLOWING EXCLUDE GROUP) FROM ` + g, false, false},
		// Closed while the last stage is part way through a spilled
		// partition.
		{"window limit", `SELECT g, lag(g) OVER (PARTITION BY m ORDER BY g), sum(g) OVER (ORDER BY k ROWS 3 PRECEDING) FROM ` + g + ` LIMIT 700`, true, false},
		{"window whole with exclude", `SELECT g, count(*) OVER (PARTITION BY m ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE GROUP), last_value(g) OVER (ORDER BY g RANGE BETWEEN UNBOUNDED PRECEDING AND 10 FOLLOWING) FROM ` + g, false, false},
		{"cte", `WITH c AS MATERIALIZED (SELECT g FROM ` + g + `) SELECT count(*) FROM c a JOIN c b ON a.g = b.g`, true, false},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := e.run(ctx, c.q, 0)
			if err != nil {
				t.Fatal(err)
			}
			e.leftovers(t, c.q)
			before := e.temp.FilesCreated()
			got, err := e.run(ctx, c.q, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !c.ordered {
				want, got = sortedLines(want), sortedLines(got)
			}
			if got != want {
				t.Fatalf("%s\nspilled:\n%s\nin memory:\n%s", c.q, got, want)
			}
			e.leftovers(t, c.q)
			if spilled := e.temp.FilesCreated() > before; spilled == c.noSpill {
				t.Errorf("%s: spilled %v, want %v", c.q, spilled, !c.noSpill)
			}
		})
	}
}

// TestSpillCancel: a statement cancelled while it spills (its first file
// exists) stops with the context's error, releases its memory and
// removes its files: a sort, a hash aggregation, a hash join, a window
// over a spilled partition, DISTINCT.
func TestSpillCancel(t *testing.T) {
	e := newSpillEnv(t, 0)
	for _, q := range []string{
		`SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC`,
		`SELECT g % 100000, count(*) FROM generate_series(1, 200000) g GROUP BY 1`,
		`SELECT count(*) FROM generate_series(1, 200000) a JOIN generate_series(1, 200000) b ON a = b`,
		`SELECT lag(g, 2) OVER (ORDER BY g DESC), lead(g) OVER (ORDER BY g DESC) FROM generate_series(1, 200000) g`,
		`SELECT DISTINCT g % 150000 FROM generate_series(1, 200000) g`,
	} {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := e.queryWith(ctx, q, func(x *Context) {
			x.Memory, x.WorkMem, x.TempStorage = e.node, 64<<10, e.temp
			// Cancel once the operator has spilled: its first file
			// exists.
			go func() {
				defer cancel()
				for {
					if e.temp.Disk().Used() > 0 {
						return
					}
					if ctx.Err() != nil {
						return
					}
					runtimeGosched()
				}
			}()
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: got %v, want context.Canceled", q, err)
		}
		e.leftovers(t, q)
	}
}

// TestSpillDiskBudget: when temporary disk runs out as well, the
// statement fails with 53200 and leaves nothing behind.
func TestSpillDiskBudget(t *testing.T) {
	e := newSpillEnv(t, 1<<20)
	q := `SELECT g, repeat('x', 100) FROM generate_series(1, 100000) g ORDER BY g DESC`
	_, err := e.run(context.Background(), q, 64<<10)
	var pe *pgerror.Error
	if !errors.As(err, &pe) || pe.Code != pgerrcode.OutOfMemory {
		t.Fatalf("got %v, want 53200", err)
	}
	e.leftovers(t, q)
}

// TestLargeValue: a value over 1 GB is 54000; a large one is reserved
// in the node budget while held (53200 when the budget cannot hold it).
func TestLargeValue(t *testing.T) {
	e := newSpillEnv(t, 0)
	ctx := context.Background()
	_, err := e.run(ctx, `SELECT r || r FROM (SELECT repeat('x', 540000000) AS r) s`, 4<<20)
	if pgerror.Code(err) != pgerrcode.ProgramLimitExceeded {
		t.Fatalf("a 1.2 GB value: got %v, want 54000", err)
	}
	e.leftovers(t, "1.2 GB")
	e.node = mon.NewBudget("SQL memory", 10<<20)
	_, err = e.run(ctx, `SELECT repeat('x', 20000000)`, 4<<20)
	if pgerror.Code(err) != pgerrcode.OutOfMemory {
		t.Fatalf("a 20 MB value in a 10 MB budget: got %v, want 53200", err)
	}
	e.leftovers(t, "20 MB")
	if _, err = e.run(ctx, `SELECT length(repeat('x', 5000000))`, 4<<20); err != nil {
		t.Fatal(err)
	}
}

func runtimeGosched() { runtime.Gosched() }

// TestSubqueryAccounted: an uncorrelated IN subquery's values outside a
// WHERE (here a FILTER) are a set that spills (subset.go), and a
// correlated one's are reserved in the node budget while the statement
// holds them; past it, 53200. In a WHERE, the same set spills (inset.go)
// and the statement completes within a 1 MiB node budget (held, its
// 200,000 values would take over 10 MiB).
func TestSubqueryAccounted(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 1<<20)
	q := `SELECT count(*) FILTER (WHERE g IN (SELECT generate_series(1, 200000))) FROM generate_series(1, 10) g`
	if got, err := e.run(context.Background(), q, 4<<20); err != nil || got != "10\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	e.leftovers(t, q)
	q = `SELECT count(*) FILTER (WHERE g IN (SELECT h + g - g FROM generate_series(1, 200000) h)) FROM generate_series(1, 10) g`
	if _, err := e.run(context.Background(), q, 4<<20); pgerror.Code(err) != pgerrcode.OutOfMemory {
		t.Fatalf("got %v, want 53200", err)
	}
	e.leftovers(t, q)
	q = `SELECT count(*) FROM generate_series(1, 10) g WHERE g IN (SELECT generate_series(1, 2000))`
	if got, err := e.run(context.Background(), q, 4<<20); err != nil || got != "10\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	e.leftovers(t, q)
	before := e.temp.FilesCreated()
	q = `SELECT count(*) FROM generate_series(1, 10) g WHERE g IN (SELECT generate_series(1, 200000))`
	if got, err := e.run(context.Background(), q, 256<<10); err != nil || got != "10\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	if e.temp.FilesCreated() == before {
		t.Errorf("%s: the set did not spill", q)
	}
	e.leftovers(t, q)
}

// TestAggregateHeldBounded: what an aggregate holds for one group (a
// DISTINCT aggregate's seen keys, array_agg's and string_agg's inputs, in
// a hash or a streaming GROUP BY) is reserved as it grows: under a 1 MiB
// node budget each stops with 53200 instead of growing with its input,
// and leaves nothing reserved; and one aggregate's value stops at
// maxAggValue with 54000 (PostgreSQL's 1 GB bound, lowered here).
func TestAggregateHeldBounded(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 1<<20)
	const big = `generate_series(1, 5000000) g`
	for _, q := range []string{
		`SELECT count(DISTINCT g) FROM ` + big,
		`SELECT length(string_agg(g::text, ',')) FROM ` + big,
		`SELECT array_length(array_agg(g), 1) FROM ` + big,
		`SELECT length(jsonb_agg(g)::text) FROM ` + big,
		`SELECT g % 2, cardinality(array_agg(g)) FROM ` + big + ` GROUP BY 1`,
		// Ordered input, a streaming GROUP BY.
		`SELECT k, count(DISTINCT g) FROM (SELECT 1 AS k, g FROM ` + big + ` ORDER BY 1) s GROUP BY k`,
	} {
		_, err := e.run(context.Background(), q, 4<<20)
		if pgerror.Code(err) != pgerrcode.OutOfMemory {
			t.Errorf("%s: got %v, want 53200", q, err)
		}
		e.leftovers(t, q)
	}
	e.node = mon.NewBudget("SQL memory", 1<<30)
	defer func(v int64) { maxAggValue = v }(maxAggValue)
	maxAggValue = 64 << 10
	q := `SELECT length(string_agg(g::text, ',')) FROM generate_series(1, 100000) g`
	_, err := e.run(context.Background(), q, 4<<20)
	if pgerror.Code(err) != pgerrcode.ProgramLimitExceeded {
		t.Errorf("%s: got %v, want 54000", q, err)
	}
	e.leftovers(t, q)
	q = `SELECT length(string_agg(g::text, ',')) FROM generate_series(1, 1000) g`
	if got, err := e.run(context.Background(), q, 4<<20); err != nil || got != "3892\n" {
		t.Errorf("%s: got %q, %v", q, got, err)
	}
}

// TestDistinctAggregateSpills: a DISTINCT aggregate over one group whose
// values outgrow work_mem finishes within a node budget far smaller than
// the values (its inputs past work_mem go to a sorter that spills), with
// PostgreSQL's answer.
func TestDistinctAggregateSpills(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 2<<20)
	q := `SELECT count(DISTINCT g), sum(DISTINCT g % 1000), count(DISTINCT g::text) FROM generate_series(1, 200000) g`
	before := e.temp.FilesCreated()
	got, err := e.run(context.Background(), q, 256<<10)
	if err != nil || got != "200000 499500 200000\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	if e.temp.FilesCreated() == before {
		t.Errorf("%s: nothing spilled", q)
	}
	e.leftovers(t, q)
	// With GROUP BY: the input sorted by the group columns, one group at
	// a time.
	q = `SELECT g % 2, count(DISTINCT g), count(DISTINCT g % 1000) FROM generate_series(1, 200000) g GROUP BY 1 ORDER BY 1`
	got, err = e.run(context.Background(), q, 256<<10)
	if err != nil || got != "0 100000 500\n1 100000 500\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	e.leftovers(t, q)
}

// TestSubqueryHeldBounded: a subquery whose values are held (an IN list
// correlated through its select list, which sql/opt does not turn into a
// join, an ARRAY, which is one value) reserves them in the node budget as
// they arrive: over 50 million rows under a 1 MiB budget, each stops with
// 53200 at the budget and its hint (held without a check, the values
// would take gigabytes before any reservation), and leaves nothing
// reserved.
func TestSubqueryHeldBounded(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 1<<20)
	const big = `(SELECT generate_series(1, 50000000))`
	for _, q := range []string{
		`SELECT count(*) FROM generate_series(1, 3) g WHERE g IN (SELECT h + g - g FROM generate_series(1, 50000000) h)`,
		`SELECT array_length(ARRAY` + big + `, 1)`,
	} {
		_, err := e.run(context.Background(), q, 4<<20)
		var pe *pgerror.Error
		if !errors.As(err, &pe) || pe.Code != pgerrcode.OutOfMemory || !strings.Contains(pe.Hint, "held in memory") {
			t.Errorf("%s: got %v, want 53200 with a hint", q, err)
		}
		e.leftovers(t, q)
	}
}

// TestCorrelatedCacheBounded: a correlated IN subquery that is not a join
// (correlated through its select list, in a FILTER) caches each outer
// binding's values only up to work_mem: 300 bindings of 5,000 values
// (some 48 MiB together) finish under a 1 MiB node budget, where the
// cache used to keep them all and stop with 53200.
func TestCorrelatedCacheBounded(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 1<<20)
	q := `SELECT count(*) FILTER (WHERE g * 10 IN (SELECT h + g - g FROM generate_series(1, 5000) h)) FROM generate_series(1, 300) g`
	if got, err := e.run(context.Background(), q, 256<<10); err != nil || got != "300\n" {
		t.Fatalf("%s: got %q, %v", q, got, err)
	}
	e.leftovers(t, q)
}

// TestSubquerySetSpills: x IN (uncorrelated subquery) and NOT IN outside
// a WHERE's AND list (a select list, under OR, in CASE) look x up in a
// set that spills past work_mem (subset.go): 200,000 values, which held
// would take some 14 MiB, finish under a 1 MiB node budget with
// PostgreSQL's answers (NULL rules included), write temporary files and
// leave nothing behind.
func TestSubquerySetSpills(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 1<<20)
	const big = `(SELECT generate_series(1, 200000))`
	const bigNull = `(SELECT CASE WHEN h = 5 THEN NULL ELSE h END FROM generate_series(1, 200000) h)`
	const vals = `(VALUES (1, 0), (2, 7), (3, 199999), (4, 200001), (5, NULL), (6, 5), (7, 200000)) v(i, g)`
	for _, c := range []struct{ q, want string }{
		{`SELECT i, g IN ` + big + `, g NOT IN ` + big + `, g <> ALL ` + big + ` FROM ` + vals + ` ORDER BY i`,
			"1 f t t\n2 t f f\n3 t f f\n4 f t t\n5 NULL NULL NULL\n6 t f f\n7 t f f\n"},
		{`SELECT i, g IN ` + bigNull + `, g NOT IN ` + bigNull + ` FROM ` + vals + ` ORDER BY i`,
			"1 NULL NULL\n2 t f\n3 t f\n4 NULL NULL\n5 NULL NULL\n6 NULL NULL\n7 t f\n"},
		{`SELECT count(*) FROM generate_series(1, 3000) g WHERE g < 0 OR g * 80 IN ` + big, "2500\n"},
		{`SELECT sum(CASE WHEN g % 2 = 0 THEN (g * 100 NOT IN ` + big + `)::int ELSE 10 END) FROM generate_series(1, 3000) g`, "15500\n"},
		{`SELECT count(*) FILTER (WHERE g::text IN (SELECT h::text FROM generate_series(1, 100000) h)) FROM generate_series(99990, 100010) g`, "11\n"},
	} {
		before := e.temp.FilesCreated()
		got, err := e.run(context.Background(), c.q, 4<<20)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.q, got, err, c.want)
		}
		if e.temp.FilesCreated() == before {
			t.Errorf("%s: the set did not spill", c.q)
		}
		e.leftovers(t, c.q)
	}
}

// TestCollectingGroupBySpills: a GROUP BY with aggregates that keep their
// inputs (array_agg, string_agg, jsonb_agg) aggregates its sorted input a
// group at a time, so a thousand groups whose inputs together take tens
// of MiB finish under a 2 MiB node budget (hashed, every group held its
// inputs at once and the statement stopped with 53200); one group whose
// inputs alone pass the budget is 53200 with a hint that it cannot spill.
func TestCollectingGroupBySpills(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 2<<20)
	q := `SELECT count(*), sum(c), sum(l), sum(j) FROM (SELECT g % 1000 AS k, cardinality(array_agg(g)) AS c, length(string_agg(g::text, ',')) AS l, jsonb_array_length(jsonb_agg(g)) AS j FROM generate_series(1, 300000) g GROUP BY 1) s`
	before := e.temp.FilesCreated()
	got, err := e.run(context.Background(), q, 256<<10)
	if err != nil || got != "1000 300000 1987895 300000\n" {
		t.Fatalf("%s: got %q, %v", q, got, err)
	}
	if e.temp.FilesCreated() == before {
		t.Errorf("%s: nothing spilled", q)
	}
	e.leftovers(t, q)
	q = `SELECT g % 2, cardinality(array_agg(g)) FROM generate_series(1, 300000) g GROUP BY 1`
	_, err = e.run(context.Background(), q, 256<<10)
	var pe *pgerror.Error
	if !errors.As(err, &pe) || pe.Code != pgerrcode.OutOfMemory || !strings.Contains(pe.Hint, "array_agg") || !strings.Contains(pe.Hint, "cannot spill") {
		t.Errorf("%s: got %v, want 53200 with a hint", q, err)
	}
	e.leftovers(t, q)
}

// TestGrowingFramesAndSublinksBounded: window aggregates over a frame
// growing from the partition's first row (the default frame with ORDER
// BY, ROWS UNBOUNDED PRECEDING, RANGE with large peer groups) over one
// 50,000-row partition (some 5 MiB in memory), and scalar and EXISTS subqueries in a select
// list, below a LIMIT or a GROUP BY, finish under a 1 MiB node budget
// with a 256 KiB work_mem, the partition on disk, and leave nothing
// behind.
func TestGrowingFramesAndSublinksBounded(t *testing.T) {
	e := newSpillEnv(t, 0)
	e.node = mon.NewBudget("SQL memory", 1<<20)
	const n = `generate_series(1, 50000) g`
	for _, c := range []struct{ q, want string }{
		{`SELECT count(*), sum(x) FROM (SELECT sum(g) OVER (ORDER BY g) AS x FROM ` + n + `) s`, "50000 20834583350000\n"},
		{`SELECT count(*), sum(x) FROM (SELECT sum(g) OVER (ORDER BY g ROWS UNBOUNDED PRECEDING) AS x FROM ` + n + `) s`, "50000 20834583350000\n"},
		{`SELECT count(*), sum(x) FROM (SELECT count(*) OVER (ORDER BY g / 1000 RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS x FROM ` + n + `) s`, "50000 1274999001\n"},
		{`SELECT count(*) FILTER (WHERE x) FROM (SELECT EXISTS (SELECT 1 FROM generate_series(1, 50000) h WHERE h = g * 2500) AS x FROM generate_series(1, 30) g) s`, "20\n"},
		{`SELECT sum(x) FROM (SELECT (SELECT max(h) FROM generate_series(1, 50000) h WHERE h <= g * 1000) AS x FROM generate_series(1, 3) g) s`, "6000\n"},
		{`SELECT count(*) FROM generate_series(1, 3) g WHERE g IN (SELECT h FROM generate_series(1, 50000) h ORDER BY h DESC LIMIT 40000)`, "0\n"},
		{`SELECT count(*) FROM generate_series(1, 3) g WHERE g IN (SELECT h % 20000 FROM generate_series(1, 50000) h GROUP BY 1)`, "3\n"},
	} {
		got, err := e.run(context.Background(), c.q, 256<<10)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.q, got, err, c.want)
		}
		e.leftovers(t, c.q)
	}
}

// TestHashAggFanout: the statement's input (size unknown) splits the
// most ways; a spilled partition splits by how many tables' worth of
// rows are left past the one that filled, with half as much again for
// error, within [minAggFanout, maxAggFanout].
func TestHashAggFanout(t *testing.T) {
	for _, c := range []struct {
		total, consumed int64
		want            int
	}{
		{-1, 20000, maxAggFanout},
		{1000, 0, maxAggFanout},
		{20001, 20000, minAggFanout},    // one row left over
		{40000, 20000, minAggFanout},    // 1 + 1.5 = 2, raised to 4
		{120000, 20000, 8},              // 1 + 1.5*5 = 8
		{156000, 20000, 11},             // 1 + 1.5*6.8 = 11
		{10000000, 20000, maxAggFanout}, // 751 ways, capped
	} {
		if got := hashAggFanout(c.total, c.consumed); got != c.want {
			t.Errorf("hashAggFanout(%d, %d) = %d, want %d", c.total, c.consumed, got, c.want)
		}
	}
}
