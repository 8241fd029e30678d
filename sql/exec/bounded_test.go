package exec

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/mon"
)

// TestWindowPartitionSpill: one partition of 20,000 rows under a 64 KiB
// work_mem goes to a spilling buffer for every window function and frame
// (window_spill.go: streamed, or read by position through a bounded
// cache), and the answers are those of the same query with no limit
// (ties, NULLs, FILTER, every frame shape). The node budget's peak stays
// a fraction of what holding the partitions took.
func TestWindowPartitionSpill(t *testing.T) {
	const rows = `(SELECT g, CASE WHEN g % 97 = 0 THEN NULL ELSE g % 100 END AS k FROM generate_series(1, 20000) g) t`
	ctx := context.Background()
	cases := []string{
		// Streamed.
		`SELECT g, sum(g) OVER (ORDER BY k, g), sum(g) OVER (ORDER BY k) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, row_number() OVER w, rank() OVER w, dense_rank() OVER w, percent_rank() OVER w, cume_dist() OVER w FROM ` + rows + ` WINDOW w AS (ORDER BY k DESC) ORDER BY g`,
		`SELECT g, ntile(7) OVER (ORDER BY g), ntile(30000) OVER (ORDER BY g), ntile(NULL::int) OVER (ORDER BY g) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, count(*) OVER (), avg(g) FILTER (WHERE k > 50) OVER (), max(k) OVER (ORDER BY g ROWS UNBOUNDED PRECEDING) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, sum(g) OVER (ORDER BY k RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), count(k) OVER (ORDER BY k GROUPS UNBOUNDED PRECEDING) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, first_value(g) OVER (ORDER BY k DESC, g), last_value(g) OVER (ORDER BY k), last_value(g) OVER (ORDER BY k, g ROWS BETWEEN CURRENT ROW AND CURRENT ROW), last_value(g) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM ` + rows + ` ORDER BY g`,
		// Read by position.
		`SELECT g, lag(g) OVER (ORDER BY k, g), lead(g, 5000, -1) OVER (ORDER BY k, g), lag(k, 3) OVER (ORDER BY g DESC) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, sum(g) OVER (ORDER BY g ROWS 2 PRECEDING), avg(g) OVER (ORDER BY g ROWS BETWEEN 10 PRECEDING AND 10 FOLLOWING) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, nth_value(g, 3) OVER (ORDER BY g ROWS BETWEEN 1 PRECEDING AND 6 FOLLOWING), nth_value(g, 700) OVER (ORDER BY k, g) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, count(*) OVER (ORDER BY k RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING), sum(g) OVER (ORDER BY k DESC GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM ` + rows + ` ORDER BY g`,
		`SELECT g, sum(g) OVER (ORDER BY g / 3 ROWS BETWEEN 3 PRECEDING AND 3 FOLLOWING EXCLUDE GROUP), first_value(g) OVER (ORDER BY g ROWS BETWEEN CURRENT ROW AND 4 FOLLOWING EXCLUDE CURRENT ROW) FROM ` + rows + ` ORDER BY g`,
	}
	for _, q := range cases {
		mem := newSpillEnv(t, 0)
		want, err := mem.run(ctx, q, 0)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		memPeak := mem.node.Peak()
		sp := newSpillEnv(t, 0)
		got, err := sp.run(ctx, q, 64<<10)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got != want {
			t.Fatalf("%s: spilled answer differs:\n%.500s\nin memory:\n%.500s", q, got, want)
		}
		sp.leftovers(t, q)
		if sp.temp.FilesCreated() == 0 {
			t.Errorf("%s: nothing spilled", q)
		}
		if sp.node.Peak()*4 > memPeak {
			t.Errorf("%s: peak %s spilled, %s in memory", q, mon.FormatBytes(sp.node.Peak()), mon.FormatBytes(memPeak))
		}
	}
}

