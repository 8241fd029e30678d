package server

import (
	"context"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestJoinChoiceFlipsWithProfile: the planner's choice between a lookup
// join and a hash join changes with storage.profile, in EXPLAIN (VERBOSE)
// (issue 19: "the planner's choice flipping with the profile (EXPLAIN
// tests)"). bench/joinchoice's flipping shape: 10,000 keys in no order
// joined into a 200,000-row table on a node whose block cache (1 MiB) is
// far smaller than the table, so each batch of sorted lookups reads the
// blocks its keys fall in again. On ssd a batch is 1,000 keys, ten
// batches each paying a read for nearly every key, and reading the table
// once for a hash join is cheaper; hdd and object-store batch 10,000 keys,
// one batch that reads the blocks (fetches the chunks) its keys fall in
// once, in order, about what the hash join's read costs, without the CPU
// of building on 200,000 rows (docs/sql.md, "Storage profiles";
// bench/joinchoice times both plans on each disk). The logic tests' tables
// are too small for the choice to change
// (test/logic/testdata/storage_profiles). The answer is the same whichever
// plan runs.
func TestJoinChoiceFlipsWithProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 210,000 rows")
	}
	ctx := context.Background()
	s := start(t, Config{Insecure: true, CacheSize: 1 << 20})
	defer s.Stop(ctx)
	pg := connectDB(t, s, "postgres")
	execAll(t, pg,
		// No automatic ANALYZE racing the one below (and its files).
		"SET sql.stats.automatic_collection.enabled = off",
		"BEGIN", "CREATE TABLE u (k INT8 PRIMARY KEY, v INT8, pad TEXT)",
		"INSERT INTO u SELECT g, g % 1000, repeat('x', 40) FROM generate_series(1, 200000) g", "COMMIT",
		"BEGIN", "CREATE TABLE t (a INT8 PRIMARY KEY, b INT8)",
		// A golden-ratio permutation: keys in no order.
		"INSERT INTO t SELECT g, (g * 123607) % 200000 + 1 FROM generate_series(1, 10000) g", "COMMIT")
	// Into sorted files before ANALYZE, as bench/joinchoice does, so
	// that it sees u's size on disk (less than its keys and values: the
	// pad compresses) in files rather than part of it in a memtable.
	if err := s.CompactStore(ctx); err != nil {
		t.Fatal(err)
	}
	execAll(t, pg, "ANALYZE u", "ANALYZE t")
	var wantSum int64
	for g := int64(1); g <= 10000; g++ {
		wantSum += ((g*123607)%200000 + 1) % 1000
	}
	const q = "SELECT count(*), sum(v) FROM t JOIN u ON t.b = u.k"
	// The costs rest on u's bytes on disk, which move by a few hundred
	// bytes with the wall clock (the MVCC timestamps in its keys compress
	// differently from one day to the next: 93660 became 93610 on
	// 2026-12-01), so each is held to within 1% of the figure measured
	// when the model was written; the choice itself must not move.
	for _, tc := range []struct {
		profile, node      string
		chosen, rejected   string
		chosenC, rejectedC float64
	}{
		{"ssd", "Hash Join", "hash join", "lookup join", 263400, 922959},
		{"hdd", "Lookup Join on u using u_pkey (batched)", "lookup join", "hash join", 93660, 276624},
		{"object-store", "Lookup Join on u using u_pkey (batched)", "lookup join", "hash join", 170100, 352500},
	} {
		execAll(t, pg, "SET storage.profile = '"+tc.profile+"'")
		rows, err := pg.Query(ctx, "EXPLAIN (VERBOSE) "+q, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		var chosenC, rejectedC float64
		m := joinCostRE.FindStringSubmatch(plan)
		if m != nil {
			chosenC, _ = strconv.ParseFloat(m[2], 64)
			rejectedC, _ = strconv.ParseFloat(m[4], 64)
		}
		if !strings.Contains(plan, "->  "+tc.node+"\n") || m == nil || m[1] != tc.chosen || m[3] != tc.rejected ||
			!near(chosenC, tc.chosenC) || !near(rejectedC, tc.rejectedC) {
			t.Errorf("storage.profile %s: want %q, costing %s %.0f (rejected: %s %.0f) within 1%%:\n%s",
				tc.profile, tc.node, tc.chosen, tc.chosenC, tc.rejected, tc.rejectedC, plan)
		}
		var n, sum int64
		if err := pg.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		if n != 10000 || sum != wantSum {
			t.Errorf("storage.profile %s: %d rows summing %d, want 10000 and %d", tc.profile, n, sum, wantSum)
		}
	}
}

// joinCostRE reads EXPLAIN (VERBOSE)'s "Join Method Cost" line: the
// chosen method and its cost, then the rejected one and its cost.
var joinCostRE = regexp.MustCompile(`Join Method Cost: (lookup join|hash join|merge join) (\d+) \(rejected: (lookup join|hash join|merge join) (\d+)\)`)

// near reports whether got is within 1% of want.
func near(got, want float64) bool { return math.Abs(got-want) <= want/100 }
