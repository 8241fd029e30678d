package ddl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// GIN indexes (issue #18) over pgwire against a whole node: built online
// while a writer changes the table, exact afterwards, and a randomized
// checker comparing every GIN-filtered answer with a full scan's.

// ginDoc is a random small JSON document over few keys and values, so
// that random queries often match.
func ginDoc(r *rand.Rand, depth int) any {
	k := r.Intn(8)
	if depth <= 0 && k >= 6 {
		k = r.Intn(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.Intn(2) == 0
	case 2:
		return json.Number([]string{"1", "1.0", "2", "30"}[r.Intn(4)])
	case 3, 4, 5:
		return []string{"a", "b", "x", "test@gmail.com"}[r.Intn(4)]
	case 6:
		var out []any
		for range r.Intn(4) {
			out = append(out, ginDoc(r, depth-1))
		}
		if out == nil {
			out = []any{}
		}
		return out
	default:
		out := map[string]any{}
		for range r.Intn(4) {
			out[[]string{"a", "b", "c", "email", "commits"}[r.Intn(5)]] = ginDoc(r, depth-1)
		}
		return out
	}
}

func ginJSON(r *rand.Rand, depth int) string {
	b, err := json.Marshal(ginDoc(r, depth))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func ginArray(r *rand.Rand) string {
	var el []string
	for range r.Intn(4) {
		if r.Intn(8) == 0 {
			el = append(el, "NULL")
		} else {
			el = append(el, fmt.Sprint(r.Intn(6)))
		}
	}
	return "{" + strings.Join(el, ",") + "}"
}

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ginWrite makes one random change to g's row k.
func ginWrite(ctx context.Context, c *pgx.Conn, r *rand.Rand) error {
	k := r.Intn(400)
	var err error
	switch r.Intn(4) {
	case 0:
		_, err = c.Exec(ctx, "DELETE FROM g WHERE k = $1", k)
	case 1:
		_, err = c.Exec(ctx, fmt.Sprintf("UPDATE g SET j = j || %s WHERE k = %d", quoteLit(`{"b": "x"}`), k))
	default:
		_, err = c.Exec(ctx, fmt.Sprintf("INSERT INTO g VALUES (%d, %s, %s) ON CONFLICT (k) DO UPDATE SET j = excluded.j, a = excluded.a", k, quoteLit(ginJSON(r, 3)), quoteLit(ginArray(r))))
	}
	return err
}

// TestGINRandomized builds three GIN indexes online while a writer
// changes the table, checks that each holds exactly the entries of the
// rows, and compares the answers of random @>, ?, ?|, ?&, && queries
// read through the indexes with those of a full scan.
func TestGINRandomized(t *testing.T) { testGINRandomized(t, false) }

// TestGINRandomizedDistributed is TestGINRandomized on a distributed
// table of 4 shards: its GIN indexes are local (docs/distributed.md,
// "Local GIN indexes"), each entry in its row's tablet, and read a span
// per token and block.
func TestGINRandomizedDistributed(t *testing.T) { testGINRandomized(t, true) }

func testGINRandomized(t *testing.T, distributed bool) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	ctx := context.Background()
	r := rand.New(rand.NewSource(18))
	mustExec(t, c, "CREATE TABLE g (k INT PRIMARY KEY, j JSONB, a INT[])")
	for k := range 400 {
		if r.Intn(10) == 0 {
			continue
		}
		mustExec(t, c, fmt.Sprintf("INSERT INTO g VALUES (%d, %s, %s)", k, quoteLit(ginJSON(r, 3)), quoteLit(ginArray(r))))
	}
	if distributed {
		mustExec(t, c, "SET citus.shard_count = 4")
		mustExec(t, c, "SELECT create_distributed_table('g', 'k')")
	}

	// A writer runs through the builds.
	wc := connect(t, url, "postgres")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes, retries int
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		wr := rand.New(rand.NewSource(19))
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := ginWrite(ctx, wc, wr)
			switch {
			case err == nil:
				writes++
			case sqlState(err) == "40001":
				retries++
			default:
				werr = err
				return
			}
		}
	}()
	mustExec(t, c, "CREATE INDEX g_j ON g USING gin (j)")
	mustExec(t, c, "CREATE INDEX CONCURRENTLY g_j_path ON g USING gin (j jsonb_path_ops)")
	mustExec(t, c, "CREATE INDEX g_a ON g USING gin (a)")
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	t.Logf("writer: %d writes, %d 40001 during the builds", writes, retries)
	if writes == 0 {
		t.Fatal("the writer wrote nothing during the builds")
	}
	// More writes after the builds: the writers maintain the indexes.
	for range 300 {
		if err := ginWrite(ctx, c, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, ix := range []string{"g_j", "g_j_path", "g_a"} {
		checkGINExact(t, s, c, ix)
		if distributed {
			checkGINBesideRows(t, s, c, ix, 4)
		}
	}

	// Statistics as a planner would have them (the table is read through
	// the indexes only when they look cheaper than a full scan).
	mustExec(t, c, "ANALYZE g")
	if distributed {
		// The local entries share the table's tablets, which statistics
		// measure: on 400 rows a full scan then looks cheaper than the
		// index. Compare the index's answers all the same.
		mustExec(t, c, "SET enable_seqscan = off")
	}
	full := connect(t, url, "postgres")
	mustExec(t, full, "SET enable_indexscan = off")
	keyList := func() string {
		var ks []string
		for range r.Intn(3) + 1 {
			ks = append(ks, quoteLit([]string{"a", "b", "c", "x", "email", "zz"}[r.Intn(6)]))
		}
		return "ARRAY[" + strings.Join(ks, ", ") + "]"
	}
	used, matched := 0, 0
	for i := range 400 {
		var pred string
		switch i % 7 {
		case 0, 1:
			pred = "j @> " + quoteLit(ginJSON(r, 2))
		case 2:
			pred = "j ? " + quoteLit([]string{"a", "b", "c", "x", "commits"}[r.Intn(5)])
		case 3:
			pred = "j ?| " + keyList()
		case 4:
			pred = "j ?& " + keyList()
		case 5:
			pred = "a @> " + quoteLit(ginArray(r))
		default:
			pred = "a && " + quoteLit(ginArray(r))
		}
		if r.Intn(4) == 0 {
			pred += " AND k % 3 = 0"
		}
		q := "SELECT k FROM g WHERE " + pred + " ORDER BY k"
		got, want := ginKeys(t, c, q), ginKeys(t, full, q)
		if !slices.Equal(got, want) {
			t.Fatalf("%s:\nthrough the index %v\nfull scan         %v", q, got, want)
		}
		if len(want) > 0 {
			matched++
		}
		var plan strings.Builder
		rows, err := c.Query(ctx, "EXPLAIN "+q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if distributed && strings.Contains(plan.String(), "Inverted Index Scan") && !strings.Contains(plan.String(), "Local Blocks: all 4") {
			t.Fatalf("%s reads a local GIN index but EXPLAIN does not say so:\n%s", q, plan.String())
		}
		if strings.Contains(plan.String(), "Inverted Index Scan") {
			used++
		} else if i < 3 {
			t.Logf("%s:\n%s", q, plan.String())
		}
	}
	t.Logf("400 queries: %d read a GIN index, %d matched rows", used, matched)
	if used < 300 || matched < 100 {
		t.Fatalf("only %d of 400 queries used a GIN index and %d matched rows: the comparison proves little", used, matched)
	}
}

func ginKeys(t *testing.T, c *pgx.Conn, q string) []int64 {
	t.Helper()
	rows, err := c.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// checkGINExact compares the entries of GIN index ix of table g with
// those its rows make: none missing, none extra.
func checkGINExact(t *testing.T, s *server.Server, c *pgx.Conn, ix string) {
	t.Helper()
	ctx := context.Background()
	desc := moveState(t, s, c, "g")
	idx := desc.IndexByName(ix)
	if idx == nil || idx.JobID != 0 {
		t.Fatalf("index %s: %+v", ix, idx)
	}
	layout, err := desc.Layout()
	if err != nil {
		t.Fatal(err)
	}
	il := layout.Index(uint32(idx.ID))
	rows, err := c.Query(ctx, "SELECT k, j::text, a::text FROM g")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	n := 0
	for rows.Next() {
		var k int64
		var j, a *string
		if err := rows.Scan(&k, &j, &a); err != nil {
			t.Fatal(err)
		}
		row := []types.Datum{types.DInt(k), types.DNull, types.DNull}
		if j != nil {
			if row[1], err = types.ParseDatum(nil, types.JSONB, *j); err != nil {
				t.Fatal(err)
			}
		}
		if a != nil {
			if row[2], err = types.ParseDatum(nil, types.MustArray(types.Int4), *a); err != nil {
				t.Fatal(err)
			}
		}
		ents, err := layout.EncodeIndexEntries(nil, il, row)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			want[string(e.Key)] = true
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sp := layout.IndexSpan(il)
	all, err := s.DB().Scan(ctx, sp.Key, sp.EndKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A local index's span is its table's group: keep its own keys.
	keyID := il.KeyID
	if keyID == 0 {
		keyID = il.ID
	}
	var kvs []kvpb.KeyValue
	for _, e := range all {
		if p, _, err := rowenc.DecodeKeyPrefix(e.Key); err == nil && p.Table == uint32(layout.ID) && p.Index == keyID {
			kvs = append(kvs, e)
		}
	}
	extra := 0
	for _, kv := range kvs {
		if !want[string(kv.Key)] {
			extra++
		}
		delete(want, string(kv.Key))
	}
	if extra != 0 || len(want) != 0 || len(kvs) == 0 {
		t.Fatalf("index %s over %d rows: %d entries, %d extra, %d missing", ix, n, len(kvs), extra, len(want))
	}
	t.Logf("index %s (%s): %d entries for %d rows", ix, il.Inverted, len(kvs), n)
}

// checkGINBesideRows checks that GIN index ix of the distributed table g
// (blocks blocks) is local and that each of its entries is in the same
// tablet as its row: the row's shard. Before local GIN indexes a
// distributed table's GIN index was global, in a group and tablets of
// its own.
func checkGINBesideRows(t *testing.T, s *server.Server, c *pgx.Conn, ix string, blocks int) {
	t.Helper()
	ctx := context.Background()
	desc := moveState(t, s, c, "g")
	idx := desc.IndexByName(ix)
	if idx.Placement != catalog.IndexLocal || idx.Blocks != blocks {
		t.Fatalf("index %s of a distributed table: placement %q, %d blocks; want local, %d", ix, idx.Placement, idx.Blocks, blocks)
	}
	layout, err := desc.Layout()
	if err != nil {
		t.Fatal(err)
	}
	il := layout.Index(uint32(idx.ID))
	rows, err := c.Query(ctx, "SELECT k, j::text, a::text FROM g")
	if err != nil {
		t.Fatal(err)
	}
	type rowKeys struct {
		pk   []byte
		ents []rowenc.IndexEntry
	}
	var all []rowKeys
	for rows.Next() {
		var k int64
		var j, a *string
		if err := rows.Scan(&k, &j, &a); err != nil {
			t.Fatal(err)
		}
		row := []types.Datum{types.DInt(k), types.DNull, types.DNull}
		if j != nil {
			if row[1], err = types.ParseDatum(nil, types.JSONB, *j); err != nil {
				t.Fatal(err)
			}
		}
		if a != nil {
			if row[2], err = types.ParseDatum(nil, types.MustArray(types.Int4), *a); err != nil {
				t.Fatal(err)
			}
		}
		pk, err := layout.PrimaryKey(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := layout.EncodeIndexEntries(nil, il, row)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rowKeys{pk, ents})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	tablets := map[uint64]bool{}
	entries := 0
	for _, rk := range all {
		a, err := s.DB().TabletCache().Lookup(ctx, rk.pk, false)
		if err != nil {
			t.Fatal(err)
		}
		tablets[uint64(a.TabletID)] = true
		for _, e := range rk.ents {
			b, err := s.DB().TabletCache().Lookup(ctx, e.Key, false)
			if err != nil {
				t.Fatal(err)
			}
			if a.TabletID != b.TabletID {
				t.Fatalf("index %s: row %x in tablet %d, its entry %x in tablet %d", ix, rk.pk, a.TabletID, e.Key, b.TabletID)
			}
			entries++
		}
	}
	if len(tablets) < blocks || entries == 0 {
		t.Fatalf("index %s: %d entries of rows in %d tablets: the check proves little", ix, entries, len(tablets))
	}
}
