// Command followerread measures follower reads for AS OF SYSTEM TIME
// (issue #22; docs/architecture.md, "AS OF SYSTEM TIME"): on the
// simulated 3-region cluster of `cairn demo --nodes 3 --global` (us-west,
// us-east, eu; round trips 60, 86 and 145 ms) in this process, with every
// lease preferred in eu, a client on the us-west node runs a point SELECT
// by primary key, alternately plain (served by the eu leaseholder) and
// AS OF SYSTEM TIME follower_read_timestamp() (served by the us-west
// follower), and reports the client's median wall time of each, per run,
// and their ratio; the figure is the median over -runs runs. It also
// counts the KV batches the us-west node sent to other nodes for the
// table's tablets during the AS OF SYSTEM TIME reads (0 when every one
// was a follower read).
//
// Usage: go run ./bench/followerread [-runs 3] [-samples 50]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"slices"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server/localcluster"
	"github.com/jackc/pgx/v5"
)

var (
	flagRuns    = flag.Int("runs", 3, "timed runs; the median of their medians is reported")
	flagSamples = flag.Int("samples", 50, "point SELECTs of each kind per run")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 3, Global: true, LeasePreferences: "region=eu", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	conn, err := pgx.Connect(ctx, c.URL(0, "postgres")) // us-west
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{
		`CREATE TABLE kv (k int PRIMARY KEY, v text)`,
		// A zone of its own: tablets of its own, apart from the catalog's.
		`ALTER TABLE kv CONFIGURE ZONE USING gc.ttlseconds = 3600`,
		`INSERT INTO kv SELECT i, 'value ' || i FROM generate_series(1, 1000) AS i`,
	} {
		if _, err := conn.Exec(ctx, s, pgx.QueryExecModeSimpleProtocol); err != nil {
			log.Fatalf("%s: %v", s, err)
		}
	}
	ids := tablets(ctx, conn)
	// Leases in eu, and us-west's replicas closed past the load.
	loaded := time.Now().UnixNano()
	deadline := time.Now().Add(2 * time.Minute)
	for !ready(c, ids, loaded+int64(4200*time.Millisecond)) {
		if time.Now().After(deadline) {
			log.Fatal("leases not in eu, or us-west's replicas not closed past the load, after 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	plainQ := `SELECT v FROM kv WHERE k = $1`
	aostQ := `SELECT v FROM kv AS OF SYSTEM TIME follower_read_timestamp() WHERE k = $1`
	var plainMeds, aostMeds, ratios []float64
	for run := 1; run <= *flagRuns; run++ {
		var plain, aost []float64
		var remote int64
		for i := range *flagSamples {
			k := i%1000 + 1
			plain = append(plain, timed(ctx, conn, plainQ, k))
			before := remoteBatches(c, ids)
			aost = append(aost, timed(ctx, conn, aostQ, k))
			remote += remoteBatches(c, ids) - before
		}
		pm, am := median(plain), median(aost)
		plainMeds, aostMeds, ratios = append(plainMeds, pm), append(aostMeds, am), append(ratios, am/pm)
		fmt.Printf("run %d: plain %.2f ms, AS OF SYSTEM TIME follower_read_timestamp() %.2f ms (ratio %.3f); remote KV batches during the AOST reads: %d\n", run, pm, am, am/pm, remote)
	}
	fmt.Printf("median of %d runs: plain %.2f ms, AOST %.2f ms, AOST/plain %.3f\n", *flagRuns, median(plainMeds), median(aostMeds), median(ratios))
}

func timed(ctx context.Context, conn *pgx.Conn, q string, k int) float64 {
	start := time.Now()
	var v string
	if err := conn.QueryRow(ctx, q, k).Scan(&v); err != nil {
		log.Fatalf("%s: %v", q, err)
	}
	return float64(time.Since(start).Microseconds()) / 1000
}

func tablets(ctx context.Context, conn *pgx.Conn) []kvpb.TabletID {
	rows, err := conn.Query(ctx, `SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = 'kv'`)
	if err != nil {
		log.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		log.Fatalf("tablets of kv: %v %v", ids, err)
	}
	out := make([]kvpb.TabletID, len(ids))
	for i, id := range ids {
		out[i] = kvpb.TabletID(id)
	}
	return out
}

// ready: eu (node 3) leads every tablet of ids and us-west's (node 1)
// replicas have closed wall.
func ready(c *localcluster.Cluster, ids []kvpb.TabletID, wall int64) bool {
	for _, id := range ids {
		lh, west := c.Nodes[2].Replica(id), c.Nodes[0].Replica(id)
		if lh == nil || !lh.HoldsLease() || west == nil || west.ClosedTimestamp().WallTime < wall {
			return false
		}
	}
	return true
}

func remoteBatches(c *localcluster.Cluster, ids []kvpb.TabletID) int64 {
	var n int64
	for _, id := range ids {
		n += c.Nodes[0].RemoteKVBatches(id)
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
