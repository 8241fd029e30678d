package distsql_test

// Citus colocation as a shared table group (issue 17): tables
// distributed with colocate_with share one hash-partitioned group, so
// rows with equal distribution values are in one tablet, a transaction
// writing them in several tables commits in one phase, their joins run
// tablet by tablet, and dropping or undistributing one leaves the others'
// rows in the group untouched.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/rowenc"
)

func TestColocatedTablesShareGroup(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	for _, name := range []string{"orders", "items", "notes", "apart"} {
		mustExec(t, c, fmt.Sprintf("CREATE TABLE %s (k INT, id INT, v INT, PRIMARY KEY (k, id))", name))
		mustExec(t, c, fmt.Sprintf("INSERT INTO %s SELECT i %% 50, i, i * 3 FROM generate_series(1, 2000) AS i", name))
	}
	mustExec(t, c, "CREATE INDEX ON items (v)")
	mustExec(t, c, "SET citus.shard_count = 4")
	mustExec(t, c, "SELECT create_distributed_table('orders', 'k')")
	mustExec(t, c, "SELECT create_distributed_table('items', 'k', colocate_with => 'orders')")
	mustExec(t, c, "SELECT create_distributed_table('notes', 'k')") // 'default': orders' group
	mustExec(t, c, "SELECT create_distributed_table('apart', 'k', colocate_with => 'none')")

	// One colocation ID for the three, another for apart; the three
	// are in the same four tablets, apart in four others.
	if got := strings.Join(rows(t, c, "SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE logicalrelid::text <> 'apart'"), ","); got != "1" {
		t.Errorf("colocation IDs of the colocated tables: %s", got)
	}
	tabletsOf := func(table string) string {
		return strings.Join(rows(t, c, fmt.Sprintf("SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = '%s' AND index_name IS NULL ORDER BY 1", table)), ",")
	}
	orders := tabletsOf("orders")
	if n := len(strings.Split(orders, ",")); n != 4 {
		t.Fatalf("orders is in tablets %s, want 4", orders)
	}
	for _, other := range []string{"items", "notes"} {
		if got := tabletsOf(other); got != orders {
			t.Errorf("%s is in tablets %s, orders in %s", other, got, orders)
		}
	}
	if got := tabletsOf("apart"); got == orders || strings.Contains(","+orders+",", ","+strings.Split(got, ",")[0]+",") {
		t.Errorf("apart (colocate_with => 'none') is in tablets %s, orders in %s", got, orders)
	}

	// The same distribution value in two colocated tables: one phase.
	// In a table with a group of its own: two.
	commits := func() (uint64, uint64) {
		_, one, two := servers[0].SQLCommits()
		return one, two
	}
	block := func(stmts ...string) {
		t.Helper()
		mustExec(t, c, "BEGIN")
		for _, s := range stmts {
			mustExec(t, c, s)
		}
		mustExec(t, c, "COMMIT")
	}
	one0, two0 := commits()
	for i := range 10 {
		key := 1000 + i
		block(fmt.Sprintf("INSERT INTO orders VALUES (%d, %d, 1)", key, key),
			fmt.Sprintf("INSERT INTO items VALUES (%d, %d, 2), (%d, %d, 3)", key, key, key, key+100000),
			fmt.Sprintf("INSERT INTO notes VALUES (%d, %d, 4)", key, key))
	}
	one1, two1 := commits()
	if one1-one0 != 10 || two1 != two0 {
		t.Errorf("10 same-key transactions over colocated tables: %d one-phase and %d two-phase commits, want 10 and 0", one1-one0, two1-two0)
	}
	for i := range 10 {
		key := 2000 + i
		block(fmt.Sprintf("INSERT INTO orders VALUES (%d, %d, 1)", key, key),
			fmt.Sprintf("INSERT INTO apart VALUES (%d, %d, 1)", key, key))
	}
	one2, two2 := commits()
	if one2 != one1 || two2-two1 != 10 {
		t.Errorf("10 same-key transactions over tables not colocated: %d one-phase and %d two-phase commits, want 0 and 10", one2-one1, two2-two1)
	}

	// Reads see each table's own rows only.
	for _, q := range []struct{ sql, want string }{
		{"SELECT count(*), sum(v) FROM orders", "2020 6003020"},
		{"SELECT count(*), sum(v) FROM items", "2020 6003050"},
		{"SELECT count(*) FROM items WHERE v = 3", "11"},
		{"SELECT count(*), sum(v) FROM notes", "2010 6003040"},
		{"SELECT count(*) FROM orders o JOIN items i ON o.k = i.k AND o.id = i.id", "2010"},
	} {
		if got := strings.Join(rows(t, c, q.sql), ","); got != q.want {
			t.Errorf("%s: %s, want %s", q.sql, got, q.want)
		}
	}
	mustExec(t, c, "SET distsql = on")
	plan := strings.Join(rows(t, c, "EXPLAIN SELECT count(*) FROM orders o JOIN items i ON o.k = i.k AND o.id = i.id"), "\n")
	if !strings.Contains(plan, "Join: colocated") {
		t.Errorf("the join of colocated tables is not colocated:\n%s", plan)
	}

	// Dropping one table, or moving it out, frees its keys only.
	group := groupOf(t, c, "orders")
	keysIn := func() map[uint32]int { return tableKeys(t, servers[0], group) }
	before := keysIn()
	if len(before) != 3 {
		t.Fatalf("group %d holds keys of %d tables, want 3: %v", group, len(before), before)
	}
	itemsID, notesID, ordersID := tableID(t, c, "items"), tableID(t, c, "notes"), tableID(t, c, "orders")
	mustExec(t, c, "DROP TABLE items")
	after := keysIn()
	if after[itemsID] != 0 || after[ordersID] != before[ordersID] || after[notesID] != before[notesID] {
		t.Errorf("after DROP TABLE items the group holds %v, before %v", after, before)
	}
	mustExec(t, c, "SELECT undistribute_table('notes')")
	after = keysIn()
	if after[notesID] != 0 || after[ordersID] != before[ordersID] {
		t.Errorf("after undistribute_table('notes') the group holds %v, before %v", after, before)
		// Which buckets: a batch of the clear that failed leaves the
		// buckets from it on (kv.DB.ClearRanges; the node logs why).
		sp := rowenc.GroupSpan(group)
		kvs, _ := servers[0].DB().Scan(context.Background(), sp.Key, sp.EndKey, 0)
		for _, kv := range kvs {
			if p, _, _ := rowenc.DecodeKeyPrefix(kv.Key); p.Table == notesID {
				t.Logf("notes' key left in bucket %d: %x", p.Bucket, kv.Key)
			}
		}
	}
	for _, q := range []struct{ sql, want string }{
		{"SELECT count(*), sum(v) FROM orders", "2020 6003020"},
		{"SELECT count(*), sum(v) FROM notes", "2010 6003040"},
	} {
		if got := strings.Join(rows(t, c, q.sql), ","); got != q.want {
			t.Errorf("%s: %s, want %s", q.sql, got, q.want)
		}
	}
}

// groupOf is the table group of distributed table name: its colocation
// ID, which for the first table of a colocation group is its group's.
func groupOf(t *testing.T, c *pgx.Conn, name string) uint64 {
	t.Helper()
	var g int64
	if err := c.QueryRow(context.Background(), "SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = $1::regclass", name).Scan(&g); err != nil {
		t.Fatal(err)
	}
	return uint64(g)
}

// tableID is table name's descriptor ID (its OID).
func tableID(t *testing.T, c *pgx.Conn, name string) uint32 {
	t.Helper()
	var id uint32
	if err := c.QueryRow(context.Background(), "SELECT $1::regclass::oid", name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// tableKeys counts the keys of each table in table group g, as stored.
func tableKeys(t *testing.T, s *server.Server, g uint64) map[uint32]int {
	t.Helper()
	sp := rowenc.GroupSpan(g)
	kvs, err := s.DB().Scan(context.Background(), sp.Key, sp.EndKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]int{}
	for _, kv := range kvs {
		p, _, err := rowenc.DecodeKeyPrefix(kv.Key)
		if err != nil {
			t.Fatalf("key %x of group %d: %v", kv.Key, g, err)
		}
		out[p.Table]++
	}
	return out
}
