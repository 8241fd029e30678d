package exec_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// nodeCounters sums the node's /metrics lines whose names are in names.
func nodeCounters(t *testing.T, httpAddr string, names ...string) map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(string(body), "\n") {
		for _, n := range names {
			if l == "" || l[0] == '#' || !(strings.HasPrefix(l, n+"{") || strings.HasPrefix(l, n+" ")) {
				continue
			}
			v, err := strconv.Atoi(l[strings.LastIndexByte(l, ' ')+1:])
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			out[n] += v
		}
	}
	return out
}

// TestPgbenchBlockCommitsInOneBatch: on a plain node (one tablet holds the
// catalog and the tables), the COMMIT of a pgbench-shaped block (an UPDATE
// by primary key, a SELECT of the row, an INSERT into a table without a
// primary key, each a statement of its own, so READ COMMITTED moved the
// snapshot between them) sends one tablet batch, a one-phase commit that
// carries the check of the UPDATE's key and the validation of both tables'
// descriptors (kv.Txn.tryOnePhase); it sent two more, side by side,
// before. The block's effects are all there.
func TestPgbenchBlockCommitsInOneBatch(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t, t.TempDir())
	defer func() { _ = srv.Stop(ctx) }()
	c := connect(t, url)
	exec(t, c, "CREATE TABLE acct (id int PRIMARY KEY, bal int)")
	exec(t, c, "CREATE TABLE hist (id int, delta int)")
	exec(t, c, "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 10) g")
	const batches, onePC = "cairn_tablet_write_batches_total", "cairn_tablet_one_phase_commits_total"
	const reads = "cairn_tablet_read_batches_total"
	for i := 1; i <= 3; i++ {
		exec(t, c, "BEGIN")
		exec(t, c, "UPDATE acct SET bal = bal + 5 WHERE id = 3")
		var bal int
		if err := c.QueryRow(ctx, "SELECT bal FROM acct WHERE id = 3").Scan(&bal); err != nil {
			t.Fatal(err)
		}
		if bal != 5*i {
			t.Fatalf("round %d: bal = %d inside the block, want %d", i, bal, 5*i)
		}
		exec(t, c, "INSERT INTO hist (id, delta) VALUES (3, 5)")
		before := nodeCounters(t, srv.HTTPAddr().String(), batches, reads, onePC)
		exec(t, c, "COMMIT")
		after := nodeCounters(t, srv.HTTPAddr().String(), batches, reads, onePC)
		sent := after[batches] + after[reads] - before[batches] - before[reads]
		if sent != 1 || after[onePC]-before[onePC] != 1 {
			t.Fatalf("round %d: the COMMIT sent %d tablet batches (%d one-phase commits), want one one-phase batch",
				i, sent, after[onePC]-before[onePC])
		}
	}
	var bal, n int
	if err := c.QueryRow(ctx, "SELECT (SELECT bal FROM acct WHERE id = 3), (SELECT count(*) FROM hist)").Scan(&bal, &n); err != nil {
		t.Fatal(err)
	}
	if bal != 15 || n != 3 {
		t.Fatalf("after three blocks: bal = %d, %d history rows; want 15, 3", bal, n)
	}
}
