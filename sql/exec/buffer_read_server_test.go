package exec_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestPgbenchSelectReadsTheBuffer: in a block, an UPDATE of some columns
// of a small row rewrites the row whole (rowenc.RowWriter.WholeRow), so the
// SELECT of the row that follows (pgbench's `SELECT abalance` after its
// UPDATE) is answered from the transaction's write buffer: it sends no
// tablet batch (one before). A row over rowenc.WholeRowMax, an UPDATE
// rolled back to a savepoint, and an UPDATE not of one row by its primary
// key alone (which writes column entries) still read KV. Every read returns what
// the block wrote, and the committed rows are the updated ones.
func TestPgbenchSelectReadsTheBuffer(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t, t.TempDir())
	defer func() { _ = srv.Stop(ctx) }()
	c := connect(t, url)
	exec(t, c, "CREATE TABLE acct (aid int PRIMARY KEY, bid int, abalance int, filler text)")
	exec(t, c, "INSERT INTO acct SELECT g, 1, 0, repeat('f', 84) FROM generate_series(1, 10) g")
	exec(t, c, "UPDATE acct SET filler = repeat('x', 600) WHERE aid = 9")
	const writes, reads = "cairn_tablet_write_batches_total", "cairn_tablet_read_batches_total"
	sent := func(f func()) int {
		before := nodeCounters(t, srv.HTTPAddr().String(), writes, reads)
		f()
		after := nodeCounters(t, srv.HTTPAddr().String(), writes, reads)
		return after[writes] + after[reads] - before[writes] - before[reads]
	}
	for _, tc := range []struct {
		name      string
		update    string // "": by the primary key alone
		aid       int
		savepoint bool
		want      int // batches the SELECT sends
		bal       int // the SELECT's abalance
	}{
		{"small row", "", 3, false, 0, 5},
		{"small row again", "", 3, false, 0, 10},
		{"row over WholeRowMax", "", 9, false, 1, 5},
		{"rolled back to a savepoint", "", 4, true, 1, 0},
		{"not a one-row UPDATE", "UPDATE acct SET abalance = abalance + 5 WHERE aid = $1 AND bid = 1", 5, false, 1, 5},
	} {
		exec(t, c, "BEGIN")
		if tc.savepoint {
			exec(t, c, "SAVEPOINT s")
		}
		update := tc.update
		if update == "" {
			update = "UPDATE acct SET abalance = abalance + 5 WHERE aid = $1"
		}
		if _, err := c.Exec(ctx, update, tc.aid); err != nil {
			t.Fatal(err)
		}
		if tc.savepoint {
			exec(t, c, "ROLLBACK TO SAVEPOINT s")
		}
		var bal, bid int
		var filler string
		n := sent(func() {
			if err := c.QueryRow(ctx, "SELECT abalance, bid, filler FROM acct WHERE aid = $1", tc.aid).Scan(&bal, &bid, &filler); err != nil {
				t.Fatal(err)
			}
		})
		if n != tc.want {
			t.Errorf("%s: the SELECT sent %d tablet batches, want %d", tc.name, n, tc.want)
		}
		wantFiller := strings.Repeat("f", 84)
		if tc.aid == 9 {
			wantFiller = strings.Repeat("x", 600)
		}
		if bal != tc.bal || bid != 1 || filler != wantFiller {
			t.Errorf("%s: read abalance %d, bid %d, filler of %d bytes; want %d, 1, %d bytes", tc.name, bal, bid, len(filler), tc.bal, len(wantFiller))
		}
		exec(t, c, "COMMIT")
	}
	rows, err := c.Query(ctx, "SELECT aid, abalance, bid FROM acct WHERE abalance <> 0 OR bid <> 1 ORDER BY aid")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var aid, bal, bid int
		if err := rows.Scan(&aid, &bal, &bid); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d/%d/%d", aid, bal, bid))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "3/10/1 5/5/1 9/5/1"; strings.Join(got, " ") != want {
		t.Fatalf("committed rows %q, want %q", strings.Join(got, " "), want)
	}
}
