// Command packedrows reproduces the comparisons of the packed-rows seed
// (../shared/seeds/packed-rows.txt, issue 14): packed rows (the default)
// against one key per column (`SET storage.packed_rows.enabled = off`),
// on a plain `cairn start` process, and prints the medians beside the
// seed's figures.
//
// Each run of each mode uses two fresh stores:
//
//  1. wide: CREATE TABLE of 1 + 999 int columns, COPY of -wide-rows rows
//     (the seed's 2,000); the node is stopped, and the store opened here
//     with Pebble (package storage), fully compacted, and measured: bytes
//     on disk of the table data span, then the block cache's footprint
//     after one full pass over that span from a cold cache.
//  2. narrow: CREATE TABLE of 10 columns, COPY of -rows rows (the seed's
//     1,000,000) into the existing table (the ordinary, transactional
//     path), -scans sequential scans reading every column, -updates
//     single-column UPDATEs by primary key (the partial updates packed
//     rows store as column entries), then on-disk bytes after a full
//     compaction as for wide.
//
// Repacking by GC: -after-gc is a list of steps separated by ";", run
// after partial updates ({t} names the table): SQL statements, and "sleep
// DURATION". The default makes GC repack the updated rows: a 1 s GC TTL
// for the table, a wait past it and past the server's refresh of the
// table layouts GC repacks with (10 s), and a VACUUM. For narrow, the
// node is stopped after the updates so the compacted size and block-cache
// footprint before GC are measured, then started again on the same store
// for the steps; the scan, the sizes, the footprint and the partial
// updates are then measured again. For wide, after the seed's
// measurements the node is started again, one column of every row is
// updated (UPDATE wide SET c500 = c500 + 1: a column entry per row), the
// steps run, and the compacted size and footprint are measured again. All
// are printed in rows of their own ("" skips all of it). A COPY after GC
// would measure nothing GC changed, so none is made.
//
// Usage:
//
//	go build -o /tmp/cairn ./cmd/cairn
//	go run ./bench/packedrows -cairn /tmp/cairn [-runs 3] [-rows 1000000] [-wide-rows 2000] [-updates 5000] [-after-gc 'STEP; ...']
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/bench/internal/benchnode"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

var (
	flagCairn    = flag.String("cairn", "", "path of the cairn binary (required; go build -o /tmp/cairn ./cmd/cairn)")
	flagRuns     = flag.Int("runs", 3, "runs of each mode; medians are reported")
	flagRows     = flag.Int("rows", 1_000_000, "rows of the 10-column table (the seed's 1,000,000)")
	flagWideRows = flag.Int("wide-rows", 2000, "rows of the 1,000-column table (the seed's 2,000)")
	flagWideCols = flag.Int("wide-cols", 1000, "columns of the wide table (the seed's 1,000)")
	flagScans    = flag.Int("scans", 3, "sequential scans of the 10-column table per run (the median is kept)")
	flagUpdates  = flag.Int("updates", 5000, "single-column UPDATEs by primary key per run")
	flagAfterGC  = flag.String("after-gc", "ALTER TABLE {t} CONFIGURE ZONE USING gc.ttlseconds = 1; sleep 12s; VACUUM {t}",
		`steps run after the partial updates to make GC repack a table ({t}: its name): SQL statements and "sleep DURATION", separated by ";" ("": none, and no after-GC rows)`)
	flagPort  = flag.Int("port", 37100, "first of the three ports the node listens on (sql, http, rpc)")
	flagDir   = flag.String("dir", "", "where the stores go (default: a temporary directory, removed at the end)")
	flagModes = flag.String("modes", "packed,unpacked", "modes to run")
)

