package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/jackc/pgx/v5/pgconn"
)

// Follower reads for AS OF SYSTEM TIME (docs/architecture.md, "AS OF
// SYSTEM TIME"): every tablet's leaseholder closes it trailing the clock, and a
// node reads at a timestamp its own replica has closed without a KV batch
// to another node. The cluster is the --global one, leases in us-west
// (node 1); eu (node 3) reads.

// TestFollowerReadAsOfSystemTime: on eu, a SELECT of an ordinary table
// AS OF SYSTEM TIME follower_read_timestamp(), or at a fixed timestamp
// its replicas closed, sends no KV batch for the table's tablets to
// another node, counts reads served by its followers, and answers what
// was committed at that timestamp: each of a sequence of updates,
// acknowledged from us-west and us-east before the timestamp read at was
// taken (and the next one started after), is exactly what the read at
// that timestamp sees. The same SELECT without the clause goes to the
// leaseholder.
func TestFollowerReadAsOfSystemTime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-region cluster")
	}
	ctx := context.Background()
	c, conns := startGlobal(t, ctx)
	mustExec(t, ctx, conns[0], `CREATE TABLE fr (k int PRIMARY KEY, v text)`)
	// A zone of its own gives the table tablets of its own, apart from
	// the catalog's, which every statement's planning reads at the
	// present (the count below is of the table's tablets).
	mustExec(t, ctx, conns[0], `ALTER TABLE fr CONFIGURE ZONE USING gc.ttlseconds = 3600`)
	mustExec(t, ctx, conns[0], `INSERT INTO fr SELECT i, 'v' || i FROM generate_series(1, 100) AS i`)
	ids := tabletsOf(t, ctx, conns[0], "fr")
	waitLeasesIn(t, c, 0, ids)
	const reader = 2 // eu

	// Updates from two regions, each acknowledged before its timestamp is
	// taken; the next starts after.
	type step struct {
		at int64
		v  string
	}
	var steps []step
	for i := range 4 {
		v := fmt.Sprintf("u%d", i)
		mustExec(t, ctx, conns[i%2], `UPDATE fr SET v = '`+v+`' WHERE k = 7`)
		steps = append(steps, step{at: time.Now().UnixNano(), v: v})
	}
	last := steps[len(steps)-1].at
	// follower_read_timestamp() is 4.2 s behind the clock: wait until the
	// eu replicas have closed 4.2 s past the last update, so that it
	// covers them all and the replicas serve it.
	waitTrailing(t, c, reader, ids, last+int64(4200*time.Millisecond))

	before, served := remoteBatches(c, reader, ids), followerReads(c, reader, ids)
	for _, q := range []struct{ sql, want string }{
		{`SELECT v FROM fr AS OF SYSTEM TIME follower_read_timestamp() WHERE k = 7`, steps[len(steps)-1].v},
		{`SELECT count(*), max(v) FROM fr AS OF SYSTEM TIME follower_read_timestamp()`, "100 v99"},
		{`SELECT v FROM fr AS OF SYSTEM TIME with_max_staleness('1m') WHERE k = 7`, steps[len(steps)-1].v},
	} {
		if got := query1(t, ctx, conns[reader], q.sql); got != q.want {
			t.Fatalf("%s: %q, want %q", q.sql, got, q.want)
		}
	}
	for _, s := range steps {
		q := fmt.Sprintf(`SELECT v FROM fr AS OF SYSTEM TIME '%d' WHERE k = 7`, s.at)
		if got := query1(t, ctx, conns[reader], q); got != s.v {
			t.Fatalf("%s: %q, want %q (acknowledged before the timestamp, the next update started after it)", q, got, s.v)
		}
	}
	if n := remoteBatches(c, reader, ids) - before; n != 0 {
		t.Fatalf("AS OF SYSTEM TIME SELECTs on eu sent %d KV batches for the table's tablets to another node, want 0", n)
	}
	if n := followerReads(c, reader, ids) - served; n == 0 {
		t.Fatal("no read was served by eu's followers")
	}
	for _, id := range ids {
		if c.Nodes[reader].Replica(id).HoldsLease() {
			t.Fatalf("eu took tablet %d's lease during the reads: they may have been the leaseholder's", id)
		}
	}

	// At the present, the read is the leaseholder's: the count sees it.
	before = remoteBatches(c, reader, ids)
	if got := query1(t, ctx, conns[reader], `SELECT v FROM fr WHERE k = 7`); got != steps[len(steps)-1].v {
		t.Fatalf("present read: %q", got)
	}
	if n := remoteBatches(c, reader, ids) - before; n == 0 {
		t.Fatal("a present-time SELECT on eu sent no KV batch to another node: the count sees nothing")
	}
}

