package exec_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/workload/githubevents"
)

// TestBulkCopyRecreated: bench/parallelindex's sequence (COPY into a
// fresh table, CREATE INDEX USING GIN, DROP, CREATE again with the GIN
// index, COPY), looped, for a regular and a distributed table, with and
// without the GIN index. Each COPY into the table created empty in an
// earlier statement takes the bulk path for an existing table
// (bulkLoadExisting: a new descriptor version) and must succeed: nothing
// but the COPY writes the table meanwhile. The 40001 the benchmark met
// in this sequence came from the transaction cleanup aborting a COPY of
// over a minute whose heartbeats a loaded disk held up
// (store.TestTxnCleanupSparesSlowHeartbeats shows that mechanism); on an
// idle machine this test passed on the code before that fix too.
func TestBulkCopyRecreated(t *testing.T) {
	if testing.Short() {
		t.Skip("a loop of loads")
	}
	s, url := startNode(t, t.TempDir())
	c := connect(t, url)
	ctx := context.Background()
	exec(t, c, "SET sql.stats.automatic_collection.enabled = off")
	const rows = 3000
	for _, tc := range []struct {
		name        string
		distributed bool
		gin         bool
	}{
		{"distributed_gin", true, true},
		{"distributed", true, false},
		{"regular_gin", false, true},
		{"regular", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := "ev_" + tc.name
			create := func(withGIN bool) {
				t.Helper()
				exec(t, c, "DROP TABLE IF EXISTS "+table)
				exec(t, c, githubevents.DDL(table))
				if tc.distributed {
					// A group of its own: an empty table colocated with
					// one holding rows is not seen as empty (its emptiness
					// read covers the shared group) and loads
					// transactionally.
					exec(t, c, fmt.Sprintf("SELECT create_distributed_table('%s', 'repo_id', shard_count => 8, colocate_with => 'none')", table))
				}
				if withGIN {
					exec(t, c, fmt.Sprintf("CREATE INDEX %s_payload ON %s USING GIN (payload)", table, table))
				}
			}
			load := func(round int, what string) {
				t.Helper()
				v := tableDesc(t, s, c, table).Version
				if err := githubevents.Copy(ctx, c, table, 0, rows); err != nil {
					t.Fatalf("round %d, %s: %v", round, what, err)
				}
				if got := tableDesc(t, s, c, table).Version; got != v+1 {
					t.Fatalf("round %d, %s: descriptor version %d to %d: the COPY into the empty table did not load in bulk", round, what, v, got)
				}
				var n int64
				if err := c.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != rows {
					t.Fatalf("round %d, %s: %d rows, %v", round, what, n, err)
				}
			}
			for round := range 2 {
				create(false)
				load(round, "COPY into a fresh table")
				if tc.gin {
					exec(t, c, fmt.Sprintf("CREATE INDEX %s_payload ON %s USING GIN (payload)", table, table))
				}
				create(tc.gin)
				load(round, "COPY into the table re-created")
			}
		})
	}
}
