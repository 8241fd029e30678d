package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/workload/githubevents"
	"github.com/jackc/pgx/v5"
)

// TestWorkloadGitHubEvents runs `cairn workload github-events init`
// against an in-memory node: the table has the rows asked for, the
// seed's query finds the ones githubevents.SeedMatches counts, and bad
// flags are usage errors that load nothing.
func TestWorkloadGitHubEvents(t *testing.T) {
	ctx := context.Background()
	url := startWorkloadNode(t)
	var out, errOut bytes.Buffer
	if err := cmdWorkload([]string{"github-events", "init", "--rows", "1200", "--batch", "500", url}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "loaded 1200 of 1200 rows into github_events") {
		t.Errorf("progress lines:\n%s", out.String())
	}
	// Flags may follow the URL; --drop replaces the table.
	if err := cmdWorkload([]string{"init", "github-events", url, "--rows", "1500", "--drop", "--table", "ev"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	for _, bad := range [][]string{
		{"github-events", "run", url},
		{"github-events", "init", "--rows", "-1", url},
		{"github-events", "init", "--nope", url},
	} {
		if err := cmdWorkload(bad, &out, &errOut); err == nil {
			t.Errorf("workload %v: no error", bad)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	all, _ := githubevents.SeedMatches(1500)
	for table, want := range map[string][2]int64{"github_events": {1200, 0}, "ev": {1500, all}} {
		var n, seed int64
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE event_type = 'PushEvent' AND payload @> '%s') FROM %s",
			githubevents.SeedContains, table)).Scan(&n, &seed); err != nil {
			t.Fatal(err)
		}
		if n != want[0] || (want[1] != 0 && seed != want[1]) {
			t.Errorf("%s: %d rows, %d by %s; want %d, %d", table, n, seed, githubevents.SeedEmail, want[0], want[1])
		}
	}
}

// TestWorkloadKV runs `cairn workload init kv` and `run kv` (docs/sql.md,
// "Hash-sharded indexes") against an in-memory node: init makes the kv
// table as asked (hash-sharded, with the index on v), run writes and
// reads it with the URL before or after the flags and prints the
// summary, and bad command lines are usage errors.
func TestWorkloadKV(t *testing.T) {
	ctx := context.Background()
	url := startWorkloadNode(t)
	var out, errOut bytes.Buffer
	if err := cmdWorkload([]string{"init", "kv", "--hash-sharded", "--buckets", "4", "--secondary-index", "--drop", url}, &out, &errOut); err != nil {
		t.Fatalf("init: %v\n%s", err, errOut.String())
	}
	out.Reset()
	if err := cmdWorkload([]string{"run", "kv", url, "--duration", "1s", "--concurrency", "2", "--read-percent", "50", "--sequential"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "_elapsed___errors_____ops(total)") {
		t.Errorf("run printed no summary:\n%s", out.String())
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, buckets, vIndexes int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM kv").Scan(&rows); err != nil || rows == 0 {
		t.Errorf("kv after a write run: %d rows, %v", rows, err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'kv' AND column_name LIKE 'crdb_internal_%_shard_4'").Scan(&buckets); err != nil || buckets != 1 {
		t.Errorf("kv's shard column for 4 buckets: %d, %v", buckets, err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE tablename = 'kv' AND indexdef LIKE '%(v)%'").Scan(&vIndexes); err != nil || vIndexes != 1 {
		t.Errorf("kv's index on v: %d, %v", vIndexes, err)
	}
	for _, bad := range [][]string{
		{"init", "nope", url},
		{"run", "kv", url, "another-url"},
		{"run", "kv", "--duration", "-1s", url},
		{"init", "kv", "--sequential", url},
	} {
		if err := cmdWorkload(bad, &out, &errOut); err == nil {
			t.Errorf("workload %v: no error", bad)
		} else if _, ok := err.(usageError); !ok {
			t.Errorf("workload %v: %v, want a usage error", bad, err)
		}
	}
}

// startWorkloadNode starts an in-memory node for a workload command to
// run against, stopped when the test ends, and returns its URL.
func startWorkloadNode(t *testing.T) string {
	t.Helper()
	s, err := server.Start(context.Background(), server.Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
}
