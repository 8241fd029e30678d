package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/test/proc"
)

// TestClockBehindAfterRestart runs a node whose clock is 10 s fast (the
// fault-injection offset), writes a row, SIGKILLs it and restarts it with
// the clock right: its physical clock is now 10 s behind the row's
// timestamp. Without the persisted upper bound (server/clockbound.go) the
// restarted node read at its physical clock and did not see the
// acknowledged row (a stale read: count 0, then a duplicate-key error on
// inserting it again). With it the node waits until its clock is within
// the maximum offset of the bound, starts above it, and sees the row.
func TestClockBehindAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a process")
	}
	dir := t.TempDir()
	bin := buildCairn(t)
	n := newProcNode(t, filepath.Join(dir, "n1"))
	if err := n.Start(bin, nil, "--debug-fault-injection"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := n.Connect(ctx, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	const skew = 10 * time.Second
	resp, err := http.Post("http://"+n.HTTP+"/debug/faults/clock-offset?d="+skew.String(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("clock offset: %s", resp.Status)
	}
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES (1, 1)"); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	n.Kill()
	if err := n.Start(bin, nil, "--debug-fault-injection"); err != nil {
		t.Fatal(err)
	}
	c, err = n.Connect(ctx, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The first read after the restart, whatever the restart took.
	var cnt int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&cnt); err != nil {
		t.Fatal(err)
	}
	served := time.Since(written)
	if cnt != 1 {
		t.Fatalf("the acknowledged row is not visible after the restart (count %d, served %v after the write, the clock was %v behind)", cnt, served, skew)
	}
	if log := n.LogTail(1 << 20); !strings.Contains(log, "waiting until it catches up") {
		t.Errorf("the restarted node did not log its wait for the clock (served %v after the write)", served)
	}
	t.Logf("restarted node served %v after the write", served)
}

// newProcNode returns a process node on dir that is killed when the test
// ends, its log's tail printed if the test failed.
func newProcNode(t *testing.T, dir string) *proc.Node {
	t.Helper()
	n, err := proc.NewNode(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("node log:\n%s", n.LogTail(6000))
		}
	})
	return n
}