// waitTrailing waits until node's replicas of ids have closed wall time
// wall (side-transport closings trail the clock by 3 s).
func waitTrailing(t *testing.T, c *Cluster, node int, ids []kvpb.TabletID, wall int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, id := range ids {
			if r := c.Nodes[node].Replica(id); r == nil || r.ClosedTimestamp().WallTime < wall {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d: tablets %v have not closed %s after 60 s", node+1, ids, time.Unix(0, wall))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBoundedStalenessNegotiates: with_max_staleness and
// with_min_timestamp read at the newest timestamp the nearest replicas
// serve without waiting (kv.DB.NegotiateBoundedStaleness). On the
// leaseholder's node (us-west) that is the present: the read sees a write
// acknowledged just before it. On a follower's (eu) it is the follower's
// closed timestamp: once eu closed past a write, the read sees it without
// a KV batch to another node, and with a bound at the write's
// acknowledgement it never reads older. A bound newer than eu's closed
// timestamp is read at the bound by the leaseholder, or, with
// nearest_only, fails with 55000.
func TestBoundedStalenessNegotiates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-region cluster")
	}
	ctx := context.Background()
	c, conns := startGlobal(t, ctx)
	mustExec(t, ctx, conns[0], `CREATE TABLE bs (k int PRIMARY KEY, v text)`)
	mustExec(t, ctx, conns[0], `ALTER TABLE bs CONFIGURE ZONE USING gc.ttlseconds = 3600`)
	mustExec(t, ctx, conns[0], `INSERT INTO bs SELECT i, 'v' || i FROM generate_series(1, 10) AS i`)
	// A view is negotiated over the tables it reads.
	mustExec(t, ctx, conns[0], `CREATE VIEW bs_view AS SELECT k, v FROM bs`)
	ids := tabletsOf(t, ctx, conns[0], "bs")
	waitLeasesIn(t, c, 0, ids)
	const leaseholder, reader = 0, 2 // us-west, eu

	// The leaseholder's node reads the present.
	for i, q := range []string{
		`SELECT v FROM bs AS OF SYSTEM TIME with_max_staleness('10s') WHERE k = 1`,
		`SELECT v FROM bs AS OF SYSTEM TIME with_min_timestamp('2020-01-01 00:00:00+00', true) WHERE k = 1`,
	} {
		v := fmt.Sprintf("lh%d", i)
		mustExec(t, ctx, conns[leaseholder], `UPDATE bs SET v = '`+v+`' WHERE k = 1`)
		if got := query1(t, ctx, conns[leaseholder], q); got != v {
			t.Fatalf("on the leaseholder, %s right after the update: %q, want %q", q, got, v)
		}
	}

	// eu's follower serves what it closed, and nothing older than a bound.
	mustExec(t, ctx, conns[leaseholder], `UPDATE bs SET v = 'f1' WHERE k = 2`)
	acked := time.Now()
	waitTrailing(t, c, reader, ids, acked.UnixNano())
	before, served := remoteBatches(c, reader, ids), followerReads(c, reader, ids)
	for _, q := range []string{
		`SELECT v FROM bs AS OF SYSTEM TIME with_max_staleness('1m') WHERE k = 2`,
		fmt.Sprintf(`SELECT v FROM bs AS OF SYSTEM TIME with_min_timestamp('%s', true) WHERE k = 2`, acked.UTC().Format("2006-01-02 15:04:05.999999+00")),
		`SELECT v FROM bs_view AS OF SYSTEM TIME with_max_staleness('1m', true) WHERE k = 2`,
	} {
		if got := query1(t, ctx, conns[reader], q); got != "f1" {
			t.Fatalf("on eu, %s once eu closed past the update: %q, want f1", q, got)
		}
	}
	if n := remoteBatches(c, reader, ids) - before; n != 0 {
		t.Fatalf("bounded reads on eu sent %d KV batches for the table's tablets to another node, want 0", n)
	}
	if followerReads(c, reader, ids) == served {
		t.Fatal("no bounded read was served by eu's followers")
	}

	// A bound eu has not closed: the leaseholder serves it at the bound,
	// or, nearest_only, the read fails. A trailing closed timestamp is 3 s
	// behind the clock, so a 1 ms bound is never closed on eu.
	mustExec(t, ctx, conns[leaseholder], `UPDATE bs SET v = 'f2' WHERE k = 2`)
	before = remoteBatches(c, reader, ids)
	if got := query1(t, ctx, conns[reader], `SELECT v FROM bs AS OF SYSTEM TIME with_max_staleness('1ms') WHERE k = 2`); got != "f2" {
		t.Fatalf("on eu, a 1 ms bound read %q, want f2 (the leaseholder reads at the bound)", got)
	}
	if remoteBatches(c, reader, ids) == before {
		t.Fatal("a bound eu had not closed was served without the leaseholder")
	}
	for _, q := range []string{
		`SELECT v FROM bs AS OF SYSTEM TIME with_max_staleness('1ms', true) WHERE k = 2`,
		`SELECT v FROM bs_view AS OF SYSTEM TIME with_max_staleness('1ms', true) WHERE k = 2`,
	} {
		_, err := conns[reader].Exec(ctx, q)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55000" || !strings.Contains(pe.Message, "could not be satisfied by a local resolved timestamp") {
			t.Fatalf("%s, a bound eu had not closed: %v, want 55000 could not be satisfied by a local resolved timestamp", q, err)
		}
	}

	// The closer's work shows in /metrics: us-west closed and sent, eu
	// received.
	for _, m := range []struct {
		node int
		name string
	}{
		{leaseholder, "cairn_closer_rounds_total"},
		{leaseholder, "cairn_closer_closings_total"},
		{leaseholder, "cairn_closer_side_messages_sent_total"},
		{leaseholder, "cairn_closer_side_bytes_sent_total"},
		{reader, "cairn_closer_side_messages_received_total"},
		{reader, "cairn_closer_side_bytes_received_total"},
	} {
		if v := metric(t, c, m.node, m.name); v <= 0 {
			t.Errorf("node %d: %s = %g, want > 0", m.node+1, m.name, v)
		}
	}
}

// metric reads an unlabelled counter from node's /metrics.
func metric(t *testing.T, c *Cluster, node int, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + c.Nodes[node].HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("node %d: no %s in /metrics", node+1, name)
	return 0
}
