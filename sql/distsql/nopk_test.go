package distsql_test

// A table without a primary key (the seed's github_events; its hidden
// rowid the key) distributed on three real servers (docs/distributed.md,
// "Tables without a primary key"): its key becomes (column, rowid), so a
// query fixing the column is a router query on one tablet, a join of two
// such tables colocated on it runs tablet by tablet, and every answer is
// the one from before, with distsql off and on.

import (
	"strings"
	"testing"
)

func TestDistributeTableWithoutPrimaryKey(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE events (repo INT, kind TEXT, v INT)")
	mustExec(t, c, "CREATE TABLE repos (repo INT, name TEXT)")
	// Equal rows twice: without a key they are two rows, before and after.
	mustExec(t, c, "INSERT INTO events SELECT i % 1500, 'k' || (i % 4), i FROM generate_series(1, 3000) AS i")
	mustExec(t, c, "INSERT INTO events SELECT 7, 'dup', 1 FROM generate_series(1, 2)")
	mustExec(t, c, "INSERT INTO repos SELECT i, 'r' || i FROM generate_series(0, 1499) AS i")
	queries := []string{
		"SELECT repo, kind, v FROM events WHERE repo = 7 ORDER BY v, kind",
		"SELECT count(*), sum(v) FROM events",
		"SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind",
		"SELECT count(*), sum(e.v), count(DISTINCT r.name) FROM events e JOIN repos r ON e.repo = r.repo",
	}
	before := answers(t, c, queries)

	mustExec(t, c, "SELECT create_distributed_table('events', 'repo', shard_count => 8)")
	mustExec(t, c, "SELECT create_distributed_table('repos', 'repo', colocate_with => 'events')")
	if got := strings.Join(rows(t, c, "SELECT concat_ws(' ', table_name::text, distribution_column, shard_count) FROM citus_tables ORDER BY 1"), ";"); got != "events repo 8;repos repo 8" {
		t.Fatalf("citus_tables: %s", got)
	}
	if got := rows(t, c, "SELECT count(*) FROM pg_constraint WHERE conrelid IN ('events'::regclass, 'repos'::regclass) AND contype = 'p'"); got[0] != "0" {
		t.Errorf("primary keys listed for tables declared without one: %v", got)
	}
	mustExec(t, c, "ANALYZE events")
	mustExec(t, c, "ANALYZE repos")
	sameAnswersDistSQL(t, c, queries, before)

	// The distribution column fixed: one bucket, one tablet, no fragments.
	t.Logf("router query:\n%s", routerQuery(t, c, queries[0]))
	// The join on the distribution columns pairs each tablet with itself.
	t.Logf("colocated join:\n%s", colocatedJoin(t, c, queries[3], 8))
}
