package ddl_test

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/sql/ddl"
)

// TestOnlineBackfillCutRanges builds indexes whose entries are cut into
// SSTs from several key ranges at once (the threshold lowered to a few
// KiB) while writers change the table: each index is exact, the entries
// are counted once; a unique build over duplicates fails with 23505
// naming the key, whichever range the duplicates fall in (both rows of a
// duplicate share one range); below the threshold one SST holds them.
func TestOnlineBackfillCutRanges(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	const initial = 20000
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, fmt.Sprintf("INSERT INTO t SELECT g, (g * 7919) %% 5000, g FROM generate_series(1, %d) g", initial))

	// Below the threshold: one stream, one SST.
	mustExec(t, c, "CREATE INDEX t_w ON t (w)")
	if r, n := ddl.LastBackfillRanges(), ddl.LastBackfillSSTs(); r != 1 || n != 1 {
		t.Errorf("a small build: %d ranges, %d SSTs; want 1 and 1", r, n)
	}

	defer ddl.SetCutParallelBytes(ddl.SetCutParallelBytes(4 << 10))
	ws := startIndexWriters(t, url, 3, initial, "")
	if err := ws.waitCommits(10); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	_, _, entries := ddl.LastBackfill()
	ranges, ssts := ddl.LastBackfillRanges(), ddl.LastBackfillSSTs()
	if err := ws.waitCommits(10); err != nil {
		t.Fatal(err)
	}
	ws.finish(t)
	t.Logf("t_v: %d entries cut from %d ranges into %d SSTs", entries, ranges, ddl.LastBackfillSSTs())
	if ranges < 2 || ssts < ranges {
		t.Errorf("t_v: cut from %d ranges into %d SSTs; want several ranges, an SST each at least", ranges, ssts)
	}
	if entries < initial {
		t.Errorf("t_v: %d entries backfilled, fewer than the %d rows before the build", entries, initial)
	}
	checkIndexExact(t, s, c, "t_v")

	// Duplicates: k's of the same w, at the start, middle and end of the
	// key order of w, so whichever range each lands in it holds both.
	for _, dup := range []int{-1, initial / 2, initial * 3} {
		mustExec(t, c, "UPDATE t SET w = $1 WHERE k = 17", dup)
		mustExec(t, c, "UPDATE t SET w = $1 WHERE k = 18001", dup)
		_, err := c.Exec(t.Context(), "CREATE UNIQUE INDEX t_wu ON t (w)")
		if want := fmt.Sprintf("Key (w)=(%d) is duplicated.", dup); sqlState(err) != "23505" || pgDetail(err) != want {
			t.Fatalf("unique build over w = %d twice: %v (%s), want 23505 %q", dup, err, pgDetail(err), want)
		}
		mustExec(t, c, "UPDATE t SET w = k WHERE k IN (17, 18001)")
	}
	mustExec(t, c, "CREATE UNIQUE INDEX t_wu ON t (w)")
	if r := ddl.LastBackfillRanges(); r < 2 {
		t.Errorf("t_wu: cut from %d ranges, want several", r)
	}
	checkIndexExact(t, s, c, "t_wu")
}

// TestOnlineBackfillCutRangesSpilled: a build whose sort spilled runs (a
// budget of 64 KiB) is cut from several key ranges too, each a merge of
// the runs from its lower bound: the index is exact, a unique build over
// duplicates at the start, middle or end of the key order fails with
// 23505 naming the key, and a global index's tablet is split at each
// range's first key and as each range fills it (invariant 4), so its
// tablets end up many.
func TestOnlineBackfillCutRangesSpilled(t *testing.T) {
	defer ddl.SetIndexBuildMemory(ddl.SetIndexBuildMemory(64 << 10))
	defer ddl.SetCutParallelBytes(ddl.SetCutParallelBytes(4 << 10))
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	const rows = 20000
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT) SPLIT INTO 4 TABLETS")
	mustExec(t, c, fmt.Sprintf("INSERT INTO t SELECT g, (g * 7919) %% 5000, g FROM generate_series(1, %d) g", rows))

	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	_, runs, entries := ddl.LastBackfill()
	ranges := ddl.LastBackfillRanges()
	t.Logf("t_v: %d entries, %d runs, %d ranges, %d SSTs", entries, runs, ranges, ddl.LastBackfillSSTs())
	if runs < 2 || ranges < 2 || entries != rows {
		t.Errorf("t_v: %d runs, %d ranges, %d entries; want runs and ranges >= 2, %d entries", runs, ranges, entries, rows)
	}
	checkIndexExact(t, s, c, "t_v")

	for _, dup := range []int{-1, rows / 2, rows * 3} {
		mustExec(t, c, "UPDATE t SET w = $1 WHERE k = 17", dup)
		mustExec(t, c, "UPDATE t SET w = $1 WHERE k = 18001", dup)
		_, err := c.Exec(t.Context(), "CREATE UNIQUE INDEX t_wu ON t (w)")
		if want := fmt.Sprintf("Key (w)=(%d) is duplicated.", dup); sqlState(err) != "23505" || pgDetail(err) != want {
			t.Fatalf("unique build over w = %d twice: %v (%s), want 23505 %q", dup, err, pgDetail(err), want)
		}
		if r := ddl.LastBackfillRanges(); r < 2 {
			t.Errorf("unique build over w = %d twice: cut from %d ranges, want several", dup, r)
		}
		mustExec(t, c, "UPDATE t SET w = k WHERE k IN (17, 18001)")
	}
	mustExec(t, c, "CREATE UNIQUE INDEX t_wu ON t (w)")
	checkIndexExact(t, s, c, "t_wu")

	// Splits: about 600 KB of entries, a split every 64 KiB of a range's
	// entries and one at each range's first key.
	defer ddl.SetBackfillSSTBytes(ddl.SetBackfillSSTBytes(16 << 10))
	defer ddl.SetBackfillSplitBytes(ddl.SetBackfillSplitBytes(64 << 10))
	mustExec(t, c, "CREATE INDEX t_vw ON t (v, w)")
	splits, ranges := ddl.LastBackfillSplits(), ddl.LastBackfillRanges()
	var tablets int
	if err := c.QueryRow(t.Context(),
		"SELECT count(*) FROM cairn_catalog.tablets WHERE table_name = 't' AND index_name = 't_vw'").Scan(&tablets); err != nil {
		t.Fatal(err)
	}
	t.Logf("t_vw: %d ranges, %d SSTs, %d splits, %d tablets", ranges, ddl.LastBackfillSSTs(), splits, tablets)
	if ranges < 2 || splits < 4 || tablets < splits+1 {
		t.Errorf("t_vw: %d ranges, %d splits, %d tablets (want >= 2 ranges, >= 4 splits, a tablet more than splits)", ranges, splits, tablets)
	}
	checkIndexExact(t, s, c, "t_vw")
}