// result is one run of one mode.
type result struct {
	copySecs        float64 // COPY of the narrow table
	scanSecs        float64 // median sequential scan of it
	updatesPerSec   float64
	narrowDisk      int64 // narrow table data on disk after compaction
	narrowLogical   int64 // pg_table_size before compaction
	wideCopySecs    float64
	wideDisk        int64 // wide table data on disk after compaction
	wideLogical     int64 // pg_table_size of the wide table
	wideCache       int64 // block cache bytes after one pass over the wide table
	gcScanSecs      float64
	gcUpdatesPerSec float64
	gcRepacked      float64
	gcNarrowDisk    int64
	gcNarrowLogical int64
	narrowCache     int64 // block cache after one pass over narrow, compacted, before GC
	gcNarrowCache   int64
	// wide after a partial update of one column in every row and GC
	gcWideRepacked float64
	gcWideDisk     int64
	gcWideLogical  int64
	gcWideCache    int64
}

func main() {
	flag.Parse()
	if *flagCairn == "" {
		log.Fatal("-cairn is required: go build -o /tmp/cairn ./cmd/cairn")
	}
	dir := *flagDir
	if dir == "" {
		d, err := os.MkdirTemp("", "packedrows")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	modes := strings.Split(*flagModes, ",")
	results := map[string][]result{}
	for run := range *flagRuns {
		for _, mode := range modes {
			if mode != "packed" && mode != "unpacked" {
				log.Fatalf("-modes: unknown mode %q", mode)
			}
			r, err := runOnce(dir, mode, run)
			if err != nil {
				log.Fatalf("%s run %d: %v", mode, run+1, err)
			}
			log.Printf("%s run %d: %+v", mode, run+1, r)
			results[mode] = append(results[mode], r)
		}
	}
	report(results)
}

// startNode starts `cairn start` on store (benchnode) and returns once it
// answers SQL.
func startNode(store string) (*benchnode.Node, error) {
	n, err := benchnode.Start(benchnode.Options{Bin: *flagCairn, Store: store, Log: store + ".log", Port: *flagPort})
	if err != nil {
		return nil, err
	}
	conn, err := n.Connect(context.Background())
	if err != nil {
		_ = n.Stop()
		return nil, fmt.Errorf("cairn did not start serving SQL on %s (log: %s.log): %v", n.SQLAddr, store, err)
	}
	conn.Close(context.Background())
	return n, nil
}

// session opens a connection in mode.
func session(ctx context.Context, n *benchnode.Node, mode string) (*pgx.Conn, error) {
	conn, err := n.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if mode == "unpacked" {
		if _, err := conn.Exec(ctx, "SET storage.packed_rows.enabled = off"); err != nil {
			conn.Close(ctx)
			return nil, err
		}
	}
	return conn, nil
}

func runOnce(dir, mode string, run int) (result, error) {
	var r result
	ctx := context.Background()

	// 1. The wide table.
	store := filepath.Join(dir, fmt.Sprintf("%s-%d-wide", mode, run))
	n, err := startNode(store)
	if err != nil {
		return r, err
	}
	err = func() error {
		conn, err := session(ctx, n, mode)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		cols := make([]string, *flagWideCols)
		names := make([]string, *flagWideCols)
		for i := range cols {
			names[i] = fmt.Sprintf("c%d", i)
			cols[i] = names[i] + " int"
		}
		cols[0] += " PRIMARY KEY"
		if _, err := conn.Exec(ctx, "CREATE TABLE wide ("+strings.Join(cols, ", ")+")"); err != nil {
			return err
		}
		start := time.Now()
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"wide"}, names, pgx.CopyFromSlice(*flagWideRows, func(i int) ([]any, error) {
			row := make([]any, *flagWideCols)
			row[0] = int32(i)
			for j := 1; j < len(row); j++ {
				row[j] = int32(i*7 + j)
			}
			return row, nil
		})); err != nil {
			return fmt.Errorf("copy into wide: %w", err)
		}
		r.wideCopySecs = time.Since(start).Seconds()
		return conn.QueryRow(ctx, "SELECT pg_table_size('wide')").Scan(&r.wideLogical)
	}()
	if stopErr := n.Stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return r, err
	}
	if r.wideDisk, r.wideCache, err = compactAndMeasure(store, true); err != nil {
		return r, err
	}
	if *flagAfterGC != "" {
		if n, err = startNode(store); err != nil {
			return r, err
		}
		err = func() error {
			conn, err := session(ctx, n, mode)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			before, err := metric(fmt.Sprintf("http://127.0.0.1:%d/metrics", *flagPort+1), "cairn_gc_rows_repacked_total")
			if err != nil {
				return err
			}
			col := fmt.Sprintf("c%d", *flagWideCols/2)
			if _, err := conn.Exec(ctx, fmt.Sprintf("UPDATE wide SET %s = %[1]s + 1", col)); err != nil {
				return fmt.Errorf("update wide: %w", err)
			}
			if err := afterGC(ctx, conn, "wide"); err != nil {
				return err
			}
			after, err := metric(fmt.Sprintf("http://127.0.0.1:%d/metrics", *flagPort+1), "cairn_gc_rows_repacked_total")
			if err != nil {
				return err
			}
			r.gcWideRepacked = after - before
			return conn.QueryRow(ctx, "SELECT pg_table_size('wide')").Scan(&r.gcWideLogical)
		}()
		if stopErr := n.Stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return r, err
		}
		if r.gcWideDisk, r.gcWideCache, err = compactAndMeasure(store, true); err != nil {
			return r, err
		}
	}

	// 2. The narrow table.
	store = filepath.Join(dir, fmt.Sprintf("%s-%d-narrow", mode, run))
	if n, err = startNode(store); err != nil {
		return r, err
	}
	err = func() error {
		conn, err := session(ctx, n, mode)
		if err != nil {
			return err
		}
		defer func() { conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, `CREATE TABLE narrow (id bigint PRIMARY KEY, c1 bigint, c2 bigint, c3 bigint,
			c4 int, c5 int, c6 text, c7 text, c8 text, c9 float8)`); err != nil {
			return err
		}
		names := []string{"id", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}
		start := time.Now()
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"narrow"}, names, pgx.CopyFromSlice(*flagRows, func(i int) ([]any, error) {
			return []any{int64(i), int64(i) * 3, int64(i) * 5, int64(i) * 7, int32(i % 1000), int32(i % 77),
				fmt.Sprintf("name-%d", i), "constant text", fmt.Sprintf("%08x", i*2654435761), float64(i) / 3}, nil
		})); err != nil {
			return fmt.Errorf("copy into narrow: %w", err)
		}
		r.copySecs = time.Since(start).Seconds()
		if r.scanSecs, err = scan(ctx, conn); err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(uint64(run), 1))
		start = time.Now()
		for range *flagUpdates {
			if _, err := conn.Exec(ctx, "UPDATE narrow SET c4 = c4 + 1 WHERE id = $1", rng.Int64N(int64(*flagRows))); err != nil {
				return fmt.Errorf("update: %w", err)
			}
		}
		r.updatesPerSec = float64(*flagUpdates) / time.Since(start).Seconds()
		if err := conn.QueryRow(ctx, "SELECT pg_table_size('narrow')").Scan(&r.narrowLogical); err != nil {
			return err
		}
		if *flagAfterGC != "" {
			// The compacted size and footprint before GC: stop, measure,
			// start again on the same store.
			conn.Close(ctx)
			if err := n.Stop(); err != nil {
				return err
			}
			if r.narrowDisk, r.narrowCache, err = compactAndMeasure(store, true); err != nil {
				return err
			}
			if n, err = startNode(store); err != nil {
				return err
			}
			if conn, err = session(ctx, n, mode); err != nil {
				return err
			}
			if err := afterGC(ctx, conn, "narrow"); err != nil {
				return err
			}
			if r.gcScanSecs, err = scan(ctx, conn); err != nil {
				return err
			}
			if err := conn.QueryRow(ctx, "SELECT pg_table_size('narrow')").Scan(&r.gcNarrowLogical); err != nil {
				return err
			}
			if r.gcRepacked, err = metric(fmt.Sprintf("http://127.0.0.1:%d/metrics", *flagPort+1), "cairn_gc_rows_repacked_total"); err != nil {
				return err
			}
			// The same partial updates again, over the repacked rows
			// (measured after the size, which they would change).
			start = time.Now()
			for range *flagUpdates {
				if _, err := conn.Exec(ctx, "UPDATE narrow SET c4 = c4 + 1 WHERE id = $1", rng.Int64N(int64(*flagRows))); err != nil {
					return fmt.Errorf("update: %w", err)
				}
			}
			r.gcUpdatesPerSec = float64(*flagUpdates) / time.Since(start).Seconds()
		}
		return nil
	}()
	if stopErr := n.Stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return r, err
	}
	disk, cached, err := compactAndMeasure(store, true)
	if err != nil {
		return r, err
	}
	if *flagAfterGC != "" {
		// The updates' versions are below the GC threshold only if GC
		// ran: the after-GC statement's effect is what this size shows.
		r.gcNarrowDisk, r.gcNarrowCache = disk, cached
	} else {
		r.narrowDisk, r.narrowCache = disk, cached
	}
	return r, nil
}

