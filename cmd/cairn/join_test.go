package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestJoinProcesses runs a plain `cairn start` (no --join: a cluster of
// one, as `--join A --rpc-addr A`), writes rows, and starts two `cairn
// start --join A` processes joining it; `cairn node status` then shows
// three live nodes holding the same number of replicas (replication
// factor 3), the rows written before the others joined read back through
// every node, SQL written through one joined node reads back through the
// others, after SIGKILL of the first node the two joined ones still serve
// reads and writes, and the first node restarted plainly rejoins and
// reads everything.
func TestJoinProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three processes")
	}
	bin, ms := newMembers(t, 3)
	ms[0].start(t, bin, nil)
	ctx := context.Background()
	connect := func(m *member) *pgx.Conn {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
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
	c1 := connect(ms[0])
	if _, err := c1.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Exec(ctx, "INSERT INTO t SELECT g, 'alone' FROM generate_series(1, 40) AS g"); err != nil {
		t.Fatal(err)
	}
	ms[1].start(t, bin, []string{ms[0].RPC})
	ms[2].start(t, bin, []string{ms[0].RPC})
	// id, addresses, (empty) locality, liveness, replicas, leaders.
	row := regexp.MustCompile(`(?m)^(\d+)\s.*\s(\S+)\s+(\d+)\s+(\d+)$`)
	var status string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var out, errOut bytes.Buffer
		run([]string{"node", "status", "--host", ms[1].HTTP}, strings.NewReader(""), &out, &errOut)
		status = out.String()
		rows := row.FindAllStringSubmatch(status, -1)
		replicas := map[string]bool{}
		live := 0
		for _, r := range rows {
			if r[2] == "live" {
				live++
			}
			if n, _ := strconv.Atoi(r[3]); n > 0 {
				replicas[r[3]] = true
			}
		}
		if len(rows) == 3 && live == 3 && len(replicas) == 1 {
			// Three live nodes with the same, nonzero replica count.
			ok := true
			for _, r := range rows {
				if r[3] == "0" {
					ok = false
				}
			}
			if ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cairn node status never showed three live nodes with equal replicas:\n%s%s", status, errOut.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("cairn node status:\n%s", status)
	// Equal replica counts include learners: a tablet whose third replica
	// is still a learner has two voters, and killing node 1 would leave it
	// without a quorum. Wait until every tablet has three voters.
	waitFullyReplicated(t, ms[1].HTTP, 3, 60*time.Second)
	c3 := connect(ms[2])
	c2 := connect(ms[1])
	count := func(c *pgx.Conn) int {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var n int
		if err := c.QueryRow(cctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, c := range []*pgx.Conn{c1, c2, c3} {
		if n := count(c); n != 40 {
			t.Fatalf("node %d sees %d of the rows written before the others joined, want 40", i+1, n)
		}
	}
	if _, err := c3.Exec(ctx, "INSERT INTO t SELECT g, 'x' FROM generate_series(41, 50) AS g"); err != nil {
		t.Fatal(err)
	}
	if n := count(c2); n != 50 {
		t.Fatalf("node 2 sees %d rows, want 50", n)
	}
	ms[0].kill()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c2.Exec(cctx, "INSERT INTO t VALUES (51, 'without node 1')"); err != nil {
		t.Fatalf("insert without node 1: %v", err)
	}
	if n := count(c3); n != 51 {
		t.Fatalf("node 3 sees %d rows without node 1, want 51", n)
	}
	// The first node restarts as it started, plainly.
	ms[0].start(t, bin, nil)
	if n := count(connect(ms[0])); n != 51 {
		t.Fatalf("node 1, restarted plainly, sees %d rows, want 51", n)
	}
}

// waitFullyReplicated polls the admin API at httpAddr until every tablet
// has want voters and no learners.
func waitFullyReplicated(t *testing.T, httpAddr string, want int, timeout time.Duration) {
	t.Helper()
	var last string
	deadline := time.Now().Add(timeout)
	for {
		var tablets []struct {
			ID       uint64 `json:"tablet_id"`
			Replicas []int  `json:"replicas"`
			Learners []int  `json:"learners"`
		}
		resp, err := http.Get("http://" + httpAddr + "/api/tablets")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&tablets)
			resp.Body.Close()
		}
		if err == nil {
			ok := len(tablets) > 0
			last = ""
			for _, tb := range tablets {
				if len(tb.Replicas) != want || len(tb.Learners) != 0 {
					ok = false
					last += fmt.Sprintf("tablet %d: voters %v, learners %v; ", tb.ID, tb.Replicas, tb.Learners)
				}
			}
			if ok {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("tablets never had %d voters and no learners: %s", want, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
