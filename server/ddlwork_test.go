package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// TestDDLWorkDoesNotGrowWithTables (issue 16, "Tablets are cheap to
// create"): the KV requests and intents a CREATE TABLE + CREATE INDEX
// pair (and a one-row INSERT) costs on one node, counted from /metrics
// over 20 pairs, are the same with 320 tables in place as with one.
// Work that grows with the tables (one read per table descriptor to
// choose an index name was 83% of the node's CPU at 2,000 tables before
// index names had catalog entries of their own; bench/README.md, bench/ddl)
// would add hundreds of reads per pair here. bench/ddl counted the same
// at 10,000 tables on a `cairn start` node: 70 KV reads, 34.5 writes and
// 30 intents per pair, against 70.4, 34.6 and 30 on a node with some
// 200 tables. Counts, not times: the node's background loops add a few
// requests a second, hence the slack of a tenth.
func TestDDLWorkDoesNotGrowWithTables(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 340 tables")
	}
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, s)
	defer c.Close(ctx)
	n := 0
	pair := func() {
		t.Helper()
		n++
		for _, q := range []string{
			fmt.Sprintf("CREATE TABLE t_%d (k INT PRIMARY KEY, v INT)", n),
			fmt.Sprintf("CREATE INDEX ON t_%d (v)", n),
			fmt.Sprintf("INSERT INTO t_%d VALUES (1, 1)", n),
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	counters := []string{
		`cairn_kv_request_duration_seconds_count{kind="read"}`,
		`cairn_kv_request_duration_seconds_count{kind="write"}`,
		`cairn_tablet_intents_written_total{node="1"}`,
	}
	// perPair counts each counter's growth over 20 pairs, per pair.
	perPair := func() []float64 {
		t.Helper()
		before := metricLines(t, s, counters)
		for range 20 {
			pair()
		}
		after := metricLines(t, s, counters)
		out := make([]float64, len(counters))
		for i := range counters {
			out[i] = float64(after[i]-before[i]) / 20
		}
		return out
	}
	pair() // the node's first statements warm its caches
	base := perPair()
	for n < 320 {
		pair()
	}
	grown := perPair()
	t.Logf("per pair from 1 table on %v, from 320 tables on %v (%v)", base, grown, counters)
	for i, name := range counters {
		if base[i] < 1 {
			t.Fatalf("%s: %.2f per pair with one table: not counted", name, base[i])
		}
		if grown[i] > base[i]*1.1 {
			t.Errorf("%s: %.2f per pair with 320 tables, %.2f with one: DDL work grows with the tables", name, grown[i], base[i])
		}
	}
}

// metricLines reads the values of /metrics lines named exactly as given
// (labels included).
func metricLines(t *testing.T, s *Server, names []string) []int64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", s.HTTPAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := make([]int64, len(names))
	for i, name := range names {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		out[i], _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	return out
}
