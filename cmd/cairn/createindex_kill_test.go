package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/test/proc"
)

// TestCreateIndexKilledCoordinator SIGKILLs a `cairn start` process while
// its CREATE INDEX job is running (issue #18), restarts it on its store,
// and checks that the restarted node takes the orphaned job over and
// finishes the build: the job succeeds, the index is in pg_indexes and
// serves queries, rows written afterwards included, and every row is
// there.
func TestCreateIndexKilledCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a process")
	}
	dir := t.TempDir()
	bin, err := proc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := newProcNode(t, filepath.Join(dir, "n1"))
	if err := n.Start(bin, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := n.Connect(ctx, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 100_000
	for _, s := range []string{
		"CREATE TABLE t (k INT PRIMARY KEY, v INT, pad TEXT)",
		fmt.Sprintf("INSERT INTO t SELECT g, g %% 1000, repeat('x', 40) FROM generate_series(1, %d) g", rows),
	} {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	builder, err := n.Connect(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	buildErr := make(chan error, 1)
	go func() {
		_, err := builder.Exec(ctx, "CREATE INDEX t_v ON t (v)")
		buildErr <- err
	}()
	// Kill the node once the backfill is under way.
	var phase string
	start := time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; {
		err := c.QueryRow(ctx, "SELECT phase FROM pg_stat_progress_create_index").Scan(&phase)
		if err == nil && phase == "building index: scanning table" {
			break
		}
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		select {
		case err := <-buildErr:
			t.Fatalf("the build ended before it was seen running: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no running build seen")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := n.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.Kill() // reap it
	if err := <-buildErr; err == nil {
		t.Fatal("CREATE INDEX succeeded on a killed node")
	}
	t.Logf("killed in phase %q, %v after the build started", phase, time.Since(start))
	if err := n.Start(bin, nil); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	c, err = n.Connect(ctx, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The orphan check takes the job over once its heartbeat is older
	// than jobs.OrphanAfter (15 s) and finishes the build.
	var status, jerr string
	for deadline := time.Now().Add(120 * time.Second); ; {
		if err := c.QueryRow(ctx, "SELECT status, coalesce(error, '') FROM cairn_catalog.jobs WHERE job_type = 'CREATE INDEX'").Scan(&status, &jerr); err != nil {
			t.Fatal(err)
		}
		if status != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if status != "succeeded" {
		t.Fatalf("job after the restart: %s %q", status, jerr)
	}
	t.Logf("resumed and finished %v after the restart", time.Since(restarted))
	var idx int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE tablename = 't' AND indexname = 't_v'").Scan(&idx); err != nil || idx != 1 {
		t.Fatalf("t_v after the resumed build: %d %v", idx, err)
	}
	var cnt int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&cnt); err != nil || cnt != rows {
		t.Fatalf("rows after the restart: %d %v", cnt, err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES (0, 7, 'new')"); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 7").Scan(&got); err != nil || got != rows/1000+1 {
		t.Fatalf("rows with v = 7 through the resumed index: %d %v", got, err)
	}
	var plan string
	if err := c.QueryRow(ctx, "EXPLAIN SELECT v FROM t WHERE v = 7").Scan(&plan); err != nil || !strings.Contains(plan, "t_v") {
		t.Fatalf("the planner does not read t_v: %q %v", plan, err)
	}
}
