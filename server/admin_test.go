package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestAdminUI: the overview page and the JSON API describe the node, its
// databases and tables, and the tablets holding them, with their load.
func TestAdminUI(t *testing.T) {
	s := start(t, Config{Insecure: true, Locality: "region=us-west"})
	defer s.Stop(context.Background())
	ctx := context.Background()
	conn := connect(t, s)
	defer conn.Close(ctx)
	for _, q := range []string{
		"CREATE DATABASE shop",
		"CREATE TABLE accounts (id int PRIMARY KEY, balance int)",
		"INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 200) g",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	get := func(path string) (int, string, string) {
		resp, err := http.Get(fmt.Sprintf("http://%s%s", s.HTTPAddr(), path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}

	code, ctype, body := get("/api/nodes")
	var nodes []NodeInfo
	if code != 200 || ctype != "application/json" || json.Unmarshal([]byte(body), &nodes) != nil {
		t.Fatalf("/api/nodes: %d %s %s", code, ctype, body)
	}
	if len(nodes) != 1 || nodes[0].Locality != "region=us-west" || nodes[0].Liveness != "live" || nodes[0].Replicas == 0 || nodes[0].SQLAddr != s.Addr().String() {
		t.Errorf("nodes: %+v", nodes)
	}

	code, _, body = get("/api/databases")
	var dbs []DatabaseInfo
	if code != 200 || json.Unmarshal([]byte(body), &dbs) != nil {
		t.Fatalf("/api/databases: %d %s", code, body)
	}
	var names []string
	var accounts *TableInfo
	for _, db := range dbs {
		names = append(names, db.Name)
		for i, tb := range db.Tables {
			if db.Name == "postgres" && tb.Name == "accounts" {
				accounts = &db.Tables[i]
			}
		}
	}
	if !slices.Contains(names, "shop") || !slices.Contains(names, "postgres") {
		t.Errorf("databases %v", names)
	}
	if accounts == nil || accounts.Schema != "public" || len(accounts.Tablets) == 0 {
		t.Fatalf("accounts: %+v", accounts)
	}

	code, _, body = get("/api/tablets")
	var tablets []TabletInfo
	if code != 200 || json.Unmarshal([]byte(body), &tablets) != nil {
		t.Fatalf("/api/tablets: %d %s", code, body)
	}
	found := false
	for _, tb := range tablets {
		if tb.TabletID == accounts.Tablets[0] {
			found = true
			if !slices.Contains(tb.Tables, "postgres.public.accounts") || tb.Leader != 1 || len(tb.Replicas) != 1 || tb.WriteBatches == 0 {
				t.Errorf("accounts' tablet: %+v", tb)
			}
		}
	}
	if !found {
		t.Errorf("tablet %d of accounts not listed", accounts.Tablets[0])
	}

	code, ctype, body = get("/")
	if code != 200 || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("/: %d %s", code, ctype)
	}
	for _, want := range []string{"<h1>Cairn cluster</h1>", "region=us-west", "public.accounts", "<h3>shop</h3>", "/api/tablets"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview page lacks %q", want)
		}
	}
	if code, _, _ := get("/no/such/page"); code != 404 {
		t.Errorf("unknown page: %d", code)
	}
}
