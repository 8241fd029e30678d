package distsql_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestLocalGINIndex: on three nodes, a distributed table's GIN index is
// local (docs/distributed.md, "Local GIN indexes"): built online after
// the table is distributed, maintained by INSERT, COPY, UPDATE (moving
// rows between shards) and DELETE, and read a span per token and shard;
// every @>, ?, ?|, ?& and <@ answer through it, with distsql off and on,
// is a full scan's, and a predicate fixing the distribution column reads
// one block (the table is distributed by the second key column, so that
// such a predicate leaves the primary key's spans whole and the planner
// reads the index).
func TestLocalGINIndex(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE gev (repo_id INT8, id INT8, payload JSONB, PRIMARY KEY (id, repo_id))")
	mustExec(t, c, `INSERT INTO gev SELECT g % 37, g, jsonb_build_object('n', g % 7, 'tags', jsonb_build_array('t' || (g % 3), 't' || (g % 5)),
		'commits', jsonb_build_array(jsonb_build_object('author', jsonb_build_object('email', 'u' || (g % 11) || '@x.org')))) FROM generate_series(1, 3000) g`)
	mustExec(t, c, "SELECT create_distributed_table('gev', 'repo_id', shard_count => 6)")
	mustExec(t, c, "CREATE INDEX gev_payload ON gev USING gin (payload)")
	// COPY into the table with its index, then updates and deletes.
	var src [][]any
	for i := 3001; i <= 3400; i++ {
		src = append(src, []any{int64(i % 37), int64(i), fmt.Sprintf(`{"n": %d, "tags": ["t%d"], "commits": [{"author": {"email": "c%d@x.org"}}]}`, i%7, i%3, i%4)})
	}
	n, err := c.CopyFrom(ctx, pgx.Identifier{"gev"}, []string{"repo_id", "id", "payload"}, pgx.CopyFromRows(src))
	if err != nil || n != 400 {
		t.Fatalf("COPY: %d rows, %v", n, err)
	}
	mustExec(t, c, `UPDATE gev SET repo_id = repo_id + 1, payload = payload || '{"moved": true}' WHERE id % 50 = 0`)
	mustExec(t, c, "DELETE FROM gev WHERE id % 61 = 0")

	full := connect(t, servers[1])
	mustExec(t, full, "SET enable_indexscan = off")
	preds := []string{
		`payload @> '{"commits": [{"author": {"email": "u3@x.org"}}]}'`,
		`payload @> '{"commits": [{"author": {"email": "c1@x.org"}}]}'`,
		`payload @> '{"n": 2, "tags": ["t1"]}'`,
		`payload ? 'moved'`,
		`payload ?| '{moved,zz}'`,
		`payload ?& '{moved,n}'`,
		`'{"n": 4, "tags": ["t0", "t4"], "commits": [{"author": {"email": "u8@x.org"}}]}' <@ payload`,
		`payload @> '{"n": 3}' AND repo_id = 5`,
		`payload ? 'moved' AND repo_id IN (2, 9)`,
	}
	for _, distsql := range []string{"off", "on"} {
		mustExec(t, c, "SET distsql = "+distsql)
		mustExec(t, c, "SET enable_seqscan = off")
		for _, p := range preds {
			q := "SELECT id FROM gev WHERE " + p + " ORDER BY id"
			plan := strings.Join(rows(t, c, "EXPLAIN "+q), "\n")
			if !strings.Contains(plan, "Inverted Index Scan using gev_payload") {
				t.Fatalf("distsql %s: %s does not read the GIN index:\n%s", distsql, q, plan)
			}
			wantBlocks := "Local Blocks: all 6"
			switch {
			case strings.Contains(p, "repo_id = "):
				wantBlocks = "Local Blocks: 1 of 6"
			case strings.Contains(p, "repo_id IN (2, 9)"):
				// Buckets 1868 and 18710: the first and second shards.
				wantBlocks = "Local Blocks: 2 of 6"
			}
			if !strings.Contains(plan, wantBlocks) {
				t.Fatalf("distsql %s: %s: EXPLAIN lacks %q:\n%s", distsql, q, wantBlocks, plan)
			}
			// With distsql on, each block read is a fragment on its
			// tablet's leaseholder (the index join and its filter with
			// it); off, none.
			frags := len(fragmentLine.FindAllString(plan, -1))
			if n := blockCount(t, wantBlocks); distsql == "on" && (frags != n || !strings.Contains(plan, "Distribution: ")) {
				t.Fatalf("distsql on: %s: %d fragments, want one per block (%d):\n%s", q, frags, n, plan)
			} else if distsql == "off" && strings.Contains(plan, "Distribution") {
				t.Fatalf("distsql off: %s is distributed:\n%s", q, plan)
			}
			got, want := rows(t, c, q), rows(t, full, q)
			if !slices.Equal(got, want) {
				t.Fatalf("distsql %s: %s:\nthrough the local index %v\nfull scan %v", distsql, q, got, want)
			}
			if len(want) == 0 {
				t.Fatalf("%s matches nothing: the comparison proves little", q)
			}
		}
	}
	// Aggregates over the index join: partial in the fragments, final at
	// the gateway, equal to a full scan's.
	for _, q := range []string{
		`SELECT repo_id % 4, count(*), sum(id), max(payload->>'n') FROM gev WHERE payload ? 'moved' GROUP BY 1 ORDER BY 1`,
		`SELECT count(*), min(id) FROM gev WHERE payload @> '{"tags": ["t1"]}'`,
	} {
		mustExec(t, c, "SET distsql = on")
		plan := strings.Join(rows(t, c, "EXPLAIN "+q), "\n")
		if !strings.Contains(plan, "Inverted Index Scan using gev_payload") || !strings.Contains(plan, ", 6 fragments on ") {
			t.Fatalf("%s: not distributed through the GIN index:\n%s", q, plan)
		}
		got := rows(t, c, q)
		mustExec(t, c, "SET distsql = off")
		local := rows(t, c, q)
		if want := rows(t, full, q); !slices.Equal(got, want) || !slices.Equal(local, want) {
			t.Fatalf("%s:\ndistributed %v\nlocal %v\nfull scan %v", q, got, local, want)
		}
	}

	// Every column, no ORDER BY, no aggregate: the chain alone.
	q := `SELECT * FROM gev WHERE payload ? 'moved'`
	mustExec(t, c, "SET distsql = on")
	if plan := strings.Join(rows(t, c, "EXPLAIN "+q), "\n"); !strings.Contains(plan, ", 6 fragments on ") {
		t.Fatalf("%s: not distributed:\n%s", q, plan)
	}
	// EXPLAIN ANALYZE counts each fragment's rows; together they are
	// the answer's.
	analyzed := strings.Join(rows(t, c, "EXPLAIN ANALYZE "+q), "\n")
	var shipped int
	for _, m := range fragmentRows.FindAllStringSubmatch(analyzed, -1) {
		n, _ := strconv.Atoi(m[1])
		shipped += n
	}
	got, want := rows(t, c, q), rows(t, full, q)
	if shipped != len(want) {
		t.Fatalf("EXPLAIN ANALYZE %s: the fragments shipped %d rows, the answer has %d:\n%s", q, shipped, len(want), analyzed)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(want) == 0 {
		t.Fatalf("%s:\ndistributed %v\nfull scan %v", q, got, want)
	}

	// The index has no tablet of its own: each shard's entries are in
	// the shard's tablet.
	if got := rows(t, c, `SELECT count(*) FROM cairn_catalog.tablets i WHERE i.index_name = 'gev_payload'
		AND i.tablet_id NOT IN (SELECT r.tablet_id FROM cairn_catalog.tablets r WHERE r.table_name = 'gev' AND r.index_name IS NULL)`); got[0] != "0" {
		t.Errorf("gev_payload has %s tablets the table's rows are not in", got[0])
	}
}

// fragmentLine is EXPLAIN's line of one distributed fragment.
var fragmentLine = regexp.MustCompile(`Fragment \d+: node \d+`)

// fragmentRows is EXPLAIN ANALYZE's line of a fragment and the rows it
// shipped.
var fragmentRows = regexp.MustCompile(`Fragment \d+: node \d+, tablet \d+: (\d+) rows?`)

// blockCount is the number of blocks an EXPLAIN line "Local Blocks: all
// n" or "Local Blocks: k of n" says are read.
func blockCount(t *testing.T, line string) int {
	t.Helper()
	var k, n int
	if _, err := fmt.Sscanf(line, "Local Blocks: all %d", &n); err == nil {
		return n
	}
	if _, err := fmt.Sscanf(line, "Local Blocks: %d of %d", &k, &n); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return k
}
