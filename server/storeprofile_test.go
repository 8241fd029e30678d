package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/cairn-db/cairn/storage/simfs"
)

// TestStoreProfile starts a node with --store-profile hdd: the nodes API
// and the admin UI show it, sessions start with storage.profile = hdd
// and plan with its costs (EXPLAIN (VERBOSE) prices a join's hundred
// lookups and its hash join alternative as an HDD reads them, not as an
// SSD does), and SET overrides it for one session, RESET puts it back
// and a bad value is 22023 leaving it alone.
func TestStoreProfile(t *testing.T) {
	ctx := context.Background()
	s := start(t, Config{Insecure: true, StoreProfile: "hdd"})
	defer s.Stop(ctx)

	var nodes []NodeInfo
	getJSON(t, s, "/api/nodes", &nodes)
	if len(nodes) != 1 || nodes[0].StoreProfile != "hdd" {
		t.Fatalf("nodes: %+v, want one with store_profile hdd", nodes)
	}
	if _, _, body := httpGet(t, s, "/"); !strings.Contains(body, "<td>hdd</td>") {
		t.Errorf("the overview page shows no hdd storage cell:\n%s", body)
	}

	pg := connectDB(t, s, "postgres")
	show := func() string {
		t.Helper()
		var v string
		if err := pg.QueryRow(ctx, "SHOW storage.profile").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	explain := func() string {
		t.Helper()
		rows, err := pg.Query(ctx, "EXPLAIN (VERBOSE) SELECT * FROM small JOIN big ON small.b = big.k WHERE small.a BETWEEN 1 AND 100", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "Join Method Cost:") {
				return l
			}
		}
		t.Fatalf("no join method cost:\n%s", strings.Join(lines, "\n"))
		return ""
	}
	execAll(t, pg,
		"CREATE TABLE big (k int PRIMARY KEY, v int)",
		"INSERT INTO big SELECT g, g FROM generate_series(1, 2000) g",
		"CREATE TABLE small (a int PRIMARY KEY, b int)",
		"INSERT INTO small SELECT g, g * 7 FROM generate_series(1, 2000) g",
		"ANALYZE big", "ANALYZE small")
	if v := show(); v != "hdd" {
		t.Fatalf("SHOW storage.profile = %q, want the node's hdd", v)
	}
	hdd := explain()
	execAll(t, pg, "SET storage.profile = 'ssd'")
	if v := show(); v != "ssd" {
		t.Fatalf("after SET: %q", v)
	}
	ssd := explain()
	// A hundred lookups into 2,000 rows are a lookup join on both
	// (docs/sql.md, "Storage profiles"), priced by each profile's reads.
	if !strings.Contains(ssd, "lookup join") || !strings.Contains(hdd, "lookup join") || ssd == hdd {
		t.Errorf("want lookup joins priced by the profile:\nhdd: %s\nssd: %s", hdd, ssd)
	}
	// The lookup join's batches: one of up to 1000 rows on ssd; of ten
	// rows each with sql.testing.lookup_batch = 10.
	analyze := func() string {
		t.Helper()
		rows, err := pg.Query(ctx, "EXPLAIN ANALYZE SELECT * FROM small JOIN big ON small.b = big.k WHERE small.a BETWEEN 1 AND 100", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range lines {
			if !strings.Contains(l, "Lookup Join") {
				continue
			}
			for _, d := range lines[i+1:] {
				if strings.Contains(d, "KV:") {
					return d
				}
			}
		}
		t.Fatalf("no lookup join:\n%s", strings.Join(lines, "\n"))
		return ""
	}
	if kv := analyze(); !strings.Contains(kv, "KV: 100 requests in 1 round trip") {
		t.Errorf("ssd lookup batches: %q", kv)
	}
	execAll(t, pg, "SET sql.testing.lookup_batch = 10")
	if kv := analyze(); !strings.Contains(kv, "KV: 100 requests in 10 round trips") {
		t.Errorf("batches of 10: %q", kv)
	}
	execAll(t, pg, "RESET sql.testing.lookup_batch")
	_, err := pg.Exec(ctx, "SET storage.profile = 'floppy'")
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "22023" {
		t.Errorf("SET storage.profile = 'floppy': %v, want 22023", err)
	}
	if v := show(); v != "ssd" {
		t.Errorf("after the failed SET: %q", v)
	}
	execAll(t, pg, "RESET storage.profile")
	if v := show(); v != "hdd" {
		t.Errorf("after RESET: %q, want the node's hdd", v)
	}
}

// TestStoreProfileErrors: an unknown profile stops the node from
// starting; auto on an in-memory store is ssd.
func TestStoreProfileErrors(t *testing.T) {
	ctx := context.Background()
	if s, err := Start(ctx, Config{Insecure: true, StoreProfile: "tape", Logger: quiet()}); err == nil || !strings.Contains(err.Error(), `unknown storage profile "tape"`) {
		if s != nil {
			s.Stop(ctx)
		}
		t.Fatalf("Start with profile tape: %v", err)
	}
	logs := &syncBuffer{}
	s, err := Start(ctx, Config{Insecure: true, StoreProfile: "auto", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	// The ready line says which profile and why.
	if l := logs.String(); !strings.Contains(l, "store_profile=ssd") || !strings.Contains(l, `store_profile_source="the store is in memory"`) {
		t.Errorf("the log does not say the profile and why:\n%s", l)
	}
	var nodes []NodeInfo
	getJSON(t, s, "/api/nodes", &nodes)
	if len(nodes) != 1 || nodes[0].StoreProfile != "ssd" {
		t.Fatalf("nodes: %+v, want an in-memory store to be ssd", nodes)
	}
}

// TestDiskMetrics: a node on a simulated disk (--debug-store-latency)
// exports its read counters in /metrics, and they grow when a query
// reads flushed data; a node on a plain filesystem exports none.
func TestDiskMetrics(t *testing.T) {
	ctx := context.Background()
	var slept atomic.Int64
	disk := simfs.New(vfs.NewMem(), simfs.Options{Profile: simfs.HDD, Sleep: func(d time.Duration) { slept.Add(int64(d)) }})
	s := start(t, Config{Insecure: true, FS: disk})
	defer s.Stop(ctx)
	read := func() map[string]float64 {
		t.Helper()
		_, _, body := httpGet(t, s, "/metrics")
		var p expfmt.TextParser
		fams, err := p.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
		out := map[string]float64{}
		for _, name := range []string{"cairn_store_reads_total", "cairn_store_read_bytes_total", "cairn_store_seeks_total", "cairn_store_skips_total", "cairn_store_requests_total", "cairn_store_read_latency_charged_seconds_total", "cairn_store_syncs_total", "cairn_store_wal_syncs_total"} {
			f := fams[name]
			if f == nil || f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 1 {
				t.Fatalf("%s: %v, want one counter", name, f)
			}
			out[name] = f.GetMetric()[0].GetCounter().GetValue()
		}
		if f := fams["cairn_store_simulated_profile"]; f == nil || f.GetMetric()[0].GetLabel()[0].GetValue() != "hdd" {
			t.Fatalf("cairn_store_simulated_profile: %v", f)
		}
		return out
	}
	pg := connectDB(t, s, "postgres")
	// No automatic statistics: their collection after the INSERT scans
	// t in the background and, were it to run after the flush, would
	// leave the new sstable's blocks cached before the measured scan.
	execAll(t, pg, "SET sql.stats.automatic_collection.enabled = off",
		"CREATE TABLE t (id int PRIMARY KEY, v text)", "INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 5000) g")
	if err := s.eng.Flush(); err != nil {
		t.Fatal(err)
	}
	before := read()
	// The committed INSERTs were made durable by syncs of the WAL.
	if before["cairn_store_wal_syncs_total"] < 1 || before["cairn_store_syncs_total"] < before["cairn_store_wal_syncs_total"] {
		t.Errorf("after committed writes: %v syncs, %v of the WAL", before["cairn_store_syncs_total"], before["cairn_store_wal_syncs_total"])
	}
	// The flush wrote a new sstable that no read has cached yet, so the
	// scan reads its blocks from the filesystem.
	execAll(t, pg, "SELECT count(*) FROM t")
	after := read()
	if after["cairn_store_reads_total"] <= before["cairn_store_reads_total"] ||
		after["cairn_store_read_bytes_total"] <= before["cairn_store_read_bytes_total"] ||
		after["cairn_store_seeks_total"] < 1 {
		t.Errorf("a scan of flushed data moved no counter: before %v, after %v", before, after)
	}
	// Every charge is waited out through Options.Sleep, and the waits
	// (read later) cover what /metrics reported.
	charged := time.Duration(after["cairn_store_read_latency_charged_seconds_total"] * float64(time.Second))
	if charged <= 0 || time.Duration(slept.Load()) < charged-time.Microsecond {
		t.Errorf("charged %v in /metrics, %v waited", charged, time.Duration(slept.Load()))
	}

	plain := start(t, Config{Insecure: true})
	defer plain.Stop(ctx)
	if _, _, body := httpGet(t, plain, "/metrics"); strings.Contains(body, "cairn_store_reads_total") {
		t.Error("a node without a simulated disk exports its counters")
	}
}

// TestSortedLookupsSeekLess runs lookup joins of random keys on a disk
// playing an HDD (the latency charged, not slept): sorted, a batch's block
// reads move forward through the table, read ahead; in input order most
// of them seek. Counters, not timings. Each join runs on a freshly
// restarted node (a cold block cache), and the input-order one must read
// the disk, so the comparison cannot pass on two joins served from the
// cache.
func TestSortedLookupsSeekLess(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100,000 rows")
	}
	ctx := context.Background()
	disk := simfs.New(vfs.NewMem(), simfs.Options{Sleep: func(time.Duration) {}})
	// No GC loop: its first pass after a start reads every tablet
	// whole, which would leave t in the block cache and the lookups
	// reading nothing from the disk (bench/README.md, readplan).
	cfg := Config{Insecure: true, FS: disk, CacheSize: 64 << 20, NoGCLoop: true}
	s := start(t, cfg)
	defer func() { s.Stop(ctx) }()
	pg := connectDB(t, s, "postgres")
	execAll(t, pg,
		"BEGIN", "CREATE TABLE t (k INT8 PRIMARY KEY, v INT8, pad TEXT)",
		"INSERT INTO t SELECT g, g % 1000, repeat('x', 40) FROM generate_series(1, 100000) g", "COMMIT",
		"BEGIN", "CREATE TABLE p (id INT8 PRIMARY KEY, k INT8)",
		// A golden-ratio permutation (61803 is prime to 100000): no
		// ascending runs in p's order.
		"INSERT INTO p SELECT g, (g * 61803) % 100000 + 1 FROM generate_series(1, 4000) g", "COMMIT",
		"ANALYZE t", "ANALYZE p")
	if err := s.CompactStore(ctx); err != nil {
		t.Fatal(err)
	}
	// Each join runs on a node restarted on the same disk, so both start
	// on a cold block cache. On the loading node both joins found t's
	// blocks cached and read nothing from the disk (0 reads against 0,
	// which passed without showing anything), and the second join would
	// read what the first left in the cache.
	seeks := func(q string, settings ...string) (simfs.Stats, string) {
		t.Helper()
		s.Stop(ctx)
		s = start(t, cfg)
		pg = connectDB(t, s, "postgres")
		execAll(t, pg, append([]string{"SET storage.profile = 'ssd'", "SET sql.testing.lookup_batch = 2000"}, settings...)...)
		disk.SetProfile(simfs.HDD)
		defer disk.SetProfile(simfs.Memory)
		rows, err := pg.Query(ctx, "EXPLAIN "+q, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(plan, "\n"); !strings.Contains(p, "Lookup Join") {
			t.Fatalf("%s is not a lookup join:\n%s", q, p)
		}
		b := disk.Stats()
		var n, sum int64
		if err := pg.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		a := disk.Stats()
		t.Logf("%s: %d reads, %d seeks, %d skips", q, a.Reads-b.Reads, a.Seeks-b.Seeks, a.Skips-b.Skips)
		return simfs.Stats{Reads: a.Reads - b.Reads, Seeks: a.Seeks - b.Seeks}, fmt.Sprint(n, sum)
	}
	// Two disjoint sets of 2000 random keys.
	sorted, sortedAnswer := seeks("SELECT count(*), sum(t.v) FROM p JOIN t ON t.k = p.k WHERE p.id BETWEEN 1 AND 2000")
	input, inputAnswer := seeks("SELECT count(*), sum(t.v) FROM p JOIN t ON t.k = p.k WHERE p.id BETWEEN 2001 AND 4000", "SET sql.testing.lookup_input_order = on")
	if !strings.HasPrefix(inputAnswer, "2000 ") || !strings.HasPrefix(sortedAnswer, "2000 ") {
		t.Fatalf("answers %q and %q, want 2000 rows each", inputAnswer, sortedAnswer)
	}
	// Far fewer seeks and far fewer reads: sorted, one iterator per
	// batch walks the table forward (storage.ReusingReader) and its
	// block reads in order are read ahead in windows (the node's
	// profile is ssd: 256 KiB), so the few seeks left are each file's
	// first reads.
	if input.Reads == 0 || input.Seeks == 0 {
		t.Fatalf("the lookups in input order read %d times with %d seeks: the table was not read from the disk", input.Reads, input.Seeks)
	}
	if sorted.Seeks*4 > input.Seeks || sorted.Reads*4 > input.Reads {
		t.Errorf("2000 lookups: %d seeks in %d reads in input order, %d in %d sorted; want sorted far fewer", input.Seeks, input.Reads, sorted.Seeks, sorted.Reads)
	}
}

// TestScanReadsAhead: a node whose profile is hdd, on a disk playing one,
// reads a table scan's blocks in read-ahead windows of up to 2 MiB
// (storage/readahead.go): far fewer reads than blocks, each counted by
// the disk. Counters, not timings. The same holds for a table the split
// queue cut into several tablets: their scans read the store's files one
// after the other, into the windows read ahead for the previous tablet.
func TestScanReadsAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100,000 rows")
	}
	for _, tc := range []struct {
		name      string
		splitSize int64
		tablets   int
	}{{"one tablet", 0, 1}, {"many tablets", 128 << 10, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			disk := simfs.New(vfs.NewMem(), simfs.Options{Sleep: func(time.Duration) {}})
			cfg := Config{Insecure: true, FS: disk, CacheSize: 1 << 20, StoreProfile: "hdd",
				TabletSplitSize: tc.splitSize, TabletSplitQPS: -1}
			s := start(t, cfg)
			defer func() { s.Stop(ctx) }()
			pg := connectDB(t, s, "postgres")
			execAll(t, pg,
				"BEGIN", "CREATE TABLE t (k INT8 PRIMARY KEY, v INT8, pad TEXT)",
				"INSERT INTO t SELECT g, g % 1000, repeat('x', 40) FROM generate_series(1, 100000) g", "COMMIT")
			tablets := 0
			for deadline := time.Now().Add(60 * time.Second); ; {
				if err := s.eng.Flush(); err != nil {
					t.Fatal(err)
				}
				var dbs []DatabaseInfo
				getJSON(t, s, "/api/databases", &dbs)
				if tbl := findTable(dbs, "postgres", "t"); tbl != nil && len(tbl.Tablets) >= tc.tablets {
					tablets = len(tbl.Tablets)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("t has fewer than %d tablets after 60s; split queue %+v", tc.tablets, s.store.SplitQueueStats())
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err := s.CompactStore(ctx); err != nil {
				t.Fatal(err)
			}
			// Restart on the same disk, so the scan starts cold: windows
			// read ahead before (the split queue's size estimates, a load
			// ingested as files the compaction keeps) would serve it.
			s.Stop(ctx)
			s = start(t, cfg)
			pg = connectDB(t, s, "postgres")
			disk.SetProfile(simfs.HDD)
			b, bra := disk.Stats(), s.eng.ReadAheadStats()
			var n int64
			if err := pg.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
				t.Fatal(err)
			}
			a, ara := disk.Stats(), s.eng.ReadAheadStats()
			reads, bytes := a.Reads-b.Reads, a.ReadBytes-b.ReadBytes
			windows, served := ara.Windows-bra.Windows, ara.Served-bra.Served
			t.Logf("%d tablets: count(*) = %d: %d reads of %d bytes, %d seeks; %d windows served %d block reads",
				tablets, n, reads, bytes, a.Seeks-b.Seeks, windows, served)
			if n != 100000 {
				t.Fatalf("count(*) = %d", n)
			}
			// The count reads its span whole, in pages of 65,536 rows
			// walked tablet by tablet: its files are read ahead by one
			// plan (storage/prefetch.go), which every later page, in
			// the same tablet or the next, takes over.
			plans, taken := ara.Plans-bra.Plans, ara.TakenOver-bra.TakenOver
			t.Logf("%d scan plans, taken over %d times", plans, taken)
			if plans < 1 || taken < int64(max(tablets-1, 1)) {
				t.Errorf("%d scan plans taken over %d times; want the count's plan taken over by each later page and tablet (at least %d)", plans, taken, max(tablets-1, 1))
			}
			// Without read-ahead every block is a read: hundreds (the
			// table's own files have 4 KiB blocks, the SSTs its load
			// ingested 32 KiB ones). With it, most block reads are
			// served from windows, and what reaches the disk besides
			// the windows is a few reads of each file's footer, index
			// and filter (more files when the table is in more
			// tablets).
			if direct := reads - windows; windows == 0 || served < 4*direct || direct > 8*int64(tablets)+8 {
				t.Errorf("%d reads (%d windows serving %d reads) for %d bytes: want most blocks served from windows", reads, windows, served, bytes)
			}
		})
	}
}
