package exec

import (
	"context"
	"flag"
	"fmt"
	"testing"
)

var spillBenchRows = flag.Int("spill-bench-rows", 1_000_000, "rows of BenchmarkSpillQueries' generate_series")

// BenchmarkSpillQueries runs bench/spill's queries in process (one node,
// work_mem 4MB, spilling to a temporary directory), for CPU profiles of
// the spilling operators without a server or the client:
//
//	go test ./sql/exec -run '^$' -bench 'SpillQueries/window' -benchtime 1x \
//	    -spill-bench-rows 10000000 -cpuprofile /tmp/window.pprof
//
// bench/spill measures them against PostgreSQL; this is only for looking
// at where Cairn's time goes.
func BenchmarkSpillQueries(b *testing.B) {
	n := *spillBenchRows
	e := newSpillEnv(b, 0)
	for _, q := range []struct{ name, sql string }{
		{"order by", fmt.Sprintf(`SELECT g FROM generate_series(1, %d) g ORDER BY (g * 2654435761) %% 1000000007 DESC OFFSET %d`, n, n-1)},
		{"group by", fmt.Sprintf(`SELECT count(*), sum(c) FROM (SELECT g %% %d AS k, count(*) AS c FROM generate_series(1, %d) g GROUP BY 1) s`, n/2, n)},
		{"hash join", fmt.Sprintf(`SELECT count(*) FROM (SELECT g AS a FROM generate_series(1, %d) g) x JOIN (SELECT g * 2 AS b FROM generate_series(1, %d) g) y ON a = b`, n, n/2)},
		{"window", fmt.Sprintf(`SELECT count(*), sum(rn) FROM (SELECT row_number() OVER (PARTITION BY g %% 1000 ORDER BY g DESC) AS rn FROM generate_series(1, %d) g) s`, n)},
		{"lag-lead 1 partition", fmt.Sprintf(`SELECT count(*), sum(x) FROM (SELECT lag(g, 3) OVER w - lead(g, 1000, 0) OVER w AS x FROM generate_series(1, %d) g WINDOW w AS (ORDER BY g DESC)) s`, n)},
		{"sliding 1 partition", fmt.Sprintf(`SELECT count(*), sum(x) FROM (SELECT sum(g) OVER (ORDER BY g DESC ROWS BETWEEN 5 PRECEDING AND 5 FOLLOWING) AS x FROM generate_series(1, %d) g) s`, n)},
	} {
		b.Run(q.name, func(b *testing.B) {
			files, rows := e.temp.FilesCreated(), e.temp.RowsWritten()
			for b.Loop() {
				if _, err := e.run(context.Background(), q.sql, 4<<20); err != nil {
					b.Fatal(err)
				}
			}
			// What the spilling cost in files and rows written, per
			// query: figures the machine's load does not move.
			b.ReportMetric(float64(e.temp.FilesCreated()-files)/float64(b.N), "files/op")
			b.ReportMetric(float64(e.temp.RowsWritten()-rows)/float64(b.N), "rows-written/op")
			e.leftovers(b, q.name)
		})
	}
}
