package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestTwoNodeLossProcesses: a plain `cairn start` joined by a second
// node, which is then SIGKILLed (issue 13 item 4). The survivor, itself
// SIGKILLed and restarted on its store, comes back: once its only peer has
// gone unreached for --dead-after its clock check no longer counts it
// (clockmon), so it serves SQL (the rows, held by it alone at the
// replication factor's 3 with two nodes, read back and take writes) and
// HTTP, and `cairn node decommission 2` removes the dead node, after which
// it is a working cluster of one.
func TestTwoNodeLossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two processes")
	}
	bin, ms := newMembers(t, 2, "--dead-after", "5s")
	ctx := context.Background()
	connect := func(m *member) *pgx.Conn {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			c, err := pgx.Connect(ctx, "postgres://postgres@"+m.SQL+"/postgres?sslmode=disable&connect_timeout=2")
			if err == nil {
				t.Cleanup(func() { c.Close(context.Background()) })
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("connect to %s: %v", m.SQL, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	status := func() (string, error) {
		var out, errOut bytes.Buffer
		if code := run([]string{"node", "status", "--host", ms[0].HTTP}, strings.NewReader(""), &out, &errOut); code != 0 {
			return "", fmt.Errorf("cairn node status: exit %d: %s", code, errOut.String())
		}
		return out.String(), nil
	}
	// waitStatus waits until node 2's row of `cairn node status` shows
	// liveness want.
	waitStatus := func(want string) {
		t.Helper()
		row := regexp.MustCompile(`(?m)^2\s.*\s` + want + `\s+\d+\s+\d+$`)
		deadline := time.Now().Add(90 * time.Second)
		for {
			s, err := status()
			if err == nil && row.MatchString(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node 2 never %s in cairn node status: %q, %v", want, s, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	ms[0].start(t, bin, nil)
	c1 := connect(ms[0])
	if _, err := c1.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Exec(ctx, "INSERT INTO t SELECT g, 'two' FROM generate_series(1, 20) AS g"); err != nil {
		t.Fatal(err)
	}
	ms[1].start(t, bin, []string{ms[0].RPC})
	waitStatus("live")
	ms[1].kill()
	// The survivor is restarted while its peer is dead.
	c1.Close(ctx)
	ms[0].kill()
	ms[0].start(t, bin, nil)
	c1 = connect(ms[0])
	count := func() int {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var n int
		if err := c1.QueryRow(cctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 20 {
		t.Fatalf("the restarted survivor reads %d rows, want 20", n)
	}
	waitStatus("dead")
	var out, errOut bytes.Buffer
	if code := run([]string{"node", "decommission", "--host", ms[0].HTTP, "2"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("cairn node decommission 2: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	waitStatus("decommissioned")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c1.Exec(cctx, "INSERT INTO t VALUES (21, 'alone')"); err != nil {
		t.Fatalf("insert after decommissioning node 2: %v", err)
	}
	if n := count(); n != 21 {
		t.Fatalf("the survivor reads %d rows after decommissioning node 2, want 21", n)
	}
}
