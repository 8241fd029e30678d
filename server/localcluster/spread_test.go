package localcluster

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestHashShardedLeasesSpread: the nine bucket tablets of a new
// hash-sharded primary index have their leases on the three nodes three
// apiece, by the DDL itself (ddl.spreadLeases): the periodic lease
// balancer is off (lease preferences `none`), so without the spreading
// every lease stays with the node that led the range before the splits.
// The check polls only because cairn_catalog.tablets reads leaders from
// the tablet directory, which learns a transfer after it happens.
func TestHashShardedLeasesSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 3, LeasePreferences: "none", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	conn, err := pgx.Connect(ctx, c.URL(0, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, tc := range []struct{ name, ddl, table, index string }{
		{"kv", `CREATE TABLE kv (k int PRIMARY KEY USING HASH WITH (bucket_count = 9), v int)`, "kv", ""},
		{"kv2", `CREATE TABLE kv2 (k int, v int, PRIMARY KEY (k) USING HASH WITH (bucket_count = 9))`, "kv2", ""},
		// A hash-partitioned table's initial tablets (splitTable).
		{"kv3", `CREATE TABLE kv3 (k int PRIMARY KEY, v int) WITH (cairn_split_tablets = 9)`, "kv3", ""},
		// A secondary hash-sharded index built online (index_job).
		{"kv_v", `CREATE INDEX kv_v ON kv (v) USING HASH WITH (bucket_count = 9)`, "kv", "kv_v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			if _, err := conn.Exec(ctx, tc.ddl); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s took %v", tc.ddl, time.Since(start))
			var got map[int32]int
			deadline := time.Now().Add(10 * time.Second)
			for {
				got, err = bucketLeaders(ctx, conn, tc.table, tc.index)
				if err != nil {
					t.Fatal(err)
				}
				if spread(got, 9, 3) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("leases of %s %s's 9 bucket tablets per node: %v, want 3 each (within one)", tc.table, tc.index, got)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("leases per node: %v", got)
		})
	}
}

// bucketLeaders counts the leases of the tablets of table's index (""
// its rows) per leader node (0: unknown).
func bucketLeaders(ctx context.Context, conn *pgx.Conn, table, index string) (map[int32]int, error) {
	rows, err := conn.Query(ctx, `SELECT coalesce(leader, 0) FROM cairn_catalog.tablets
		WHERE table_name = $1 AND coalesce(index_name, '') = $2`, table, index)
	if err != nil {
		return nil, err
	}
	leaders, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	got := map[int32]int{}
	for _, l := range leaders {
		got[l]++
	}
	return got, nil
}

// spread reports that total tablets have known leaders on nodes nodes,
// each holding total/nodes of them within one.
func spread(got map[int32]int, total, nodes int) bool {
	n := 0
	for l, c := range got {
		if l == 0 || c < total/nodes-1 || c > (total+nodes-1)/nodes+1 {
			return false
		}
		n += c
	}
	return n == total && len(got) == nodes
}
