package localcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reference tables are read on every node from its own replica
// (tablet/closedts.go; docs/architecture.md, "Reference tables: global
// reads"). The cluster is the --global one (us-west, us-east, eu with the
// seed's round trips), its leases kept in us-west (node 1), so nodes 2
// and 3 are followers of every tablet.

// TestReferenceTableLocalReads: a SELECT of a reference table on a node
// that is not its leaseholder sends no KV batch for the table's tablets
// to another node, and returns the table's rows. Before the table is a
// reference table, the same SELECT there does send one: the count is
// able to see a remote read.
func TestReferenceTableLocalReads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-region cluster")
	}
	ctx := context.Background()
	c, conns := startGlobal(t, ctx)
	admin := conns[0]
	mustExec(t, ctx, admin, `CREATE TABLE ref (k int PRIMARY KEY, v text)`)
	mustExec(t, ctx, admin, `INSERT INTO ref SELECT i, 'v' || i FROM generate_series(1, 100) AS i`)
	const sel = `SELECT count(*), sum(k), max(v) FROM ref`
	want := "100 5050 v99"

	ids := tabletsOf(t, ctx, admin, "ref")
	waitLeasesIn(t, c, 0, ids)
	reader := conns[2] // eu
	before := remoteBatches(c, 2, ids)
	if got := query1(t, ctx, reader, sel); got != want {
		t.Fatalf("%s: %q, want %q", sel, got, want)
	}
	if n := remoteBatches(c, 2, ids) - before; n == 0 {
		t.Fatalf("an ordinary table's SELECT on a follower node sent no KV batch to another node: the count sees nothing")
	}

	mustExec(t, ctx, admin, `SELECT create_reference_table('ref')`)
	ids = tabletsOf(t, ctx, admin, "ref")
	waitLeasesIn(t, c, 0, ids)
	waitClosed(t, c, ids)
	for _, node := range []int{1, 2} {
		before := remoteBatches(c, node, ids)
		served := followerReads(c, node, ids)
		fragBatches := c.Nodes[0].DistSQLMetrics().Batches
		for _, q := range []struct{ sql, want string }{
			{sel, want},
			{`SELECT v FROM ref WHERE k = 42`, "v42"},
			{`SELECT count(*) FROM ref WHERE v LIKE 'v1%'`, "12"},
		} {
			if got := query1(t, ctx, conns[node], q.sql); got != q.want {
				t.Fatalf("node %d: %s: %q, want %q", node+1, q.sql, got, q.want)
			}
		}
		if n := remoteBatches(c, node, ids) - before; n != 0 {
			t.Fatalf("node %d: SELECTs of a reference table sent %d KV batches for its tablets to another node, want 0 (%s)", node+1, n, closedState(c, node, ids))
		}
		if n := followerReads(c, node, ids) - served; n == 0 {
			t.Fatalf("node %d: no read was served by the local follower", node+1)
		}
		if n := c.Nodes[0].DistSQLMetrics().Batches - fragBatches; n != 0 {
			t.Fatalf("node %d: the leaseholder's node sent %d batches from distributed fragments", node+1, n)
		}
		for _, id := range ids {
			if c.Nodes[node].Replica(id).HoldsLease() {
				t.Fatalf("node %d took tablet %d's lease during the reads: they may have been the leaseholder's", node+1, id)
			}
		}
	}
}

