package server

import (
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// TestObservability runs statements on a one-node replicated cluster,
// one of them behind another's lock, and checks what an operator sees:
// pg_stat_activity shows the waiting statement's text, /metrics has the
// latency histograms (statements by type, KV requests, raft commits,
// lock waits) and the Go and process collectors, and pg_stat_statements
// has each statement under its fingerprint with its calls and rows.
func TestObservability(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}})
	defer s.Stop(context.Background())
	ctx := context.Background()
	a, b := connectDB(t, s, "postgres"), connectDB(t, s, "postgres")
	execAll(t, a, "CREATE TABLE kv (k int PRIMARY KEY, v int)", "INSERT INTO kv VALUES (1, 10), (2, 20), (3, 30)")
	for _, k := range []int{1, 2, 3} {
		if _, err := a.Exec(ctx, fmt.Sprintf("SELECT v FROM kv WHERE k = %d", k), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Exec(ctx, "SELECT k FROM kv WHERE k >= 2", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	// A point UPDATE of one shape, sent as text: from its fourth run
	// (shape, plan, kept shapes) the fast path runs it
	// (cairn_sql_fast_dml_total below).
	for i := range 6 {
		if _, err := a.Exec(ctx, fmt.Sprintf("UPDATE kv SET v = v + %d WHERE k = 3", i), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}

	// b waits for a's lock; pg_stat_activity shows its statement.
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE kv SET v = 11 WHERE k = 1"); err != nil {
		t.Fatal(err)
	}
	const blocked = "UPDATE kv SET v = 12 WHERE k = 1"
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(ctx, blocked, pgx.QueryExecModeSimpleProtocol)
		done <- err
	}()
	watcher := connectDB(t, s, "postgres")
	for {
		var n int
		if err := watcher.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active' AND wait_event_type = 'Lock'", blocked).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the second UPDATE did not wait for the lock: %v", err)
		default:
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	_, _, body := httpGet(t, s, "/metrics")
	// Every metric's name, type and help follow Prometheus's conventions
	// (promlint: base units such as _seconds and _bytes, _total on
	// counters only, a help text, no reserved suffixes).
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("/metrics: %s: %s", p.Metric, p.Text)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	count := func(name, label, value string) uint64 {
		t.Helper()
		f := fams[name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("%s: %v, want a histogram", name, f)
		}
		var n uint64
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					n += m.GetHistogram().GetSampleCount()
				}
			}
			if label == "" {
				n += m.GetHistogram().GetSampleCount()
			}
		}
		return n
	}
	for _, c := range []struct {
		name, label, value string
		min                uint64
	}{
		{"cairn_sql_statement_duration_seconds", "type", "select", 4},
		{"cairn_sql_statement_duration_seconds", "type", "insert", 1},
		{"cairn_sql_statement_duration_seconds", "type", "update", 2},
		{"cairn_sql_statement_duration_seconds", "type", "ddl", 1},
		{"cairn_kv_request_duration_seconds", "kind", "read", 1},
		{"cairn_kv_request_duration_seconds", "kind", "write", 1},
		{"cairn_raft_commit_duration_seconds", "", "", 1},
		{"cairn_lock_wait_duration_seconds", "", "", 1},
		{"cairn_lock_contended_hold_seconds", "", "", 1},
	} {
		if n := count(c.name, c.label, c.value); n < c.min {
			t.Errorf("%s{%s=%q}: %d observations, want at least %d", c.name, c.label, c.value, n, c.min)
		}
	}
	// The UPDATEs' locking reads offered their rows to the validation
	// cache.
	var installs float64
	if f := fams["cairn_validation_cache_installs_total"]; f != nil && f.GetType() == dto.MetricType_COUNTER {
		for _, m := range f.GetMetric() {
			installs += m.GetCounter().GetValue()
		}
	}
	if installs < 1 {
		t.Errorf("cairn_validation_cache_installs_total: %v installs, want at least 1", installs)
	}
	for _, name := range []string{"cairn_sql_fast_dml_total", "cairn_sql_fast_point_reads_total"} {
		f := fams[name]
		if f == nil || f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 1 {
			t.Errorf("/metrics: %s is %v, want one counter", name, f)
			continue
		}
		t.Logf("%s %v", name, f.GetMetric()[0].GetCounter().GetValue())
		if name == "cairn_sql_fast_dml_total" && f.GetMetric()[0].GetCounter().GetValue() < 1 {
			t.Errorf("/metrics: %s is 0 after six runs of a point UPDATE", name)
		}
	}
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes", "cairn_up", "cairn_replicas"} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}

	// The overview's charts: a sample with statements in it, within a
	// few of the admin loop's one-second samples.
	for {
		var pts []SeriesPoint
		getJSON(t, s, "/api/timeseries", &pts)
		if len(pts) > 0 && pts[len(pts)-1].QPS > 0 {
			last := pts[len(pts)-1]
			if last.MeanMs <= 0 || last.P99Ms <= 0 {
				t.Errorf("a sample with statements has no latency: %+v", last)
			}
			break
		}
		if _, err := watcher.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, body := httpGet(t, s, "/"); code != 200 || !strings.Contains(body, `id="chart-qps"`) || !strings.Contains(body, `<polyline class="chart-line" points="`) {
		t.Errorf("overview: %d, no QPS chart:\n%s", code, body)
	}

	// pg_stat_statements: the three point SELECTs are one entry.
	var calls, rows int64
	var query string
	var mean, total float64
	if err := watcher.QueryRow(ctx, "SELECT query, calls, rows, mean_exec_time, total_exec_time FROM pg_stat_statements WHERE query LIKE 'SELECT v FROM kv WHERE k = %'").
		Scan(&query, &calls, &rows, &mean, &total); err != nil {
		t.Fatal(err)
	}
	if query != "SELECT v FROM kv WHERE k = $1" || calls != 3 || rows != 3 || mean <= 0 || total < mean*3*0.999 {
		t.Errorf("pg_stat_statements: %q calls %d rows %d mean %g total %g", query, calls, rows, mean, total)
	}
	var updates int64
	if err := watcher.QueryRow(ctx, "SELECT sum(calls) FROM pg_stat_statements WHERE query LIKE 'UPDATE kv SET v = $1 WHERE k = $2'").Scan(&updates); err != nil {
		t.Fatal(err)
	}
	if updates != 2 {
		t.Errorf("UPDATE calls: %d, want 2 (one simple, one extended)", updates)
	}
	if err := watcher.QueryRow(ctx, "SELECT rows FROM pg_stat_statements WHERE query = 'SELECT k FROM kv WHERE k >= $1'").Scan(&rows); err != nil || rows != 2 {
		t.Errorf("range SELECT rows: %d, %v", rows, err)
	}
	// A role without the superuser's privileges does not see its text.
	execAll(t, watcher, "CREATE ROLE viewer LOGIN")
	viewer, err := pgx.Connect(ctx, fmt.Sprintf("postgres://viewer@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer viewer.Close(ctx)
	var hidden, shown int64
	if err := viewer.QueryRow(ctx, "SELECT sum(CASE WHEN query = '<insufficient privilege>' THEN 1 ELSE 0 END), sum(CASE WHEN query LIKE 'SELECT v FROM kv%' THEN 1 ELSE 0 END) FROM pg_stat_statements").Scan(&hidden, &shown); err != nil {
		t.Fatal(err)
	}
	if hidden == 0 || shown != 0 {
		t.Errorf("viewer sees %d hidden and %d of postgres's statements", hidden, shown)
	}
}

// TestQuantile: the 99th percentile interpolates within its bucket, as
// Prometheus's histogram_quantile does.
func TestQuantile(t *testing.T) {
	cum := func(c ...uint64) []uint64 {
		out := make([]uint64, len(latencyBuckets))
		for i := range out {
			out[i] = c[min(i, len(c)-1)]
		}
		return out
	}
	for _, tc := range []struct {
		n    uint64
		cum  []uint64
		want float64 // seconds
	}{
		{100, cum(0, 10, 100), 100e-6 + 100e-6*89/90},
		{100, cum(100), 50e-6 * 0.99},
		{4, cum(0, 0, 0, 4), 200e-6 + 200e-6*0.99},
		{10, cum(0), latencyBuckets[len(latencyBuckets)-1]}, // all past the last bound
	} {
		if got := quantile(0.99, tc.n, tc.cum); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("quantile(0.99, %d, %v) = %g, want %g", tc.n, tc.cum[:4], got, tc.want)
		}
	}
}