// afterGC runs the -after-gc steps for table.
func afterGC(ctx context.Context, conn *pgx.Conn, table string) error {
	for _, step := range strings.Split(*flagAfterGC, ";") {
		step = strings.ReplaceAll(strings.TrimSpace(step), "{t}", table)
		if d, ok := strings.CutPrefix(step, "sleep "); ok {
			dur, err := time.ParseDuration(d)
			if err != nil {
				return fmt.Errorf("-after-gc %q: %w", step, err)
			}
			time.Sleep(dur)
			continue
		}
		if _, err := conn.Exec(ctx, step); err != nil {
			return fmt.Errorf("-after-gc %q: %w", step, err)
		}
	}
	return nil
}

// scan runs -scans sequential scans reading every column of narrow and
// returns the median time.
func scan(ctx context.Context, conn *pgx.Conn) (float64, error) {
	var times []float64
	for range *flagScans {
		start := time.Now()
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(c1) + count(c2) + count(c3) + count(c4) + count(c5) + count(c6)
			+ count(c7) + count(c8) + count(c9) FROM narrow`).Scan(&n); err != nil {
			return 0, fmt.Errorf("scan: %w", err)
		}
		times = append(times, time.Since(start).Seconds())
		if n != int64(*flagRows)*9 {
			return 0, fmt.Errorf("scan counted %d values, want %d", n, *flagRows*9)
		}
	}
	return median(times), nil
}

// compactAndMeasure opens a stopped node's store, compacts the table data
// span fully, and returns its bytes on disk; with cache, it reopens the
// store with a cold block cache, reads every entry of the span once, and
// returns the block cache's bytes too. The store holds one table, so the
// table data span is that table's.
func compactAndMeasure(store string, cache bool) (disk, cached int64, err error) {
	lo, hi := keys.TableDataMin, keys.Max
	eng, err := storage.Open(store, storage.Options{CacheSize: 1 << 30})
	if err != nil {
		return 0, 0, err
	}
	if err := eng.Flush(); err != nil {
		eng.Close()
		return 0, 0, err
	}
	if err := eng.Compact(context.Background(), lo, hi); err != nil {
		eng.Close()
		return 0, 0, err
	}
	size, err := eng.EstimateDiskUsage(lo, hi)
	if err != nil {
		eng.Close()
		return 0, 0, err
	}
	if err := eng.Close(); err != nil {
		return 0, 0, err
	}
	if !cache {
		return int64(size), 0, nil
	}
	eng, err = storage.Open(store, storage.Options{CacheSize: 1 << 30})
	if err != nil {
		return 0, 0, err
	}
	defer eng.Close()
	before := eng.Metrics().BlockCache.Size
	it, err := eng.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if _, err := it.UnsafeValue(); err != nil {
			it.Close()
			return 0, 0, err
		}
	}
	if err := it.Err(); err != nil {
		it.Close()
		return 0, 0, err
	}
	it.Close()
	return int64(size), eng.Metrics().BlockCache.Size - before, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// seed figures, from packed-rows.txt's text (its charts' exact numbers are
// not in the transcript): "at least 2x faster" bulk load, "about 2x" on-disk
// size, block cache "93MB vs. 18MB" (5x), sequential scan "2x better".
var seed = map[string]string{
	"copy":  "≥2× faster (chart)",
	"wide":  "about 2× smaller",
	"cache": "93 MB vs 18 MB (5×)",
	"scan":  "2× faster",
	"upd":   "(not measured in the seed)",
}

func report(results map[string][]result) {
	med := func(mode string, f func(result) float64) float64 {
		var xs []float64
		for _, r := range results[mode] {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Printf("medians of %d runs; narrow table %d rows × 10 columns, wide table %d rows × %d columns\n",
		*flagRuns, *flagRows, *flagWideRows, *flagWideCols)
	fmt.Fprintln(w, "measure\tpacked\tunpacked\tunpacked/packed\tseed\t")
	row := func(name, key, unit string, f func(result) float64, better string) {
		p, u := med("packed", f), med("unpacked", f)
		ratio := "-"
		if p > 0 {
			ratio = fmt.Sprintf("%.2f×", u/p)
			if better == "higher" && u > 0 {
				ratio = fmt.Sprintf("%.2f× (packed/unpacked)", p/u)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t\n", name, fmtUnit(p, unit), fmtUnit(u, unit), ratio, seed[key])
	}
	row("COPY narrow (s)", "copy", "s", func(r result) float64 { return r.copySecs }, "lower")
	row("seq scan narrow (s)", "scan", "s", func(r result) float64 { return r.scanSecs }, "lower")
	row("COPY wide (s)", "copy", "s", func(r result) float64 { return r.wideCopySecs }, "lower")
	row("wide on disk, compacted", "wide", "B", func(r result) float64 { return float64(r.wideDisk) }, "lower")
	row("wide pg_table_size", "wide", "B", func(r result) float64 { return float64(r.wideLogical) }, "lower")
	row("wide block cache, one pass", "cache", "B", func(r result) float64 { return float64(r.wideCache) }, "lower")
	row("partial updates/s", "upd", "/s", func(r result) float64 { return r.updatesPerSec }, "higher")
	row("narrow pg_table_size, after updates", "", "B", func(r result) float64 { return float64(r.narrowLogical) }, "lower")
	row("narrow on disk, compacted, after updates", "", "B", func(r result) float64 { return float64(r.narrowDisk) }, "lower")
	row("narrow block cache, one pass, after updates", "", "B", func(r result) float64 { return float64(r.narrowCache) }, "lower")
	if *flagAfterGC != "" {
		row("after GC: seq scan narrow (s)", "scan", "s", func(r result) float64 { return r.gcScanSecs }, "lower")
		row("after GC: narrow on disk, compacted", "", "B", func(r result) float64 { return float64(r.gcNarrowDisk) }, "lower")
		row("after GC: narrow block cache, one pass", "", "B", func(r result) float64 { return float64(r.gcNarrowCache) }, "lower")
		row("after GC: narrow pg_table_size", "", "B", func(r result) float64 { return float64(r.gcNarrowLogical) }, "lower")
		row("after GC: partial updates per second", "", "/s", func(r result) float64 { return r.gcUpdatesPerSec }, "higher")
		row("rows GC repacked, narrow", "", "", func(r result) float64 { return r.gcRepacked }, "")
		row("after 1 column updated in every row + GC: wide on disk, compacted", "wide", "B", func(r result) float64 { return float64(r.gcWideDisk) }, "lower")
		row("  same: wide block cache, one pass", "cache", "B", func(r result) float64 { return float64(r.gcWideCache) }, "lower")
		row("  same: wide pg_table_size", "", "B", func(r result) float64 { return float64(r.gcWideLogical) }, "lower")
		row("  same: rows GC repacked, wide", "", "", func(r result) float64 { return r.gcWideRepacked }, "")
	}
	w.Flush()
}

func fmtUnit(v float64, unit string) string {
	switch unit {
	case "B":
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case "s":
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// metric reads one unlabelled-by-tablet counter of the node's /metrics.
func metric(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%s has no %s", url, name)
}
