package distsql_test

// A distribution column that is not the primary key's first column
// (Citus allows any column of the key; docs/distributed.md,
// "Decisions"), on three real servers: rows are hashed on it, so a query
// fixing it is a router query on one tablet, a join of two tables
// colocated on it runs tablet by tablet, and a join on the key's first
// column is not taken for a colocated one.

import (
	"strings"
	"testing"
)

func TestDistributionColumnNotFirst(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE orders (tenant INT, id INT, v INT, PRIMARY KEY (tenant, id))")
	mustExec(t, c, "CREATE TABLE items (item INT, id INT, qty INT, PRIMARY KEY (item, id))")
	mustExec(t, c, "INSERT INTO orders SELECT i % 13, i, i * 3 FROM generate_series(1, 3000) AS i")
	mustExec(t, c, "INSERT INTO items SELECT i, i % 3000 + 1, i % 7 FROM generate_series(1, 6000) AS i")
	queries := []string{
		"SELECT tenant, id, v FROM orders WHERE id = 1234",
		"SELECT tenant, id FROM orders WHERE id IN (7, 700, 2999, 5000) ORDER BY id",
		"SELECT count(*), sum(v) FROM orders WHERE tenant = 5",
		"SELECT count(*), sum(i.qty), sum(o.v) FROM orders o JOIN items i ON o.id = i.id",
		"SELECT count(*), sum(i.qty) FROM orders o JOIN items i ON o.tenant = i.item",
		"SELECT o.tenant, count(*) FROM orders o JOIN items i ON o.id = i.id GROUP BY 1 ORDER BY 1",
	}
	before := answers(t, c, queries)

	mustExec(t, c, "SELECT create_distributed_table('orders', 'id', shard_count => 8)")
	mustExec(t, c, "SELECT create_distributed_table('items', 'id', colocate_with => 'orders')")
	if got := strings.Join(rows(t, c, "SELECT concat_ws(' ', table_name::text, distribution_column, shard_count, colocation_id) FROM citus_tables ORDER BY 1"), ";"); !strings.HasPrefix(got, "items id 8 ") ||
		!strings.Contains(got, ";orders id 8 ") || strings.Fields(strings.Split(got, ";")[0])[3] != strings.Fields(strings.Split(got, ";")[1])[3] {
		t.Fatalf("citus_tables: %s, want items and orders on id, 8 shards, one colocation ID", got)
	}
	tabletsOf := func(table string) string {
		return strings.Join(rows(t, c, "SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = '"+table+"' AND index_name IS NULL ORDER BY 1"), ",")
	}
	if o, i := tabletsOf("orders"), tabletsOf("items"); o != i || strings.Count(o, ",") != 7 {
		t.Errorf("orders in tablets %s, items in %s: want the same 8", o, i)
	}
	// Statistics, as the automatic collection may have made them or not
	// by now: the join plans must not depend on which.
	mustExec(t, c, "ANALYZE orders")
	mustExec(t, c, "ANALYZE items")
	sameAnswersDistSQL(t, c, queries, before)

	// The distribution column fixed: one bucket, one tablet, no fragments.
	t.Logf("router query:\n%s", routerQuery(t, c, queries[0]))
	// The key's first column alone fixes no shard: every tablet is read.
	plan := strings.Join(rows(t, c, "EXPLAIN ANALYZE "+queries[2]), "\n")
	if strings.Contains(plan, "Buckets:") || strings.Contains(plan, "to 1 tablet") {
		t.Errorf("a query on the key's first column read one shard:\n%s", plan)
	}

	// The join on the distribution columns pairs each tablet with itself;
	// the join on the keys' first columns is not colocated.
	t.Logf("colocated join:\n%s", colocatedJoin(t, c, queries[3], 8))
	plan = strings.Join(rows(t, c, "EXPLAIN "+queries[4]), "\n")
	if strings.Contains(plan, "Join: colocated") {
		t.Errorf("the join on the keys' first columns was taken for a colocated one:\n%s", plan)
	}
}