// TestNestedLoopBounded: a nested-loop join (no equality keys) whose
// inner side is 10,000 rows of 100-byte strings runs within work_mem as
// a block nested loop, for every join kind with an inner side to hold,
// with the answers of the same join held in memory.
func TestNestedLoopBounded(t *testing.T) {
	const outer = `(SELECT g, repeat('o', 50) AS pad FROM generate_series(1, 150) g) o`
	const inner = `(SELECT h, repeat('i', 100) AS ipad FROM generate_series(1, 10000) h) i`
	ctx := context.Background()
	for _, q := range []string{
		`SELECT g, h, length(pad || ipad) FROM ` + outer + ` JOIN ` + inner + ` ON h BETWEEN g * 60 AND g * 60 + 2`,
		`SELECT g, h FROM ` + outer + ` LEFT JOIN ` + inner + ` ON h BETWEEN g * 60 AND g * 60 + 2 AND g % 3 = 0`,
		`SELECT g, h FROM ` + outer + ` RIGHT JOIN ` + inner + ` ON h BETWEEN g * 60 AND g * 60 + 2 AND g % 3 = 0`,
		`SELECT g, h FROM ` + outer + ` FULL JOIN ` + inner + ` ON h BETWEEN g * 60 AND g * 60 + 2 AND g % 3 = 0`,
	} {
		mem := newSpillEnv(t, 0)
		want, err := mem.run(ctx, q, 0)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		sp := newSpillEnv(t, 0)
		got, err := sp.run(ctx, q, 64<<10)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if sortedLines(got) != sortedLines(want) {
			t.Fatalf("%s: spilled answer differs:\n%.500s\nin memory:\n%.500s", q, sortedLines(got), sortedLines(want))
		}
		sp.leftovers(t, q)
		if sp.temp.FilesCreated() == 0 {
			t.Errorf("%s: nothing spilled", q)
		}
		// Held, the inner side is over 2 MB; spilled, the operators hold
		// a few times work_mem.
		if sp.node.Peak() > 256<<10 || mem.node.Peak() < 2<<20 {
			t.Errorf("%s: peak %s spilled, %s in memory", q, mon.FormatBytes(sp.node.Peak()), mon.FormatBytes(mem.node.Peak()))
		}
	}
}

// TestHashJoinSkew: a hash join whose right side is 6,000 rows of one
// key (about 2 MB held) under a 64 KiB work_mem and a 1 MiB node budget
// cannot be split by hashing; the skewed partition is joined as a block
// nested loop over its spilled sides (join.go) for every outer join kind, with
// the answers of the same join in memory. Held after the last split, the
// partition would need the whole right side: 53200 under this budget.
func TestHashJoinSkew(t *testing.T) {
	const right = `(SELECT CASE WHEN h % 1000 = 0 THEN NULL ELSE 1 END AS rk, h, repeat('r', 200) AS pad FROM generate_series(1, 6000) h) r`
	const left = `(SELECT CASE WHEN g % 9 = 0 THEN NULL ELSE g % 3 END AS lk, g FROM generate_series(1, 60) g) l`
	ctx := context.Background()
	for _, q := range []string{
		`SELECT count(*), sum(g), sum(h), sum(length(pad)) FROM ` + left + ` JOIN ` + right + ` ON lk = rk`,
		`SELECT count(*), sum(g), sum(h), count(pad) FROM ` + left + ` LEFT JOIN ` + right + ` ON lk = rk AND h % 7 <> g % 7`,
		`SELECT count(*), sum(g), sum(h), count(pad) FROM ` + left + ` RIGHT JOIN ` + right + ` ON lk = rk AND h < g * 50`,
		`SELECT count(*), sum(g), sum(h), count(pad) FROM ` + left + ` FULL JOIN ` + right + ` ON lk = rk AND h < g * 50`,
	} {
		mem := newSpillEnv(t, 0)
		want, err := mem.run(ctx, q, 0)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		sp := newSpillEnv(t, 0)
		sp.node = mon.NewBudget("SQL memory", 1<<20)
		got, err := sp.run(ctx, q, 64<<10)
		if err != nil {
			t.Fatalf("%s: %v (in memory: %s)", q, err, want)
		}
		if got != want {
			t.Fatalf("%s: spilled %s, in memory %s", q, got, want)
		}
		sp.leftovers(t, q)
		if sp.temp.FilesCreated() == 0 {
			t.Errorf("%s: nothing spilled", q)
		}
		if mem.node.Peak() < 2<<20 {
			t.Errorf("%s: in memory, peak %s: the right side is not over the budget", q, mon.FormatBytes(mem.node.Peak()))
		}
	}
}

