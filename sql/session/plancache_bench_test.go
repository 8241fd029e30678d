package session_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkPreparedPointLookup times a prepared `SELECT v FROM t WHERE k =
// $1` (and the kv workload's `k IN ($1)`) over pgwire on one in-process
// node, on a table keyed by k and on one whose key is hash sharded into 16
// buckets: with the plan cache (plancache.go) both run a cached plan, so
// the sharded lookup costs what the unsharded one does plus computing the
// bucket. Compare the two in one run:
//
//	go test ./sql/session/ -run '^$' -bench PreparedPointLookup -count 3
func BenchmarkPreparedPointLookup(b *testing.B) {
	ctx := context.Background()
	_, url := startNode(b)
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	const rows = 10000
	for _, sql := range []string{
		"CREATE TABLE plain (k int8 PRIMARY KEY, v bytea)",
		"CREATE TABLE sharded (k int8 PRIMARY KEY USING HASH WITH (bucket_count = 16), v bytea)",
		fmt.Sprintf("INSERT INTO plain SELECT g, 'x' FROM generate_series(1, %d) g", rows),
		fmt.Sprintf("INSERT INTO sharded SELECT g, 'x' FROM generate_series(1, %d) g", rows),
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	// Each iteration runs the unsharded and then the sharded lookup of
	// the same key, timing each, so both meet the same machine load; the
	// metric that matters is their ratio.
	for _, op := range []string{"=", "IN"} {
		q := func(table string) string {
			if op == "IN" {
				return "SELECT v FROM " + table + " WHERE k IN ($1)"
			}
			return "SELECT v FROM " + table + " WHERE k = $1"
		}
		b.Run(map[string]string{"=": "eq", "IN": "in"}[op], func(b *testing.B) {
			var v []byte
			var plain, sharded time.Duration
			n := 0
			for i := 0; b.Loop(); i++ {
				k := int64(1 + i%rows)
				t0 := time.Now()
				if err := c.QueryRow(ctx, q("plain"), k).Scan(&v); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := c.QueryRow(ctx, q("sharded"), k).Scan(&v); err != nil {
					b.Fatal(err)
				}
				plain, sharded = plain+t1.Sub(t0), sharded+time.Since(t1)
				n++
			}
			b.ReportMetric(float64(plain.Nanoseconds())/float64(n), "unsharded-ns/lookup")
			b.ReportMetric(float64(sharded.Nanoseconds())/float64(n), "sharded-ns/lookup")
			b.ReportMetric(float64(sharded)/float64(plain), "sharded/unsharded")
		})
	}
}
