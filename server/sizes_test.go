package server

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/mvcc"
)

// TestSizesColocated: two tables of a colocated database share one tablet,
// yet each one's pg_table_size is its own share of it: in proportion to
// its data, the two summing to at most the tablet's total bytes; sizes
// grow with inserts, pg_database_size is the sum of the tables' totals,
// and updates add garbage (total bytes) but not live bytes to the tablet.
func TestSizesColocated(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	s.tabletStatsCache.ttl = -1 // count the tablet at every read
	ctx := context.Background()
	conn := connect(t, s)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE shop WITH colocated = true"); err != nil {
		t.Fatal(err)
	}
	shop := connectDB(t, s, "shop")
	exec := func(q string) {
		t.Helper()
		if _, err := shop.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	scalar := func(q string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := shop.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	tableSize := func(name string) int64 { return scalar("SELECT pg_table_size($1::text::regclass)", name) }
	type tablet struct{ id, live, total int64 }
	tabletOf := func(name string) tablet {
		t.Helper()
		var tb tablet
		if err := shop.QueryRow(ctx, `SELECT tablet_id, live_bytes, total_bytes FROM cairn_catalog.tablets
			WHERE database_name = 'shop' AND table_name = $1 AND index_name IS NULL`, name).Scan(&tb.id, &tb.live, &tb.total); err != nil {
			t.Fatalf("tablet of %s: %v", name, err)
		}
		return tb
	}

	exec("CREATE TABLE big (id int PRIMARY KEY, v text)")
	exec("CREATE TABLE small (id int PRIMARY KEY, v text)")
	if a, b := tableSize("big"), tableSize("small"); a != 0 || b != 0 {
		t.Fatalf("empty tables: sizes %d and %d, want 0", a, b)
	}
	exec("INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 1000) g")
	exec("INSERT INTO small SELECT g, repeat('x', 200) FROM generate_series(1, 100) g")
	waitNoLocks(t, s)

	big, small := tableSize("big"), tableSize("small")
	tb := tabletOf("big")
	if ts := tabletOf("small"); ts.id != tb.id {
		t.Fatalf("colocated tables on tablets %d and %d, want one", tb.id, ts.id)
	}
	t.Logf("big %d, small %d, tablet live %d total %d", big, small, tb.live, tb.total)
	if small < 100*200 || big < 1000*200 {
		t.Fatalf("sizes %d and %d are below the values they hold", big, small)
	}
	// Same row shape, ten times the rows: the ratio is 10 up to key-length
	// differences of a few bytes per row.
	if r := float64(big) / float64(small); r < 9 || r > 11 {
		t.Fatalf("big/small = %.2f (%d/%d), want about 10", r, big, small)
	}
	if big+small > tb.total {
		t.Fatalf("tables' sizes sum to %d, more than their tablet's %d bytes", big+small, tb.total)
	}
	if tb.live > tb.total {
		t.Fatalf("tablet live bytes %d > total %d", tb.live, tb.total)
	}
	if db := scalar("SELECT pg_database_size('shop')"); db != big+small {
		t.Fatalf("pg_database_size = %d, want the tables' %d", db, big+small)
	}

	// Inserts grow the table they go to, and only it.
	exec("INSERT INTO small SELECT g, repeat('y', 200) FROM generate_series(101, 200) g")
	waitNoLocks(t, s)
	if got := tableSize("small"); got <= small {
		t.Fatalf("small after inserts: %d, was %d", got, small)
	}
	if got := tableSize("big"); got != big {
		t.Fatalf("big changed from %d to %d with inserts into small", big, got)
	}

	// An index is its own span: it adds to pg_indexes_size and the total,
	// not to the table's size.
	exec("CREATE INDEX big_v ON big (v)")
	waitNoLocks(t, s)
	idx := scalar("SELECT pg_relation_size('big_v')")
	if idx < 1000*200 {
		t.Fatalf("index of 1000 values of 200 bytes: %d bytes", idx)
	}
	if got := scalar("SELECT pg_indexes_size('big')"); got != idx {
		t.Fatalf("pg_indexes_size = %d, want the one index's %d", got, idx)
	}
	if got, want := scalar("SELECT pg_total_relation_size('big')"), tableSize("big")+idx; got != want {
		t.Fatalf("pg_total_relation_size = %d, want %d", got, want)
	}

	// A hash-partitioned table spreads its rows over the buckets of its
	// own group, split into tablets; its index (global: such tables'
	// indexes get a group of their own) is one span. Rows are counted by
	// one scan of the group keeping the table's primary-index keys, and
	// must come to exactly what the group's tablets hold.
	exec("CREATE TABLE h (id int PRIMARY KEY, v text) WITH (colocated = false) SPLIT INTO 3 TABLETS")
	exec("CREATE INDEX h_v ON h (v)")
	exec("INSERT INTO h SELECT g, repeat('h', 200) FROM generate_series(1, 300) g")
	// The INSERT's intents are resolved asynchronously after it commits,
	// and a lock record is counted where its resolved version will be:
	// wait until none is left, so both counts see the same bytes.
	waitNoLocks(t, s)
	hRows, hIdx := tableSize("h"), scalar("SELECT pg_relation_size('h_v')")
	rowTablets := scalar(`SELECT count(*) FROM cairn_catalog.tablets WHERE database_name = 'shop' AND table_name = 'h' AND index_name IS NULL`)
	rowBytes := scalar(`SELECT sum(total_bytes) FROM cairn_catalog.tablets WHERE database_name = 'shop' AND table_name = 'h' AND index_name IS NULL`)
	idxBytes := scalar(`SELECT sum(total_bytes) FROM cairn_catalog.tablets WHERE database_name = 'shop' AND table_name = 'h' AND index_name = 'h_v'`)
	t.Logf("h: rows %d bytes on %d tablets holding %d; index %d bytes, its tablet %d", hRows, rowTablets, rowBytes, hIdx, idxBytes)
	if rowTablets != 3 {
		t.Fatalf("h's rows are on %d tablets, want 3", rowTablets)
	}
	if hRows < 300*200 || hRows != rowBytes {
		t.Fatalf("h's rows: pg_table_size %d, its tablets hold %d (want equal, over %d)", hRows, rowBytes, 300*200)
	}
	if hIdx < 300*200 || hIdx > idxBytes {
		t.Fatalf("h_v: %d bytes, its tablet %d (want at most that, over %d)", hIdx, idxBytes, 300*200)
	}
	if total := scalar("SELECT pg_total_relation_size('h')"); total != hRows+hIdx {
		t.Fatalf("h: total %d, want rows %d + index %d", total, hRows, hIdx)
	}

	// Updates leave old versions behind: total bytes grow by about what
	// they wrote, live bytes stay.
	waitNoLocks(t, s)
	before := tabletOf("small")
	exec("UPDATE small SET v = repeat('z', 200)")
	waitNoLocks(t, s)
	after := tabletOf("small")
	t.Logf("updates: live %d -> %d, total %d -> %d", before.live, after.live, before.total, after.total)
	if after.total-before.total < 200*200 {
		t.Fatalf("total bytes grew by %d after rewriting 200 values of 200 bytes", after.total-before.total)
	}
	if d := after.live - before.live; d < -1000 || d > 200*50 {
		t.Fatalf("live bytes moved by %d after updates in place", d)
	}
}

// TestTabletStatsCache: a tablet's live and total bytes are reused within
// the cache's TTL and recounted after it (here: never reused).
func TestTabletStatsCache(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	conn := connect(t, s)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE c (id int PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	descs := s.store.Tablets()
	d := descs[len(descs)-1] // the last tablet holds table data
	s.tabletStatsCache.ttl = time.Hour
	first, err := s.tabletStats(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO c SELECT g, repeat('x', 100) FROM generate_series(1, 100) g"); err != nil {
		t.Fatal(err)
	}
	cached, err := s.tabletStats(d)
	if err != nil {
		t.Fatal(err)
	}
	if cached != first {
		t.Fatalf("within the TTL: %+v, want the cached %+v", cached, first)
	}
	s.tabletStatsCache.ttl = -1
	waitNoLocks(t, s) // live bytes count resolved versions, not intents
	fresh, err := s.tabletStats(d)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.LiveBytes < first.LiveBytes+100*100 {
		t.Fatalf("recounted live bytes %d, want at least %d more than %d", fresh.LiveBytes, 100*100, first.LiveBytes)
	}
}

// waitNoLocks waits until the table data span holds no lock record (every
// intent resolved).
func waitNoLocks(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := mvcc.ComputeSpanStats(s.eng, keys.TableDataMin, keys.Max, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.Locks == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lock records still in the table data span after 30s", st.Locks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