// TestHashJoinWritesLeftOnce: a hash join whose right side needs two
// levels of partitions splits the right partitions again before it reads
// the left side (presplit, join.go), so the left rows are written to
// disk once, not once per level; the right rows are written once per
// level. Both sides have n rows (whichever the planner builds on), the
// right side about 16 times work_mem's worth in each first-level
// partition: every row of it is written twice, every left row once.
func TestHashJoinWritesLeftOnce(t *testing.T) {
	const n = 150_000
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT g AS a FROM generate_series(1, %d) g) x JOIN (SELECT g * 2 AS b FROM generate_series(1, %d) g) y ON a = b`, n, n)
	e := newSpillEnv(t, 0)
	before := e.temp.RowsWritten()
	got, err := e.run(context.Background(), q, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d\n", n/2); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	e.leftovers(t, q)
	if w := e.temp.RowsWritten() - before; w <= 2*n || w > 3*n {
		t.Errorf("%d rows written for two sides of %d rows: want the right side twice (two levels) and the left once, %d", w, n, 3*n)
	}
}

// TestHashAggWritesRowsOnce: a GROUP BY of many more groups than work_mem
// holds writes each spilled row once: its first split is wide enough
// (hashAggFanout) that every partition's groups fit one table. With a
// fixed 16-way split the partitions here (6,000-odd groups each, against
// a table of about 1,300) were split again and their rows written twice.
func TestHashAggWritesRowsOnce(t *testing.T) {
	const n = 200_000
	q := fmt.Sprintf(`SELECT count(*), sum(c) FROM (SELECT g %% %d AS k, count(*) AS c FROM generate_series(1, %d) g GROUP BY 1) s`, n/2, n)
	e := newSpillEnv(t, 0)
	before, files := e.temp.RowsWritten(), e.temp.FilesCreated()
	got, err := e.run(context.Background(), q, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d %d\n", n/2, n); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	e.leftovers(t, q)
	w, f := e.temp.RowsWritten()-before, e.temp.FilesCreated()-files
	if w > n || w < n/2 {
		t.Errorf("%d rows written for %d input rows: want each spilled row written once (more than half of them spill)", w, n)
	}
	if f > maxAggFanout {
		t.Errorf("%d files: want one split of at most %d", f, maxAggFanout)
	}
}

// TestWindowShiftStageNotBuffered: lag and lead by constants over one
// partition past work_mem are computed from the stage's sorted rows; the
// same query with a lead reaching past the ring (each function read by
// position from a spilled Buffer in a pass of its own) writes the
// partition once more at least.
func TestWindowShiftStageNotBuffered(t *testing.T) {
	const n = 100_000
	e := newSpillEnv(t, 0)
	written := func(lead int) (string, int64) {
		q := fmt.Sprintf(`SELECT count(*), sum(x) FROM (SELECT lag(g, 3) OVER w - lead(g, %d, 0) OVER w AS x FROM generate_series(1, %d) g WINDOW w AS (ORDER BY g DESC)) s`, lead, n)
		before := e.temp.RowsWritten()
		got, err := e.run(context.Background(), q, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		e.leftovers(t, q)
		return got, e.temp.RowsWritten() - before
	}
	got, streamed := written(1000)
	// sum over rows i of g(i+3 back) - g(1000 ahead): computed directly.
	var sum int64
	rows := make([]int64, n)
	for i := range rows {
		rows[i] = int64(n - i) // ORDER BY g DESC
	}
	nulls := 0
	for i := range rows {
		if i < 3 {
			nulls++
			continue
		}
		var ahead int64
		if i+1000 < n {
			ahead = rows[i+1000]
		}
		sum += rows[i-3] - ahead
	}
	if want := fmt.Sprintf("%d %d\n", n, sum); got != want {
		t.Fatalf("got %q, want %q (%d NULLs)", got, want, nulls)
	}
	_, buffered := written(maxRingRows + 1000)
	t.Logf("rows written: %d streamed, %d through a Buffer", streamed, buffered)
	if buffered-streamed < n/2 {
		t.Errorf("rows written: %d streamed, %d through a Buffer: want the streamed stage to skip the partition's write (%d rows)", streamed, buffered, n)
	}
}

// TestWindowForwardStageNotBuffered: row_number over partitions past
// work_mem (bench/spill's window query, smaller) is computed from the
// stage's sorted rows, with the answer a direct computation gives, and
// writes only the sort's runs; the same partitions with percent_rank
// beside it (read ahead: through a spilled Buffer) write them once more.
func TestWindowForwardStageNotBuffered(t *testing.T) {
	const n, parts = 200_000, 10
	e := newSpillEnv(t, 0)
	written := func(extra string) (string, int64) {
		q := fmt.Sprintf(`SELECT count(*), sum(rn) FROM (SELECT row_number() OVER w AS rn%s FROM generate_series(1, %d) g WINDOW w AS (PARTITION BY g %% %d ORDER BY g DESC)) s`, extra, n, parts)
		before := e.temp.RowsWritten()
		got, err := e.run(context.Background(), q, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		e.leftovers(t, q)
		return got, e.temp.RowsWritten() - before
	}
	got, streamed := written("")
	p := int64(n / parts) // rows per partition: row_number sums to p(p+1)/2 in each
	if want := fmt.Sprintf("%d %d\n", n, parts*p*(p+1)/2); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if streamed > n {
		t.Errorf("%d rows written for %d rows sorted: want only the sort's runs", streamed, n)
	}
	_, buffered := written(", percent_rank() OVER w AS pr")
	t.Logf("rows written: %d streamed, %d through a Buffer", streamed, buffered)
	if buffered-streamed < n/2 {
		t.Errorf("rows written: %d streamed, %d through a Buffer: want the streamed stage to skip the partitions' write (%d rows)", streamed, buffered, n)
	}
}

// TestWindowSlidingStageNotBuffered: an aggregate over a sliding ROWS
// frame over one partition past work_mem is computed from the stage's
// sorted rows (a ringIter over the frame), with the answer a direct
// computation gives; the same frame reaching past the ring (read by
// position from a spilled Buffer) writes the partition once more at
// least.
func TestWindowSlidingStageNotBuffered(t *testing.T) {
	const n = 100_000
	e := newSpillEnv(t, 0)
	// The frame holds rows i-before to i-after (after < 0: following).
	written := func(before, after int) (string, int64) {
		end := fmt.Sprintf("%d PRECEDING", after)
		if after < 0 {
			end = fmt.Sprintf("%d FOLLOWING", -after)
		}
		q := fmt.Sprintf(`SELECT count(*), sum(x) FROM (SELECT sum(g) OVER (ORDER BY g DESC ROWS BETWEEN %d PRECEDING AND %s) AS x FROM generate_series(1, %d) g) s`, before, end, n)
		rows := e.temp.RowsWritten()
		got, err := e.run(context.Background(), q, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		e.leftovers(t, q)
		return got, e.temp.RowsWritten() - rows
	}
	want := func(before, after int) string {
		// Row i (0-based) holds g = n-i; its frame is rows i-before to
		// i-after inside the partition.
		var sum int64
		for i := range n {
			for j := max(i-before, 0); j <= min(i-after, n-1); j++ {
				sum += int64(n - j)
			}
		}
		return fmt.Sprintf("%d %d\n", n, sum)
	}
	got, streamed := written(5, -5)
	if w := want(5, -5); got != w {
		t.Fatalf("got %q, want %q", got, w)
	}
	// Four rows, the furthest maxRingRows behind.
	got, buffered := written(maxRingRows, maxRingRows-3)
	if w := want(maxRingRows, maxRingRows-3); got != w {
		t.Fatalf("past the ring: got %q, want %q", got, w)
	}
	t.Logf("rows written: %d streamed, %d through a Buffer", streamed, buffered)
	if buffered-streamed < n/2 {
		t.Errorf("rows written: %d streamed, %d through a Buffer: want the streamed stage to skip the partition's write (%d rows)", streamed, buffered, n)
	}
}

// TestHashJoinSplitWithinBudget: a hash join whose right side needs two
// levels of splits (dozens of finest partitions, every one filled by
// the left rows at once) keeps its memory, the files' write buffers
// included, within work_mem: the node's peak reservation (the join is
// the only operator holding memory) and the write buffers the temporary
// files held at once both stay under it. At 16 KiB a file, the left
// side's buffers alone would be 4 MiB.
func TestHashJoinSplitWithinBudget(t *testing.T) {
	const n, workMem = 100_000, 128 << 10
	e := newSpillEnv(t, 0)
	q := fmt.Sprintf(`SELECT count(*), sum(a) FROM (SELECT g AS a FROM generate_series(1, %d) g) x JOIN (SELECT g * 2 AS b FROM generate_series(1, %d) g) y ON a = b`, n, n/2)
	files := e.temp.FilesCreated()
	got, err := e.run(context.Background(), q, workMem)
	if err != nil {
		t.Fatal(err)
	}
	// The even numbers up to n: n/2 of them, summing to n/2 (n/2 + 1).
	if want := fmt.Sprintf("%d %d\n", n/2, int64(n/2)*int64(n/2+1)); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	e.leftovers(t, q)
	f := e.temp.FilesCreated() - files
	t.Logf("%d files; peak reservation %d, peak write buffers %d, work_mem %d", f, e.node.Peak(), e.temp.WriteBuffersPeak(), workMem)
	if f <= 4*spillFanout {
		t.Fatalf("%d files: want two levels of splits (one level is %d right and %d left files)", f, spillFanout, spillFanout)
	}
	if p := e.node.Peak(); p > workMem {
		t.Errorf("peak reservation %d bytes, work_mem %d", p, workMem)
	}
	if p := e.temp.WriteBuffersPeak(); p > workMem {
		t.Errorf("peak write buffers %d bytes, work_mem %d", p, workMem)
	}
}

// TestWindowForwardMatchesBuiltins: forward-only functions (fwdIter,
// computed as a stage's sorted rows come) give what builtins' window
// functions give over the same partitions: each query is run again with
// lead(g, 0) added to its window, which makes its stage read ahead, so
// builtins compute it (in memory, or from a spilled Buffer at work_mem
// 1 byte). Peers, NULLs in arguments and keys, FILTER, no ORDER BY, one
// partition and many.
func TestWindowForwardMatchesBuiltins(t *testing.T) {
	e := newSpillEnv(t, 0)
	const src = `(SELECT g, g % 7 AS m, g % 300 AS k, CASE WHEN g % 11 = 0 THEN NULL ELSE g % 13 END AS v, CASE WHEN g % 5 = 0 THEN NULL ELSE 'v' || (g % 130)::text END AS s FROM generate_series(1, 3000) g) t`
	for _, w := range []string{
		`PARTITION BY m ORDER BY k`,
		`PARTITION BY m ORDER BY v DESC NULLS LAST, k`,
		`ORDER BY v NULLS FIRST`,
		`PARTITION BY s`,
		``,
	} {
		fns := `row_number() OVER w AS a, rank() OVER w AS b, dense_rank() OVER w AS c, sum(v) OVER (w ROWS UNBOUNDED PRECEDING) AS d, count(s) FILTER (WHERE g % 3 = 0) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS e, first_value(s) OVER w AS f, last_value(v) OVER (w ROWS BETWEEN CURRENT ROW AND CURRENT ROW) AS h`
		fwd := fmt.Sprintf(`SELECT g, a, b, c, d, e, f, h FROM (SELECT g, %s FROM %s WINDOW w AS (%s)) x ORDER BY g`, fns, src, w)
		ahead := fmt.Sprintf(`SELECT g, a, b, c, d, e, f, h FROM (SELECT g, %s, lead(g, 0) OVER w AS z FROM %s WINDOW w AS (%s)) x ORDER BY g`, fns, src, w)
		for _, workMem := range []int64{0, 1} {
			got, err := e.run(context.Background(), fwd, workMem)
			if err != nil {
				t.Fatal(err)
			}
			want, err := e.run(context.Background(), ahead, workMem)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("WINDOW w AS (%s), work_mem %d: forward-only\n%s\nbuiltins\n%s", w, workMem, firstDiff(got, want), firstDiff(want, got))
			}
		}
	}
}

// firstDiff is a's first line that differs from b's, with its number.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range al {
		if i >= len(bl) || al[i] != bl[i] {
			return fmt.Sprintf("line %d: %s", i+1, al[i])
		}
	}
	return fmt.Sprintf("%d lines", len(al))
}
