package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/sql/rowenc"
)

// TestTabletsView: cairn_catalog.tablets, read over pgwire, agrees with
// the store's tablet directory: every tablet appears, the tables of a
// colocated database share its one tablet while an opted-out table has
// the tablets it was split into, and each row's span, replicas and leader
// are the tablet's.
func TestTabletsView(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	conn := connect(t, s)
	defer conn.Close(ctx)
	for _, q := range []string{
		"CREATE DATABASE shop WITH colocated = true",
		"CREATE TABLE plain (id int PRIMARY KEY)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	shop, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/shop?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer shop.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE products (id int PRIMARY KEY, category text)",
		"CREATE INDEX products_category_idx ON products (category)",
		"CREATE TABLE orders (id int PRIMARY KEY, product int)",
		"CREATE TABLE events (id int PRIMARY KEY) WITH (colocated = false) SPLIT INTO 3 TABLETS",
		"INSERT INTO products SELECT g, 'c' || g % 5 FROM generate_series(1, 100) g",
	} {
		if _, err := shop.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	type row struct {
		db, table, index *string
		tablet           int64
		start, end       string
		replicas         []int32
		leader           *int32
		colocated        bool
	}
	rows, err := shop.Query(ctx, `SELECT database_name, table_name, index_name, tablet_id, start_key, end_key,
		replicas, leader, colocated FROM cairn_catalog.tablets`)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.db, &r.table, &r.index, &r.tablet, &r.start, &r.end, &r.replicas, &r.leader, &r.colocated); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	descs := s.store.Tablets()
	byID := map[int64]int{}
	for i, d := range descs {
		byID[int64(d.TabletID)] = i
	}
	seen := map[int64]bool{}
	tabletsOf := map[string]map[int64]bool{}
	for _, r := range got {
		i, ok := byID[r.tablet]
		if !ok {
			t.Fatalf("row %+v names tablet %d, which the store does not have", r, r.tablet)
		}
		d := descs[i]
		if r.start != rowenc.PrettyKey(d.StartKey) || r.end != rowenc.PrettyKey(d.EndKey) {
			t.Errorf("tablet %d: span %s - %s, want %s - %s", r.tablet, r.start, r.end,
				rowenc.PrettyKey(d.StartKey), rowenc.PrettyKey(d.EndKey))
		}
		if len(r.replicas) != 1 || r.replicas[0] != localNodeID || r.leader == nil || *r.leader != localNodeID {
			t.Errorf("tablet %d: replicas %v leader %v, want this node", r.tablet, r.replicas, r.leader)
		}
		seen[r.tablet] = true
		if r.db != nil && r.table != nil {
			name := *r.db + "." + *r.table
			if r.index != nil {
				name += "@" + *r.index
			}
			if tabletsOf[name] == nil {
				tabletsOf[name] = map[int64]bool{}
			}
			tabletsOf[name][r.tablet] = true
		}
	}
	if len(seen) != len(descs) {
		t.Errorf("the view shows %d tablets, the store has %d", len(seen), len(descs))
	}
	one := func(name string) int64 {
		ts := tabletsOf[name]
		if len(ts) != 1 {
			t.Fatalf("%s is in tablets %v, want exactly one", name, ts)
		}
		for id := range ts {
			return id
		}
		return 0
	}
	shared := one("shop.products")
	for _, name := range []string{"shop.products@products_category_idx", "shop.orders"} {
		if id := one(name); id != shared {
			t.Errorf("%s is in tablet %d, products in %d: a colocated database has one tablet", name, id, shared)
		}
	}
	if id := one("postgres.plain"); id == shared {
		t.Errorf("postgres.plain shares shop's colocation tablet %d", id)
	}
	if ev := tabletsOf["shop.events"]; len(ev) != 3 || ev[shared] {
		t.Errorf("opted-out events is in tablets %v, want 3 of its own", ev)
	}
}