// waitLeasesIn waits until node (from 0) holds the lease of every tablet
// in ids (the lease preferences move them there).
func waitLeasesIn(t *testing.T, c *Cluster, node int, ids []kvpb.TabletID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, id := range ids {
			if r := c.Nodes[node].Replica(id); r == nil || !r.HoldsLease() {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d does not hold the leases of tablets %v after 30 s", node+1, ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReferenceTableLinearizable: writers on two nodes (the leaseholder's
// and a follower's) update one row of a reference table to unique values
// while readers on the two follower nodes read it; porcupine checks that
// the history is linearizable, so a read that began after a write was
// acknowledged, on whatever node, saw that write or a later one.
func TestReferenceTableLinearizable(t *testing.T) {
	const minWrites, minReads = 4, 20
	if testing.Short() {
		t.Skip("starts a three-region cluster")
	}
	ctx := context.Background()
	c, conns := startGlobal(t, ctx)
	mustExec(t, ctx, conns[0], `CREATE TABLE reg (k int PRIMARY KEY, v text NOT NULL)`)
	mustExec(t, ctx, conns[0], `INSERT INTO reg VALUES (1, 'init')`)
	// No client retry: the nodes' background readers of the zone record
	// it writes no longer push it (TestReferenceTableBesideZoneReaders).
	mustExec(t, ctx, conns[0], `SELECT create_reference_table('reg')`)
	ids := tabletsOf(t, ctx, conns[0], "reg")
	waitClosed(t, c, ids)
	served := followerReads(c, 1, ids) + followerReads(c, 2, ids)

	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		seq     atomic.Int64
		writes  atomic.Int64
		reads   atomic.Int64
	)
	record := func(client int, in regIn, out regOut, call, ret time.Time) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Output: out,
			Call: int64(call.Sub(start)), Return: int64(ret.Sub(start))})
	}
	// The run lasts 8 s, and longer until enough happened to check (a
	// write to a global table waits out its future timestamp, so on a
	// loaded machine 8 s held fewer than two), but at most 90 s.
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	go func() {
		minEnd := time.NewTimer(8 * time.Second)
		defer minEnd.Stop()
		select {
		case <-wctx.Done():
			return
		case <-minEnd.C:
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for writes.Load() < minWrites || reads.Load() < minReads {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
		cancel()
	}()
	var wg sync.WaitGroup
	client := 0
	for _, node := range []int{0, 1} {
		conn := dial(t, ctx, c, node)
		client++
		id := client
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				v := fmt.Sprintf("w%d", seq.Add(1))
				call := time.Now()
				_, err := conn.Exec(wctx, `UPDATE reg SET v = $1 WHERE k = 1`, v)
				ret := time.Now()
				if err != nil {
					if wctx.Err() != nil {
						// Cut off by the end of the run: it may or may
						// not have happened, at any time after its call.
						record(id, regIn{write: true, value: v}, regOut{unknown: true}, call, time.Now().Add(time.Hour))
						return
					}
					t.Errorf("node %d: UPDATE: %v", node+1, err)
					return
				}
				writes.Add(1)
				record(id, regIn{write: true, value: v}, regOut{}, call, ret)
			}
		}()
	}
	for _, node := range []int{1, 2, 2} {
		conn := dial(t, ctx, c, node)
		client++
		id := client
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				var v string
				call := time.Now()
				err := conn.QueryRow(wctx, `SELECT v FROM reg WHERE k = 1`).Scan(&v)
				ret := time.Now()
				if err != nil {
					if wctx.Err() == nil {
						t.Errorf("node %d: SELECT: %v", node+1, err)
					}
					return
				}
				reads.Add(1)
				record(id, regIn{}, regOut{value: v}, call, ret)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d writes, %d reads; %d reads served by followers", writes.Load(), reads.Load(), followerReads(c, 1, ids)+followerReads(c, 2, ids)-served)
	if writes.Load() < minWrites || reads.Load() < minReads {
		t.Fatalf("too little happened to check: %d writes, %d reads", writes.Load(), reads.Load())
	}
	if followerReads(c, 1, ids)+followerReads(c, 2, ids) == served {
		t.Fatalf("no read was served by a follower: the run checks nothing about follower reads")
	}
	if res := porcupine.CheckOperationsTimeout(regModel, history, time.Minute); res != porcupine.Ok {
		slices.SortFunc(history, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		for _, op := range history {
			in, out := op.Input.(regIn), op.Output.(regOut)
			what := "read " + out.value
			if in.write {
				what = fmt.Sprintf("write %s (unknown %v)", in.value, out.unknown)
			}
			t.Logf("client %d [%v, %v] %s", op.ClientId, time.Duration(op.Call), time.Duration(op.Return), what)
		}
		t.Fatalf("the history of %d operations is not linearizable (%s)", len(history), res)
	}
}

// TestReferenceTableBesideZoneReaders: create_reference_table writes a
// zone record (and its table's descriptor), which every node rereads in
// the background (server/zones.go, the GC queue's copy). With the readers
// running back to back on all three nodes, a run of create_reference_table
// calls, each as a client sends it (no client retry), never answers
// 40001. When the readers pushed the transactions whose intents they met,
// the DDL's commit was pushed again between each refresh and its
// EndTxn, until its in-place retries and then the session's reruns ran
// out (the 40001 TestReferenceTableLinearizable once met at set-up);
// so no commit of the gateway's may be pushed at all during the run.
// The readers must also have met the DDL's intents (and read below them)
// during the run, or it checked nothing.
func TestReferenceTableBesideZoneReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-region cluster")
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 3, Global: true, LeasePreferences: "region=us-west",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ZoneRefreshInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	conn := dial(t, ctx, c, 0)
	met := func() (n int64) {
		for _, s := range c.Nodes {
			n += s.DB().BelowIntentScans()
		}
		return n
	}
	before, pushed := met(), c.Nodes[0].DB().PushedCommits()
	const calls = 12
	var lost []string
	for i := range calls {
		mustExec(t, ctx, conn, fmt.Sprintf(`CREATE TABLE ref%d (k int PRIMARY KEY, v text)`, i))
		mustExec(t, ctx, conn, fmt.Sprintf(`INSERT INTO ref%d VALUES (1, 'a')`, i))
		_, err := conn.Exec(ctx, fmt.Sprintf(`SELECT create_reference_table('ref%d')`, i), pgx.QueryExecModeSimpleProtocol)
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == "40001":
			lost = append(lost, fmt.Sprintf("ref%d: %s (%s)", i, pe.Message, pe.Detail))
		case err != nil:
			t.Fatalf("create_reference_table('ref%d'): %v", i, err)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d create_reference_table calls answered 40001 beside the zone readers:\n%s", len(lost), calls, strings.Join(lost, "\n"))
	}
	// The readers' pushes are what made the commits lose; before they
	// stopped, 12 calls saw about 18 pushed commits on an idle machine
	// and no 40001, so this is the check that fails without the fix.
	if n := c.Nodes[0].DB().PushedCommits() - pushed; n != 0 {
		t.Fatalf("the gateway's commits were pushed %d times beside the zone readers, want 0", n)
	}
	if met() == before {
		t.Fatalf("the zone readers never met a create_reference_table's intents: the run checked nothing")
	}
	t.Logf("the readers read below the DDL's intents %d times", met()-before)
}

