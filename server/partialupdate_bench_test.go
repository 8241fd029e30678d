package server

import (
	"context"
	"math/rand/v2"
	"testing"
)

// BenchmarkPartialUpdate is bench/packedrows' partial update in process,
// for profiling: UPDATE narrow SET c4 = c4 + 1 WHERE id = $1 on random
// rows of a 10-column table of 10,000 rows, packed or not.
//
//	go test ./server/ -run '^$' -bench PartialUpdate -cpuprofile /tmp/pu.prof
func BenchmarkPartialUpdate(b *testing.B) {
	for _, packed := range []string{"on", "off"} {
		b.Run("packed="+packed, func(b *testing.B) {
			s := start(b, Config{Insecure: true})
			defer s.Stop(context.Background())
			ctx := context.Background()
			c := connect(b, s)
			defer c.Close(ctx)
			for _, q := range []string{
				"SET storage.packed_rows.enabled = " + packed,
				`CREATE TABLE narrow (id bigint PRIMARY KEY, c1 bigint, c2 bigint, c3 bigint,
					c4 int, c5 int, c6 text, c7 text, c8 text, c9 float8)`,
				`INSERT INTO narrow SELECT i, i*3, i*5, i*7, i % 1000, i % 77, 'name-' || i, 'constant text',
					to_hex(i * 2654435761), i / 3.0 FROM generate_series(0, 9999) AS g(i)`,
			} {
				if _, err := c.Exec(ctx, q); err != nil {
					b.Fatalf("%s: %v", q, err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Exec(ctx, "UPDATE narrow SET c4 = c4 + 1 WHERE id = $1", rng.Int64N(10000)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var n int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM narrow").Scan(&n); err != nil || n != 10000 {
				b.Fatalf("count %d, %v", n, err)
			}
		})
	}
}
