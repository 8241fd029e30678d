package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/storage"
)

// httpGet fetches path from s's HTTP address.
func httpGet(t *testing.T, s *Server, path string) (code int, ctype, body string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s%s", s.HTTPAddr(), path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// getJSON fetches path and decodes it into v, failing on a non-200.
func getJSON(t *testing.T, s *Server, path string, v any) {
	t.Helper()
	code, ctype, body := httpGet(t, s, path)
	if code != 200 || ctype != "application/json" {
		t.Fatalf("%s: %d %s\n%s", path, code, ctype, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, body)
	}
}

func execAll(t *testing.T, c *pgx.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func connectDB(t *testing.T, s *Server, db string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func findTable(dbs []DatabaseInfo, db, table string) *TableInfo {
	for _, d := range dbs {
		for i, tb := range d.Tables {
			if d.Name == db && !d.System && tb.Name == table {
				return &d.Tables[i]
			}
		}
	}
	return nil
}

// TestAdminUI: on a node with a colocated database (two tables and an
// index in its one tablet, a table opted out into three tablets of its
// own) and a table of an ordinary database, the JSON API and the pages
// show the node, the databases, tables and tablets as the store and
// cairn_catalog.tablets have them, which tables share a tablet, the
// system catalog as a colocated group, and the tablets' load.
func TestAdminUI(t *testing.T) {
	s := start(t, Config{Insecure: true, Locality: "region=us-west"})
	defer s.Stop(context.Background())
	ctx := context.Background()
	pg := connectDB(t, s, "postgres")
	execAll(t, pg,
		"CREATE DATABASE shop WITH colocated = true",
		`CREATE DATABASE "odd/name <x>"`,
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int)",
		"INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 200) g")
	shop := connectDB(t, s, "shop")
	execAll(t, shop,
		"CREATE TABLE products (id int PRIMARY KEY, category text)",
		"CREATE INDEX products_category_idx ON products (category)",
		"CREATE TABLE orders (id int PRIMARY KEY, product int)",
		"CREATE TABLE events (id int PRIMARY KEY) WITH (colocated = false) SPLIT INTO 3 TABLETS",
		"INSERT INTO products SELECT g, 'c' || g % 5 FROM generate_series(1, 100) g",
		"INSERT INTO events SELECT g FROM generate_series(1, 100) g")
	descs := s.store.Tablets()

	// Nodes: this one, holding and leading every tablet.
	var nodes []NodeInfo
	getJSON(t, s, "/api/nodes", &nodes)
	if len(nodes) != 1 {
		t.Fatalf("nodes: %+v", nodes)
	}
	if n := nodes[0]; n.NodeID != 1 || n.Locality != "region=us-west" || n.Liveness != LivenessLive ||
		n.SQLAddr != s.Addr().String() || n.HTTPAddr != s.HTTPAddr().String() ||
		n.Replicas != len(descs) || n.Leaders != len(descs) {
		t.Errorf("node: %+v, want node 1 with %d replicas and leaders", n, len(descs))
	}

	// Databases and tables.
	var dbs []DatabaseInfo
	getJSON(t, s, "/api/databases", &dbs)
	var names []string
	for _, d := range dbs {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"system", "odd/name <x>", "postgres", "shop"}) || !dbs[0].System || !dbs[0].Colocated {
		t.Fatalf("databases %v (system %+v)", names, dbs[0])
	}
	shopDB := dbs[3]
	if !shopDB.Colocated || len(shopDB.ColocationTablets) != 1 {
		t.Fatalf("shop: %+v, want colocated with one tablet", shopDB)
	}
	shared := shopDB.ColocationTablets[0]
	products, orders, events := findTable(dbs, "shop", "products"), findTable(dbs, "shop", "orders"), findTable(dbs, "shop", "events")
	accounts := findTable(dbs, "postgres", "accounts")
	if products == nil || orders == nil || events == nil || accounts == nil {
		t.Fatalf("tables missing: %+v", dbs)
	}
	if !products.Colocated || !slices.Equal(products.Tablets, []uint64{shared}) || !slices.Equal(products.Indexes, []string{"products_category_idx"}) {
		t.Errorf("products: %+v, want colocated in tablet %d", products, shared)
	}
	if !orders.Colocated || !slices.Equal(orders.Tablets, []uint64{shared}) {
		t.Errorf("orders: %+v, want colocated in tablet %d", orders, shared)
	}
	if events.Colocated || len(events.Tablets) != 3 || slices.Contains(events.Tablets, shared) {
		t.Errorf("events: %+v, want 3 tablets of its own", events)
	}
	if accounts.Colocated || len(accounts.Tablets) != 1 || accounts.Tablets[0] == shared {
		t.Errorf("accounts: %+v", accounts)
	}
	if code, _, body := httpGet(t, s, "/api/databases/odd%2Fname%20%3Cx%3E/tables"); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("tables of a database without tables: %d %s", code, body)
	}
	var index []struct{ Path string }
	getJSON(t, s, "/api/", &index)
	if len(index) != 15 || index[0].Path != "/api/nodes" || index[14].Path != "POST /api/nodes/{id}/decommission" {
		t.Errorf("/api/: %+v", index)
	}
	// A cluster of one runs at its binary's version.
	if v := apiVersion(t, s); v.ClusterVersion != clusterversion.Binary.String() || v.BinaryVersion != v.ClusterVersion {
		t.Errorf("/api/version of a cluster of one: %+v", v)
	}
	var shopTables []TableInfo
	getJSON(t, s, "/api/databases/shop/tables", &shopTables)
	if len(shopTables) != 3 || shopTables[0].Name != "events" || shopTables[1].Name != "orders" || shopTables[2].Name != "products" {
		t.Errorf("/api/databases/shop/tables: %+v", shopTables)
	}

	// The same placement as cairn_catalog.tablets shows.
	rows, err := shop.Query(ctx, `SELECT DISTINCT table_name, tablet_id FROM cairn_catalog.tablets WHERE database_name = 'shop'`)
	if err != nil {
		t.Fatal(err)
	}
	view := map[string][]uint64{}
	for rows.Next() {
		var name string
		var id int64
		if err := rows.Scan(&name, &id); err != nil {
			t.Fatal(err)
		}
		view[name] = append(view[name], uint64(id))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []*TableInfo{products, orders, events} {
		slices.Sort(view[tb.Name])
		if !slices.Equal(view[tb.Name], tb.Tablets) {
			t.Errorf("%s: the API says tablets %v, cairn_catalog.tablets %v", tb.Name, tb.Tablets, view[tb.Name])
		}
	}

	// The system catalog: one colocated group, its parts in one tablet,
	// the span's first.
	sys := dbs[0]
	if len(sys.ColocationTablets) != 1 || sys.ColocationTablets[0] != uint64(descs[0].TabletID) {
		t.Errorf("system catalog tablets %v, want the first tablet %d", sys.ColocationTablets, descs[0].TabletID)
	}
	for _, p := range sys.Tables {
		if !slices.Equal(p.Tablets, sys.ColocationTablets) || !p.Colocated {
			t.Errorf("system part %+v not in the system tablet", p)
		}
	}

	// Tablets: every tablet of the store, once, with its span; the shared
	// one names both tables and its group.
	var tablets []TabletInfo
	getJSON(t, s, "/api/tablets", &tablets)
	if len(tablets) != len(descs) {
		t.Fatalf("%d tablets listed, the store has %d", len(tablets), len(descs))
	}
	for i, tb := range tablets {
		d := descs[i]
		if tb.TabletID != uint64(d.TabletID) || tb.StartKey != rowenc.PrettyKey(d.StartKey) || tb.EndKey != rowenc.PrettyKey(d.EndKey) ||
			!slices.Equal(tb.Replicas, []int{1}) || tb.Leader != 1 {
			t.Errorf("tablet %+v, store has %v", tb, d)
		}
	}
	var sharedTablets []TabletInfo
	getJSON(t, s, fmt.Sprintf("/api/tables/%d/tablets", products.ID), &sharedTablets)
	if len(sharedTablets) != 1 || sharedTablets[0].TabletID != shared || sharedTablets[0].Colocation != "shop" {
		t.Fatalf("products' tablets: %+v", sharedTablets)
	}
	var in []string
	for _, x := range sharedTablets[0].Tables {
		in = append(in, x.Qualified())
	}
	if !slices.Equal(in, []string{"shop.public.orders", "shop.public.products"}) {
		t.Errorf("tablet %d holds %v, want orders and products", shared, in)
	}
	var eventTablets []TabletInfo
	getJSON(t, s, fmt.Sprintf("/api/tables/%d/tablets", events.ID), &eventTablets)
	if len(eventTablets) != 3 {
		t.Fatalf("events' tablets: %+v", eventTablets)
	}
	for _, tb := range eventTablets {
		if len(tb.Tables) != 1 || tb.Tables[0].Name != "events" || tb.Colocation != "" {
			t.Errorf("events' tablet %+v", tb)
		}
	}

	// Load: reads of products show as reads per second on its tablet.
	var before TabletInfo
	getJSON(t, s, fmt.Sprintf("/api/tablets/%d", shared), &before)
	for i := range 20 {
		var c string
		if err := shop.QueryRow(ctx, "SELECT category FROM products WHERE id = $1", i+1).Scan(&c); err != nil {
			t.Fatal(err)
		}
	}
	var after TabletInfo
	getJSON(t, s, fmt.Sprintf("/api/tablets/%d", shared), &after)
	if after.ReadBatches < before.ReadBatches+20 || after.ReadsPerSec <= 0 || after.WriteBatches == 0 {
		t.Errorf("after 20 point reads: %+v (before %+v)", after, before)
	}

	// Pages.
	code, ctype, body := httpGet(t, s, "/")
	if code != 200 || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("/: %d %s", code, ctype)
	}
	for _, want := range []string{`<tr class="node-row" data-node-id="1">`, "region=us-west", `class="live"`,
		`<a href="/system">system catalog</a>`, `<a href="/databases/shop">shop</a>`, fmt.Sprintf(`href="/tablets#tablet-%d"`, shared)} {
		if !strings.Contains(body, want) {
			t.Errorf("/ lacks %q", want)
		}
	}
	pages := map[string][]string{
		"/databases": {`<a href="/databases/postgres">postgres</a>`, `<a href="/databases/shop">shop</a>`, `<a href="/system">system catalog</a>`,
			`<a href="/databases/odd%2Fname%20%3Cx%3E">odd/name &lt;x&gt;</a>`},
		"/databases/odd%2Fname%20%3Cx%3E": {"Database odd/name &lt;x&gt;", "no tables"},
		"/databases/shop": {fmt.Sprintf(`<a href="/tables/%d">public.products</a>`, products.ID), "public.orders", "public.events",
			"products_category_idx", fmt.Sprintf(`data-tablet-id="%d"`, shared), "2 tables share this tablet",
			fmt.Sprintf(`data-tablet-id="%d"`, events.Tablets[2])},
		fmt.Sprintf("/tables/%d", events.ID): {"Table shop.public.events", fmt.Sprintf(`data-tablet-id="%d"`, events.Tablets[0]),
			fmt.Sprintf(`data-tablet-id="%d"`, events.Tablets[1]), fmt.Sprintf(`data-tablet-id="%d"`, events.Tablets[2])},
		"/system":  {"System catalog", "descriptors", "namespace", "tablet_directory", fmt.Sprintf(`data-tablet-id="%d"`, descs[0].TabletID)},
		"/tablets": {fmt.Sprintf(`data-tablet-id="%d"`, descs[len(descs)-1].TabletID), "shop.public.orders", "postgres.public.accounts"},
	}
	for path, wants := range pages {
		code, _, body := httpGet(t, s, path)
		if code != 200 {
			t.Errorf("%s: %d %s", path, code, body)
			continue
		}
		for _, want := range wants {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q", path, want)
			}
		}
	}
	// The table page shows only the table's tablets.
	if _, _, body := httpGet(t, s, fmt.Sprintf("/tables/%d", events.ID)); strings.Count(body, `class="tablet-row`) != 3 {
		t.Errorf("/tables/%d shows %d tablets, want 3", events.ID, strings.Count(body, `class="tablet-row`))
	}
	if code, _, _ := httpGet(t, s, "/ui/style.css"); code != 200 {
		t.Errorf("/ui/style.css: %d", code)
	}
	for _, path := range []string{"/no/such/page", "/databases/nope", "/tables/999999", "/tables/x", "/api/databases/nope/tables",
		"/api/tables/999999/tablets", "/api/tablets/999999"} {
		if code, _, _ := httpGet(t, s, path); code != 404 {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}

	// /metrics: the node's replica and leader counts, per-tablet counters.
	_, _, body = httpGet(t, s, "/metrics")
	for _, want := range []string{
		fmt.Sprintf("\ncairn_replicas{node=\"1\"} %d\n", len(descs)),
		fmt.Sprintf("\ncairn_leaders{node=\"1\"} %d\n", len(descs)),
		fmt.Sprintf("\ncairn_tablet_read_batches_total{node=\"1\",tablet=\"%d\"} ", shared),
		"# TYPE cairn_tablet_write_batches_total counter",
		"\ncairn_colocation_tablets_over_warn_size{node=\"1\"} 0\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestAdminSystemCatalog: each key family the UI lists as a part of the
// system catalog holds keys (so a renamed prefix cannot leave the UI
// naming an empty span).
func TestAdminSystemCatalog(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	pg := connectDB(t, s, "postgres")
	execAll(t, pg, "CREATE TABLE t (id int PRIMARY KEY)", "CREATE SEQUENCE q", "SELECT nextval('q')",
		"INSERT INTO t SELECT g FROM generate_series(1, 10) g", "ANALYZE t")
	for _, p := range systemParts {
		it, err := s.eng.NewIter(storage.IterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := it.SeekGE(storage.MVCCKey{Key: p.prefix}) && bytes.HasPrefix(it.UnsafeKey().Key, p.prefix)
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Errorf("system part %s (%q) holds no keys", p.name, p.prefix)
		}
	}
}

// syncBuffer is a log destination tests read while the node writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestAdminColocationWarning: a colocation tablet grown past
// ColocationWarnSize logs one warning however often it is checked, the
// UI flags it and /metrics counts it; a table of an ordinary database of
// the same size does not warn.
func TestAdminColocationWarning(t *testing.T) {
	var logs syncBuffer
	s, err := Start(context.Background(), Config{Insecure: true, ColocationWarnSize: 32 << 10,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	ctx := context.Background()
	pg := connectDB(t, s, "postgres")
	execAll(t, pg, "CREATE DATABASE app WITH colocated = true",
		"CREATE TABLE plain (id int PRIMARY KEY, pad text)",
		"INSERT INTO plain SELECT g, repeat('y', 200) FROM generate_series(1, 2000) g")
	app := connectDB(t, s, "app")
	execAll(t, app, "CREATE TABLE big (id int PRIMARY KEY, pad text)", "CREATE TABLE small (id int PRIMARY KEY)",
		"INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")
	if err := s.eng.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.checkColocationSizes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var dbs []DatabaseInfo
	getJSON(t, s, "/api/databases", &dbs)
	var appDB *DatabaseInfo
	for i := range dbs {
		if dbs[i].Name == "app" {
			appDB = &dbs[i]
		}
	}
	if appDB == nil || len(appDB.ColocationTablets) != 1 {
		t.Fatalf("app: %+v", appDB)
	}
	id := appDB.ColocationTablets[0]
	warning := fmt.Sprintf("colocation tablet %d of app is ", id)
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Errorf("%d warnings %q after three checks, want 1; logs:\n%s", n, warning, logs.String())
	}
	if strings.Contains(logs.String(), "of postgres is") {
		t.Errorf("a table of an ordinary database warned:\n%s", logs.String())
	}
	var tb, plainTablet, emptied TabletInfo
	getJSON(t, s, fmt.Sprintf("/api/tablets/%d", id), &tb)
	if !tb.OverWarnSize || tb.SizeBytes <= 32<<10 {
		t.Errorf("tablet %+v, want over the warning size", tb)
	}
	plain := findTable(dbs, "postgres", "plain")
	getJSON(t, s, fmt.Sprintf("/api/tablets/%d", plain.Tablets[0]), &plainTablet)
	if plainTablet.OverWarnSize || plainTablet.Colocation != "" || plainTablet.SizeBytes <= 32<<10 {
		t.Errorf("plain's tablet %+v: as large, not a colocation tablet", plainTablet)
	}
	for _, path := range []string{"/", "/databases/app"} {
		_, _, body := httpGet(t, s, path)
		if !strings.Contains(body, fmt.Sprintf(`Colocation tablet <a href="/tablets#tablet-%d">%d</a> of
<b>app</b>`, id, id)) || !strings.Contains(body, "32.0 KiB") {
			t.Errorf("%s shows no warning for tablet %d:\n%s", path, id, body)
		}
	}
	if _, _, body := httpGet(t, s, "/metrics"); !strings.Contains(body, "\ncairn_colocation_tablets_over_warn_size{node=\"1\"} ") ||
		strings.Contains(body, "\ncairn_colocation_tablets_over_warn_size{node=\"1\"} 0\n") {
		t.Errorf("/metrics counts no colocation tablet over the warning size")
	}

	// Under a larger limit the tablet is back under (noted once); under
	// the first again, it crosses again and warns again. (Dropping the
	// table would not shrink it: MVCC keeps the deleted versions until
	// GC.)
	s.SetColocationWarnSize(1 << 30)
	for range 2 {
		if err := s.checkColocationSizes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	getJSON(t, s, fmt.Sprintf("/api/tablets/%d", id), &emptied)
	if emptied.OverWarnSize {
		t.Errorf("under a 1 GiB limit: %+v", emptied)
	}
	if n := strings.Count(logs.String(), fmt.Sprintf("back under --colocation-warn-size\" tablet=%d", id)); n != 1 {
		t.Errorf("%d notes that tablet %d is back under, want 1:\n%s", n, id, logs.String())
	}
	s.SetColocationWarnSize(32 << 10)
	if err := s.checkColocationSizes(ctx); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), warning); n != 2 {
		t.Errorf("%d warnings after the second crossing, want 2", n)
	}
}

// TestLoadTracker: rates are the counters' change since the oldest sample
// of the window, per second.
func TestLoadTracker(t *testing.T) {
	var l loadTracker
	t0 := time.Unix(1000, 0)
	l.record(t0, map[uint64][2]int64{1: {0, 0}})
	l.record(t0.Add(5*time.Second), map[uint64][2]int64{1: {50, 10}, 2: {7, 7}})
	got := l.rates(t0.Add(10*time.Second), map[uint64][2]int64{1: {100, 20}, 2: {17, 7}, 3: {5, 5}})
	// Tablet 3 is in no sample: it counts from zero at the newest.
	want := map[uint64][2]float64{1: {10, 2}, 2: {2, 0}, 3: {1, 1}}
	if len(got) != len(want) || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("rates %v, want %v", got, want)
	}
	// Samples older than the window go, but one at its start stays.
	for i := 1; i <= 20; i++ {
		l.record(t0.Add(time.Duration(5+i)*time.Second), map[uint64][2]int64{1: {int64(100 * i), 0}})
	}
	if n := len(l.samples); n != 11 {
		t.Errorf("%d samples kept, want 11 (a window of 10 s sampled every second)", n)
	}
	got = l.rates(t0.Add(25*time.Second), map[uint64][2]int64{1: {2000, 0}})
	if got[1][0] != 100 {
		t.Errorf("rate %v over the last window, want 100/s", got[1])
	}
}

// TestAdminUICluster: on a three-node cluster each node's UI lists the
// three members, every tablet with three replicas and a leader, and a
// stopped member as suspect once its liveness record expires.
func TestAdminUICluster(t *testing.T) {
	ctx := context.Background()
	var lns []net.Listener
	var join []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		join = append(join, ln.Addr().String())
	}
	servers := make([]*Server, 3)
	errs := make([]error, 3)
	logs := make([]syncBuffer, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			servers[i], errs[i] = Start(ctx, Config{Insecure: true, Join: join, RPCAddr: join[i], RPCListener: lns[i],
				Locality: fmt.Sprintf("region=r%d", i+1), Logger: slog.New(slog.NewTextHandler(&logs[i], nil)),
				// A stopped node's liveness record expires within a second.
				LivenessTTL: time.Second})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	stopped := make([]bool, 3)
	defer func() {
		for i, s := range servers {
			if !stopped[i] {
				_ = s.Stop(ctx)
			}
		}
	}()
	c := connectDB(t, servers[0], "postgres")
	execAll(t, c, "CREATE DATABASE app WITH colocated = true", "CREATE TABLE t (id int PRIMARY KEY)",
		"INSERT INTO t SELECT g FROM generate_series(1, 10) g")

	ntablets := len(servers[0].store.Tablets())
	// Followers learn the leader from its messages: wait until node 2
	// knows one for every tablet.
	deadline := time.Now().Add(30 * time.Second)
	var tablets []TabletInfo
	for {
		getJSON(t, servers[1], "/api/tablets", &tablets)
		known := 0
		for _, tb := range tablets {
			if tb.Leader != 0 {
				known++
			}
		}
		if known == len(tablets) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tb := range tablets {
		if !slices.Equal(tb.Replicas, []int{1, 2, 3}) || tb.Leader < 1 || tb.Leader > 3 {
			t.Errorf("tablet as node 2 sees it: %+v, want replicas n1-n3 and a leader", tb)
		}
	}
	// cairn_catalog.tablets shows the same replicas.
	c2 := connectDB(t, servers[1], "postgres")
	var bad int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM cairn_catalog.tablets WHERE replicas <> '{1,2,3}'").Scan(&bad); err != nil || bad != 0 {
		t.Errorf("cairn_catalog.tablets on node 2: %d rows without replicas {1,2,3} (%v)", bad, err)
	}
	// Nodes, liveness and replica counts come from the membership's node
	// table and liveness records; the counts are the leaders' reports in
	// their heartbeats, so they may lag the tablets by one heartbeat.
	var nodes []NodeInfo
	for {
		getJSON(t, servers[1], "/api/nodes", &nodes)
		leaders, counted := 0, len(nodes) == 3
		for _, n := range nodes {
			leaders += n.Leaders
			counted = counted && n.Replicas == len(tablets)
		}
		if (counted && leaders == len(tablets)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(nodes) != 3 {
		t.Fatalf("nodes: %+v", nodes)
	}
	leaders := 0
	for i, n := range nodes {
		if n.NodeID != i+1 || n.RPCAddr != join[i] || n.Liveness != LivenessLive || n.Replicas != len(tablets) {
			t.Errorf("node %d as node 2 sees it: %+v", i+1, n)
		}
		leaders += n.Leaders
	}
	if leaders != len(tablets) || len(tablets) != ntablets {
		t.Errorf("%d leaders of %d tablets (node 1 has %d)", leaders, len(tablets), ntablets)
	}
	if nodes[1].Locality != "region=r2" || nodes[1].SQLAddr != servers[1].Addr().String() {
		t.Errorf("node 2 itself: %+v", nodes[1])
	}

	// A colocation tablet over the warning size is reported by its leader
	// only: one warning in the cluster, however many nodes check.
	app := connectDB(t, servers[0], "app")
	execAll(t, app, "CREATE TABLE big (id int PRIMARY KEY, pad text)",
		"INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")
	for _, s := range servers {
		s.SetColocationWarnSize(32 << 10)
	}
	// Followers apply the rows after the leader acknowledged them: wait
	// until every node has flushed them past the limit.
	var appTablet uint64
	var dbs []DatabaseInfo
	getJSON(t, servers[0], "/api/databases", &dbs)
	for _, d := range dbs {
		if d.Name == "app" && len(d.ColocationTablets) == 1 {
			appTablet = d.ColocationTablets[0]
		}
	}
	if appTablet == 0 {
		t.Fatalf("app's colocation tablet not found: %+v", dbs)
	}
	for i, s := range servers {
		for {
			if err := s.eng.Flush(); err != nil {
				t.Fatal(err)
			}
			var tb TabletInfo
			getJSON(t, s, fmt.Sprintf("/api/tablets/%d", appTablet), &tb)
			if tb.OverWarnSize {
				break
			}
			if time.Now().After(deadline.Add(30 * time.Second)) {
				t.Fatalf("node %d: tablet %+v never over the limit", i+1, tb)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for range 2 {
		for _, s := range servers {
			if err := s.checkColocationSizes(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	warning := fmt.Sprintf("colocation tablet %d of app is ", appTablet)
	total := 0
	for i := range logs {
		total += strings.Count(logs[i].String(), warning)
	}
	if total != 1 {
		t.Errorf("%d warnings %q across the cluster, want 1 (by the leader)", total, warning)
	}

	if err := servers[2].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped[2] = true
	// Its liveness record expires: suspect (dead only after --dead-after).
	for stop := time.Now().Add(30 * time.Second); ; {
		getJSON(t, servers[0], "/api/nodes", &nodes)
		// The others may turn suspect for a moment too, while the
		// tablet holding the records elects a new leader.
		if len(nodes) == 3 && nodes[2].Liveness != LivenessLive && nodes[0].Liveness == LivenessLive && nodes[1].Liveness == LivenessLive || time.Now().After(stop) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(nodes) != 3 || nodes[2].Liveness != "suspect" || nodes[1].Liveness != LivenessLive {
		t.Errorf("after stopping node 3: %+v", nodes)
	}
	_, _, body := httpGet(t, servers[0], "/")
	if strings.Count(body, `class="node-row"`) != 3 || !strings.Contains(body, `<td class="suspect">suspect</td>`) {
		t.Errorf("overview after stopping node 3:\n%s", body)
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false},
		{"1000", 1000, false},
		{"1GiB", 1 << 30, false},
		{"1gib", 1 << 30, false},
		{"512 MiB", 512 << 20, false},
		{"1.5GB", 1_500_000_000, false},
		{"64M", 64 << 20, false},
		{"2KB", 2000, false},
		{"10B", 10, false},
		{"", 0, true},
		{"GiB", 0, true},
		{"-1GiB", 0, true},
		{"lots", 0, true},
		{"1e30TiB", 0, true},
	} {
		got, err := ParseByteSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 1 << 30: "1.0 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMetricsExposition: /metrics parses as Prometheus text (with
// Prometheus' own parser), and the per-tablet families have one series per
// tablet of the store.
func TestMetricsExposition(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	pg := connectDB(t, s, "postgres")
	execAll(t, pg, "CREATE TABLE t (id int PRIMARY KEY) SPLIT INTO 3 TABLETS", "INSERT INTO t VALUES (1), (2), (3)")
	_, _, body := httpGet(t, s, "/metrics")
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	n := len(s.store.Tablets())
	for name, typ := range map[string]dto.MetricType{
		"cairn_tablet_read_batches_total":  dto.MetricType_COUNTER,
		"cairn_tablet_write_batches_total": dto.MetricType_COUNTER,
		"cairn_tablet_size_bytes":          dto.MetricType_GAUGE,
	} {
		f := fams[name]
		if f == nil || f.GetType() != typ || len(f.GetMetric()) != n {
			t.Errorf("%s: %v, want a %v per tablet (%d)", name, f, typ, n)
		}
	}
	var writes float64
	for _, m := range fams["cairn_tablet_write_batches_total"].GetMetric() {
		writes += m.GetCounter().GetValue()
	}
	if writes == 0 {
		t.Errorf("no write batches counted after an INSERT")
	}
	if r := fams["cairn_replicas"]; r == nil || r.GetMetric()[0].GetGauge().GetValue() != float64(n) {
		t.Errorf("cairn_replicas: %v, want %d", r, n)
	}
}
