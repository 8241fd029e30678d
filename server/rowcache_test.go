package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
)

// rowCacheHits scrapes the node's cairn_row_cache_hits_total.
func rowCacheHits(t *testing.T, s *Server) float64 {
	t.Helper()
	return rowCacheMetric(t, s, "cairn_row_cache_hits_total")
}

// rowCacheMetric scrapes one of the node's row cache metrics, which
// carry no labels.
func rowCacheMetric(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	_, _, body := httpGet(t, s, "/metrics")
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	f := fams[name]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("%s: %v", name, f)
	}
	if m := f.GetMetric()[0]; m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// TestRowCacheThroughSQL: on a plain node (a replicated cluster of one),
// repeated prepared point SELECTs are answered from the row cache, and
// every change of the row (an UPDATE, an UPDATE in a transaction seen
// only once committed, a DELETE, an INSERT of it again) is what the next
// SELECT returns.
func TestRowCacheThroughSQL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}})
	defer s.Stop(context.Background())
	ctx := context.Background()
	a, b := connectDB(t, s, "postgres"), connectDB(t, s, "postgres")
	execAll(t, a, "CREATE TABLE acct (id int PRIMARY KEY, bal int, note text)", "INSERT INTO acct VALUES (1, 100, 'one'), (2, 200, 'two')")
	read := func(id int) (int, bool) {
		t.Helper()
		var bal int
		err := a.QueryRow(ctx, "SELECT bal FROM acct WHERE id = $1", id).Scan(&bal)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return bal, true
	}
	before := rowCacheHits(t, s)
	for range 5 {
		if bal, ok := read(1); !ok || bal != 100 {
			t.Fatalf("bal = %d (found %v), want 100", bal, ok)
		}
	}
	if after := rowCacheHits(t, s); after <= before {
		t.Fatalf("five reads of an unwritten row: row cache hits %v → %v, want some", before, after)
	}
	if b := rowCacheMetric(t, s, "cairn_row_cache_bytes"); b <= 0 {
		t.Fatalf("cairn_row_cache_bytes = %v with a row cached", b)
	}
	step := func(what string, sql string, want int, found bool) {
		t.Helper()
		if sql != "" {
			execAll(t, b, sql)
		}
		for range 3 {
			if bal, ok := read(1); ok != found || bal != want {
				t.Fatalf("after %s: bal = %d (found %v), want %d (found %v)", what, bal, ok, want, found)
			}
		}
	}
	step("an UPDATE", "UPDATE acct SET bal = bal + 1 WHERE id = 1", 101, true)
	tx, err := b.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE acct SET bal = 500 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if bal, ok := read(2); !ok || bal != 200 {
		t.Fatalf("row 2: bal = %d (found %v), want 200", bal, ok)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	step("a committed transaction's UPDATE", "", 500, true)
	step("a DELETE", "DELETE FROM acct WHERE id = 1", 0, false)
	step("an INSERT", "INSERT INTO acct VALUES (1, 7, 'again')", 7, true)
	step("an UPDATE of another column", "UPDATE acct SET note = 'x' WHERE id = 1", 7, true)
	var note string
	if err := a.QueryRow(ctx, "SELECT note FROM acct WHERE id = $1", 1).Scan(&note); err != nil || note != "x" {
		t.Fatalf("note = %q, %v; want x", note, err)
	}
}