// TestRegisterModelRejectsStaleRead: the checker of
// TestReferenceTableLinearizable fails a read that returns an older value
// after a newer write was acknowledged, and passes it when they overlap.
func TestRegisterModelRejectsStaleRead(t *testing.T) {
	op := func(client int, in regIn, out regOut, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	stale := []porcupine.Operation{
		op(1, regIn{write: true, value: "a"}, regOut{}, 0, 10),
		op(1, regIn{write: true, value: "b"}, regOut{}, 20, 30),
		op(2, regIn{}, regOut{value: "a"}, 40, 50),
	}
	if res := porcupine.CheckOperations(regModel, stale); res {
		t.Fatalf("a read of a after b was acknowledged passed the check")
	}
	overlap := []porcupine.Operation{
		op(1, regIn{write: true, value: "a"}, regOut{}, 0, 10),
		op(1, regIn{write: true, value: "b"}, regOut{}, 20, 30),
		op(2, regIn{}, regOut{value: "a"}, 25, 50),
		op(3, regIn{write: true, value: "c"}, regOut{unknown: true}, 60, 1000),
		op(2, regIn{}, regOut{value: "b"}, 70, 80),
	}
	if res := porcupine.CheckOperations(regModel, overlap); !res {
		t.Fatalf("a linearizable history failed the check")
	}
}

// regIn is an operation on the register: a read, or a write of a unique
// value.
type regIn struct {
	write bool
	value string
}

// regOut is what a read returned; unknown marks a write whose outcome the
// client did not learn (its return is put after everything).
type regOut struct {
	value   string
	unknown bool
}

// regModel is one register starting at "init".
var regModel = porcupine.Model{
	Init: func() any { return "init" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(regIn), output.(regOut)
		if !in.write {
			return out.value == s, s
		}
		// A write of unknown outcome returns after everything, so a
		// write that never happened is placed last, where nothing
		// reads it.
		return true, in.value
	},
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
}

// startGlobal starts a --global cluster with its leases in us-west and
// opens a connection to each node.
func startGlobal(t *testing.T, ctx context.Context) (*Cluster, []*pgx.Conn) {
	t.Helper()
	c, err := Start(ctx, Options{Nodes: 3, Global: true, LeasePreferences: "region=us-west", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	conns := make([]*pgx.Conn, len(c.Nodes))
	for i := range conns {
		conns[i] = dial(t, ctx, c, i)
	}
	return c, conns
}

func dial(t *testing.T, ctx context.Context, c *Cluster, node int) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL(node, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// mustExec runs sql in the simple protocol, as psql runs a script:
// there an implicit transaction commits before the answer is sent, so
// the session reruns one whose commit fails retryably (40001).
func mustExec(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// query1 returns the first row of sql's answer, its columns joined by
// spaces.
func query1(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) string {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("%s: no row (%v)", sql, rows.Err())
	}
	vals, err := rows.Values()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out := ""
	for i, v := range vals {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprint(v)
	}
	return out
}

// tabletsOf lists the tablets of table's rows.
func tabletsOf(t *testing.T, ctx context.Context, conn *pgx.Conn, table string) []kvpb.TabletID {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = $1`, table)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) == 0 {
		t.Fatalf("tablets of %s: %v, %v", table, ids, err)
	}
	out := make([]kvpb.TabletID, len(ids))
	for i, id := range ids {
		out[i] = kvpb.TabletID(id)
	}
	return out
}

// waitClosed waits until every node's replica of every tablet in ids has
// applied a leading closed timestamp (the leaseholder closes it within a
// second or two of the zone record).
func waitClosed(t *testing.T, c *Cluster, ids []kvpb.TabletID) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, s := range c.Nodes {
			for _, id := range ids {
				// ClosedLeads, not just a closed timestamp: a trailing one
				// (the side transport's, from before the table's zone asked
				// for global reads) serves no present-time read.
				if r := s.Replica(id); r == nil || !r.ClosedLeads() {
					ok = false
				}
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tablets %v: not every replica has a leading closed timestamp after 30 s", ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closedState describes node's replicas of ids for a failure message:
// their closed timestamps, whether those lead the clock, and how many
// follower reads each refused.
func closedState(c *Cluster, node int, ids []kvpb.TabletID) string {
	var b strings.Builder
	for _, id := range ids {
		r := c.Nodes[node].Replica(id)
		if r == nil {
			fmt.Fprintf(&b, "tablet %d: no replica; ", id)
			continue
		}
		fmt.Fprintf(&b, "tablet %d: closed %s leads %t refused %d; ", id, r.ClosedTimestamp(), r.ClosedLeads(), r.Metrics().FollowerReadsRefused.Load())
	}
	return b.String()
}

func remoteBatches(c *Cluster, node int, ids []kvpb.TabletID) int64 {
	var n int64
	for _, id := range ids {
		n += c.Nodes[node].RemoteKVBatches(id)
	}
	return n
}

func followerReads(c *Cluster, node int, ids []kvpb.TabletID) int64 {
	var n int64
	for _, id := range ids {
		if r := c.Nodes[node].Replica(id); r != nil {
			n += r.Metrics().FollowerReads.Load()
		}
	}
	return n
}
