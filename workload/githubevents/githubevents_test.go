package githubevents

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/server"
	"github.com/jackc/pgx/v5"
)

// TestEventShape: rows are a function of their index, shaped like the
// archive's (JSON objects where the seed has jsonb, PushEvents with a
// commits array of authors), and the seed's rows are where invariant 3
// says.
func TestEventShape(t *testing.T) {
	types := map[string]int{}
	for i := range int64(2000) {
		r := Event(i)
		if r != Event(i) {
			t.Fatalf("event %d differs between calls", i)
		}
		if r.EventID != i {
			t.Fatalf("event %d has id %d", i, r.EventID)
		}
		types[r.EventType]++
		for name, j := range map[string]string{"payload": r.Payload, "repo": r.Repo, "actor": r.Actor, "org": r.Org} {
			if j == "" && name == "org" {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(j), &v); err != nil {
				t.Fatalf("event %d: %s is not a JSON object: %v: %s", i, name, err, j)
			}
		}
		var repo struct{ ID int64 }
		_ = json.Unmarshal([]byte(r.Repo), &repo)
		if repo.ID != r.RepoID {
			t.Fatalf("event %d: repo_id %d, repo object's id %d", i, r.RepoID, repo.ID)
		}
		if (r.RepoID == SeedRepoID) != (i%SeedRepoEvery == 0) {
			t.Fatalf("event %d in repo %d", i, r.RepoID)
		}
		seedCommit := strings.Contains(r.Payload, `"email":"`+SeedEmail+`"`)
		if seedCommit != (i%SeedEmailEvery == 0) {
			t.Fatalf("event %d (%s): commit by %s: %t", i, r.EventType, SeedEmail, seedCommit)
		}
		if r.EventType == "PushEvent" {
			var p struct {
				Size    int
				Commits []struct {
					Sha    string
					Author struct{ Email, Name string }
				}
			}
			if err := json.Unmarshal([]byte(r.Payload), &p); err != nil {
				t.Fatal(err)
			}
			if len(p.Commits) == 0 || p.Size != len(p.Commits) || p.Commits[0].Author.Email == "" || p.Commits[0].Sha == "" {
				t.Fatalf("event %d: PushEvent payload %s", i, r.Payload)
			}
		}
	}
	if types["PushEvent"] < 800 || len(types) < 6 {
		t.Errorf("event types %v: want about half PushEvents and most kinds", types)
	}
	if a, o := SeedMatches(2000); a != 20 || o != 2 {
		t.Errorf("SeedMatches(2000) = %d, %d", a, o)
	}
}

// TestWriteCSV: the CSV reads back (as encoding/csv reads it) into the
// rows' values, a NULL org as an empty field.
func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, 10, 60); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 50 {
		t.Fatalf("%d records", len(recs))
	}
	for k, rec := range recs {
		r := Event(int64(10 + k))
		want := []string{fmt.Sprint(r.EventID), r.EventType, "true", fmt.Sprint(r.RepoID), r.Payload, r.Repo, r.Actor, r.Org,
			r.CreatedAt.Format("2006-01-02 15:04:05")}
		if strings.Join(rec, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("record %d:\n got %q\nwant %q", k, rec, want)
		}
	}
}

// TestInit loads rows into a node, as a regular and as a distributed
// table, and runs the seed's queries: they find the rows invariant 3
// puts there.
func TestInit(t *testing.T) {
	ctx := context.Background()
	s, err := server.Start(ctx, server.Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop(context.Background()) }()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const rows = 3500
	allRepos, oneRepo := SeedMatches(rows)
	for _, cfg := range []Config{
		{Rows: rows, Batch: 1000},
		{Table: "dist_events", Rows: rows, Batch: 1000, Distributed: true, Shards: 4},
	} {
		var out bytes.Buffer
		cfg.Out = &out
		if err := Init(ctx, conn, cfg); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), fmt.Sprintf("loaded %d of %d rows", rows, rows)) {
			t.Errorf("progress: %s", out.String())
		}
		table := cfg.Table
		if table == "" {
			table = "github_events"
		}
		var n, all, one, nullOrgs int64
		q := fmt.Sprintf(`SELECT count(*),
  count(*) FILTER (WHERE event_type = 'PushEvent' AND payload @> '%s'),
  count(*) FILTER (WHERE event_type = 'PushEvent' AND payload @> '%s' AND repo_id = %d),
  count(*) FILTER (WHERE org IS NULL) FROM %s`, SeedContains, SeedContains, SeedRepoID, table)
		if err := conn.QueryRow(ctx, q).Scan(&n, &all, &one, &nullOrgs); err != nil {
			t.Fatal(err)
		}
		if n != rows || all != allRepos || one != oneRepo || nullOrgs == 0 || nullOrgs == rows {
			t.Errorf("%s: %d rows, %d and %d seed matches, %d without org; want %d, %d, %d", table, n, all, one, nullOrgs, rows, allRepos, oneRepo)
		}
		var email string
		if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT jsonb_array_elements(payload->'commits')->'author'->>'email' FROM %s
  WHERE event_type = 'PushEvent' AND payload @> '%s' AND repo_id = %d LIMIT 1`, table, SeedContains, SeedRepoID)).Scan(&email); err != nil || email != SeedEmail {
			t.Errorf("%s: seed query's first commit author %q, %v", table, email, err)
		}
	}
	var method string
	if err := conn.QueryRow(ctx, "SELECT citus_table_type FROM citus_tables WHERE table_name = 'dist_events'::regclass").Scan(&method); err != nil || method != "distributed" {
		t.Errorf("dist_events in citus_tables: %q, %v", method, err)
	}
	// Drop replaces the table; without it an existing table is an error.
	if err := Init(ctx, conn, Config{Rows: 10}); err == nil || !strings.Contains(err.Error(), "42P07") {
		t.Errorf("init over an existing table: %v, want 42P07", err)
	}
	if err := Init(ctx, conn, Config{Rows: 10, Drop: true}); err != nil {
		t.Fatal(err)
	}
}
