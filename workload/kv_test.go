package workload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/server"
)

// TestHistogramQuantiles: percentiles are within the buckets' 2% of the
// samples' true values.
func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.95, 950 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, time.Second}} {
		got := h.quantile(tc.q)
		if got < tc.want || float64(got) > float64(tc.want)*growth {
			t.Errorf("quantile(%v) = %v, want within 2%% above %v", tc.q, got, tc.want)
		}
	}
	if h.max != time.Second || h.mean() != 500500*time.Microsecond {
		t.Errorf("max %v mean %v", h.max, h.mean())
	}
	var empty histogram
	if empty.quantile(0.5) != 0 {
		t.Error("an empty histogram has no quantile")
	}
}

func TestKVConfigChecks(t *testing.T) {
	ok := KVConfig{ReadPercent: 50, Concurrency: 1, Batch: 1}
	for _, tc := range []struct {
		mod  func(*KVConfig)
		want string
	}{
		{func(c *KVConfig) { c.ReadPercent = 101 }, "--read-percent"},
		{func(c *KVConfig) { c.Concurrency = 0 }, "--concurrency"},
		{func(c *KVConfig) { c.Batch = 0 }, "--batch"},
		{func(c *KVConfig) { c.HashSharded, c.Buckets = true, 1 }, "--buckets must be between"},
		{func(c *KVConfig) { c.Buckets = 8 }, "--buckets needs --hash-sharded"},
	} {
		c := ok
		tc.mod(&c)
		if err := c.check(true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", c, err, tc.want)
		}
	}
	if got := KVSchema(KVConfig{SecondaryIndex: true}); got != "CREATE TABLE IF NOT EXISTS kv (k INT8 NOT NULL, v BYTEA NOT NULL, PRIMARY KEY (k), INDEX (v))" {
		t.Errorf("schema with --secondary-index: %s", got)
	}
	if got := KVSchema(KVConfig{HashSharded: true, Buckets: 8}); got != "CREATE TABLE IF NOT EXISTS kv (k INT8 NOT NULL, v BYTEA NOT NULL, PRIMARY KEY (k) USING HASH WITH (bucket_count = 8))" {
		t.Errorf("schema: %s", got)
	}
}

// TestKVRun runs init and a short sequential run against an in-memory
// node: the table is hash-sharded, the report has CockroachDB's lines, and
// every write the summary counts is a row.
func TestKVRun(t *testing.T) {
	ctx := context.Background()
	s, err := server.Start(ctx, server.Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(context.Background()) }()
	url := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
	var out bytes.Buffer
	cfg := KVConfig{URL: url, HashSharded: true, Buckets: 4, Drop: true, Sequential: true, ReadPercent: 0,
		Concurrency: 2, Batch: 3, Duration: 300 * time.Millisecond, Tick: 100 * time.Millisecond, Out: &out}
	if err := InitKV(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Drop = false
	if err := RunKV(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.Contains(text, "_elapsed___errors__ops/sec(inst)___ops/sec(cum)__p50(ms)__p95(ms)__p99(ms)_pMax(ms)") ||
		!strings.Contains(text, "_elapsed___errors_____ops(total)___ops/sec(cum)__avg(ms)__p50(ms)__p95(ms)__p99(ms)_pMax(ms)__total") {
		t.Fatalf("report lacks CockroachDB's headers:\n%s", text)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var elapsed float64
	var errs, ops int64
	var rate float64
	var name string
	if _, err := fmt.Sscanf(strings.TrimSpace(lines[len(lines)-1]), "%fs %d %d %f", &elapsed, &errs, &ops, &rate); err != nil {
		t.Fatalf("summary line %q: %v", lines[len(lines)-1], err)
	}
	name = strings.Fields(lines[len(lines)-1])[9]
	if name != "write" || errs != 0 || ops == 0 {
		t.Fatalf("summary: %s", lines[len(lines)-1])
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, maxK int64
	var shardCol string
	if err := conn.QueryRow(ctx, "SELECT count(*), max(k) FROM kv").Scan(&rows, &maxK); err != nil {
		t.Fatal(err)
	}
	// Counted operations wrote 3 rows each; an operation cut short by the
	// end of the run may have written, uncounted, or left a gap of its 3
	// keys below another worker's.
	if rows < 3*ops || maxK < rows-1 || maxK >= rows+3*int64(cfg.Concurrency) {
		t.Fatalf("%d rows (max key %d) after %d counted batches of 3 sequential keys", rows, maxK, ops)
	}
	if err := conn.QueryRow(ctx, "SELECT column_name FROM information_schema.columns WHERE table_name = 'kv' AND is_generated = 'ALWAYS'").Scan(&shardCol); err != nil || shardCol != "crdb_internal_k_shard_4" {
		t.Fatalf("shard column %q, %v", shardCol, err)
	}
}

// TestKVRateAndSearch: --max-rate caps the operations (the limiter hands
// out slots 1/rate apart from the start, so a run of d cannot count more
// than rate*d + 1 of them), and a search reports the unthrottled round
// when it is under the bound, and no rate when none can be.
func TestKVRateAndSearch(t *testing.T) {
	ctx := context.Background()
	s, err := server.Start(ctx, server.Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(context.Background()) }()
	var out bytes.Buffer
	cfg := KVConfig{URL: fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()), Drop: true,
		ReadPercent: 50, Concurrency: 4, Batch: 1, Duration: 200 * time.Millisecond, Tick: 50 * time.Millisecond, Out: &out}
	if err := InitKV(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.MaxRate = 20
	r, err := runKV(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if limit := uint64(cfg.MaxRate*r.Elapsed.Seconds()) + 1; r.Ops > limit {
		t.Fatalf("%d operations in %v at --max-rate %v (at most %d)", r.Ops, r.Elapsed, cfg.MaxRate, limit)
	}
	cfg.MaxRate = 0
	out.Reset()
	best, err := SearchKV(ctx, cfg, time.Hour, 2)
	if err != nil {
		t.Fatal(err)
	}
	if best.Ops == 0 || !strings.Contains(out.String(), "search: unthrottled:") || strings.Count(out.String(), "search:") != 1 {
		t.Fatalf("an unthrottled round under an hour's bound must end the search:\n%s", out.String())
	}
	if strings.Contains(out.String(), "ops/sec(inst)") {
		t.Fatalf("a search prints no per-second lines:\n%s", out.String())
	}
	out.Reset()
	best, err = SearchKV(ctx, cfg, time.Nanosecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	if best.Ops != 0 || strings.Count(out.String(), "search:") != 4 || !strings.Contains(out.String(), "no rate tried") {
		t.Fatalf("no round can be under 1ns: 1 + 2 rounds and a verdict:\n%s", out.String())
	}
}
