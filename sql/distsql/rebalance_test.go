package distsql_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/session"
	"github.com/cairn-db/cairn/sql/types"
)

// TestRebalanceShardsBySize: on three nodes, a distributed table whose
// largest shards are served by one node is rebalanced by size
// (rebalance_table_shards, Citus's by_disk_size): the moves are those
// get_rebalance_table_shards_plan showed, the bytes each node serves end
// closer together with the lease counts unchanged, it ran as a job, and
// another session's writes during it all succeed and are there after.
func TestRebalanceShardsBySize(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE ev (k INT, id INT, pad TEXT, PRIMARY KEY (k, id))")
	mustExec(t, c, "CREATE TABLE plain (k INT PRIMARY KEY)")
	mustExec(t, c, "SELECT create_distributed_table('ev', 'k', shard_count => 6)")

	// Bad calls.
	for _, bad := range []struct{ sql, code string }{
		{"SELECT rebalance_table_shards('nosuch')", "42P01"},
		{"SELECT rebalance_table_shards('plain')", "22023"},
		{"SELECT rebalance_table_shards(drain_only => true)", "0A000"},
		{"SELECT rebalance_table_shards(rebalance_strategy => 'by_magic')", "22023"},
		{"SELECT rebalance_table_shards(threshold => 2)", "22023"},
		{"SELECT rebalance_table_shards(shard_transfer_mode => 'copy')", "22P02"},
		{"SELECT * FROM get_rebalance_table_shards_plan('plain')", "22023"},
	} {
		if _, err := c.Exec(ctx, bad.sql); err == nil || !strings.Contains(err.Error(), bad.code) {
			t.Errorf("%s: %v, want %s", bad.sql, err, bad.code)
		}
	}

	// The shard of tablet i (in key order) gets (i+1)^2 units of rows,
	// so the shards differ in size.
	shards := shardTablets(t, c, servers[0], "ev")
	keys := shardKeys(t, shards, groupOf(t, c, "ev"))
	for i, k := range keys {
		mustExec(t, c, fmt.Sprintf("INSERT INTO ev SELECT %d, g, repeat('x', 200) FROM generate_series(1, %d) g", k, 40*(i+1)*(i+1)))
	}
	// The two largest shards on node 1, the next two on node 2, the
	// smallest on node 3: two leases each, bytes far apart.
	skew := func() map[string]int64 {
		for i, sh := range shards {
			moveLeaseTo(t, servers[0], sh.start, []int32{3, 3, 2, 2, 1, 1}[i])
		}
		return waitServedBytes(t, c, 6, func(nodes map[string]int64) bool {
			return nodes["n1"] > nodes["n2"] && nodes["n2"] > nodes["n3"] && nodes["n3"] > 0
		})
	}
	before := skew()
	t.Logf("bytes served before: %v", before)

	plan := rows(t, c, "SELECT concat_ws(' ', table_name::text, shardid, shard_size, sourcename, sourceport, targetname, targetport) FROM get_rebalance_table_shards_plan()")
	if len(plan) == 0 {
		t.Fatalf("no plan for bytes served %v", before)
	}
	t.Logf("plan: %v", plan)
	ids := rows(t, c, "SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'ev'::regclass")
	var targets []string
	for _, p := range plan {
		f := strings.Fields(p)
		if f[0] != "ev" || !slices.Contains(ids, f[1]) || f[3] == f[5] || f[4] != "0" || f[6] != "0" {
			t.Errorf("plan row %q", p)
		}
		targets = append(targets, f[1]+" "+f[5])
	}

	// Another session writes the whole time.
	stop := writeAlong(connect(t, servers[1]), 1_000_000, func(i int) string {
		return fmt.Sprintf("INSERT INTO ev VALUES (%d, %d, 'w')", keys[i%len(keys)], i)
	})
	mustExec(t, c, "SELECT rebalance_table_shards('ev')")
	n := stop()
	if got := rows(t, c, "SELECT count(*) FROM ev WHERE id >= 1000000"); got[0] != strconv.Itoa(n) || n == 0 {
		t.Errorf("%d inserts succeeded during the rebalance, %v rows are there", n, got)
	}
	if got := rows(t, c, "SELECT count(*) FROM cairn_catalog.jobs WHERE job_type = 'REBALANCE' AND status = 'succeeded' AND fraction_completed = 1"); got[0] != "1" {
		t.Errorf("rebalance jobs: %v", rows(t, c, "SELECT job_type, status, fraction_completed, error FROM cairn_catalog.jobs"))
	}
	// Every planned move happened: the shard is served by its target.
	for _, tg := range targets {
		f := strings.Fields(tg)
		if got := rows(t, c, "SELECT nodename FROM citus_shards WHERE shardid = "+f[0]); len(got) != 1 || got[0] != f[1] {
			t.Errorf("shard %s is on %v after the rebalance, planned for %s", f[0], got, f[1])
		}
	}
	after := waitServedBytes(t, c, 6, func(map[string]int64) bool { return true })
	t.Logf("bytes served after: %v", after)
	if spread(after) >= spread(before) {
		t.Errorf("bytes served per node %v after the rebalance, %v before", after, before)
	}
	if got := rows(t, c, "SELECT count(*) FROM citus_shards GROUP BY nodename ORDER BY 1"); strings.Join(got, ",") != "2,2,2" {
		t.Errorf("shards per node after the rebalance: %v", got)
	}

	// The same in the background: citus_rebalance_start answers the
	// job's ID and citus_rebalance_wait returns once it has ended.
	if _, err := c.Exec(ctx, "SELECT citus_rebalance_stop()"); err == nil || !strings.Contains(err.Error(), "55000") {
		t.Errorf("citus_rebalance_stop with no rebalance running: %v, want 55000", err)
	}
	before = skew()
	id := rows(t, c, "SELECT citus_rebalance_start()")
	if len(id) != 1 || id[0] == "<nil>" || id[0] == "" {
		t.Fatalf("citus_rebalance_start: %v", id)
	}
	mustExec(t, c, "SELECT citus_rebalance_wait()")
	if got := rows(t, c, "SELECT concat_ws(' ', job_type, status) FROM cairn_catalog.jobs WHERE job_id = "+id[0]); strings.Join(got, ",") != "REBALANCE succeeded" {
		t.Errorf("job %s after citus_rebalance_wait: %v", id[0], got)
	}
	after = waitServedBytes(t, c, 6, func(map[string]int64) bool { return true })
	if spread(after) >= spread(before) {
		t.Errorf("bytes served per node %v after citus_rebalance_start, %v before", after, before)
	}
	// citus_rebalance_status lists both rebalances, finished, every move
	// done.
	status := rows(t, c, "SELECT concat_ws(' ', job_id, state, job_type, (details->'task_state_counts'->>'done')::int > 0, details->'task_state_counts'->>'runnable', started_at IS NOT NULL, finished_at IS NOT NULL) FROM citus_rebalance_status() ORDER BY job_id")
	if len(status) != 2 || status[1] != id[0]+" finished rebalance t 0 t t" || !strings.HasSuffix(status[0], " finished rebalance t 0 t t") {
		t.Errorf("citus_rebalance_status: %v", status)
	}
}

// shardTablet is a shard's tablet as node 1's replica describes it.
type shardTablet struct {
	id         kvpb.TabletID
	start, end []byte
}

// shardTablets lists a distributed table's tablets (one per shard before
// any split) in key order.
func shardTablets(t *testing.T, c *pgx.Conn, s *server.Server, table string) []shardTablet {
	t.Helper()
	var out []shardTablet
	for _, id := range rows(t, c, "SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = '"+table+"' AND index_name IS NULL") {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		r := s.Replica(kvpb.TabletID(n))
		if r == nil {
			t.Fatalf("node 1 has no replica of tablet %d", n)
		}
		d := r.Desc()
		out = append(out, shardTablet{id: d.TabletID, start: d.StartKey, end: d.EndKey})
	}
	slices.SortFunc(out, func(a, b shardTablet) int { return bytes.Compare(a.start, b.start) })
	return out
}

// shardKeys finds, for each tablet of group g, a value of an INT
// distribution column whose rows it holds.
func shardKeys(t *testing.T, tablets []shardTablet, g uint64) []int {
	t.Helper()
	out := make([]int, len(tablets))
	found := 0
	for k := 1; found < len(tablets) && k < 100000; k++ {
		enc, err := rowenc.EncodeKey(nil, types.DInt(k), rowenc.Asc)
		if err != nil {
			t.Fatal(err)
		}
		b := rowenc.HashBucket(enc)
		key := rowenc.BucketSpan(g, b, b).Key
		for i, tb := range tablets {
			if out[i] == 0 && bytes.Compare(tb.start, key) <= 0 && bytes.Compare(key, tb.end) < 0 {
				out[i] = k
				found++
			}
		}
	}
	if found < len(tablets) {
		t.Fatalf("found keys for %d of %d tablets: %v", found, len(tablets), out)
	}
	return out
}

// moveLeaseTo hands the lease of the tablet starting at start to node.
func moveLeaseTo(t *testing.T, s *server.Server, start []byte, node int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SpreadLeaseRequest{Key: start, Node: uint64(node)})
		br, err := s.DB().Send(ctx, ba)
		if err == nil && br.Responses[0].(*kvpb.SpreadLeaseResponse).Done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the lease of the tablet at %x did not reach node %d: %v", start, node, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitServedBytes waits until citus_shards shows every one of n shards on
// a node with a size, and ok holds of the bytes per node; it returns them.
func waitServedBytes(t *testing.T, c *pgx.Conn, n int, ok func(map[string]int64) bool) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]int64{}
		shards := rows(t, c, "SELECT concat_ws(' ', nodename, shard_size) FROM citus_shards WHERE nodename IS NOT NULL AND shard_size > 0")
		for _, r := range shards {
			f := strings.Fields(r)
			b, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			got[f[0]] += b
		}
		if len(shards) == n && ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("citus_shards: %v", shards)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// spread is the difference between the most and the fewest bytes served
// by nodes n1..n3.
func spread(nodes map[string]int64) int64 {
	lo, hi := nodes["n1"], nodes["n1"]
	for _, n := range []string{"n2", "n3"} {
		lo, hi = min(lo, nodes[n]), max(hi, nodes[n])
	}
	return hi - lo
}

// TestRebalanceStopAndResume: on three nodes, citus_rebalance_stop stops
// a background rebalance before its next move (the job cancelled after
// one move of two), and a background rebalance whose coordinator dies
// after its first move is taken over by another node (a job: jobs.Claim),
// which makes the rest from where the first stopped, and
// citus_rebalance_wait on a surviving node waits for it.
func TestRebalanceStopAndResume(t *testing.T) {
	defer func(o, h time.Duration) { jobs.OrphanAfter, jobs.HeartbeatEvery = o, h }(jobs.OrphanAfter, jobs.HeartbeatEvery)
	jobs.OrphanAfter, jobs.HeartbeatEvery = time.Second, 50*time.Millisecond
	servers := startServers(t)
	c1, c2 := connect(t, servers[0]), connect(t, servers[1])
	ctx := context.Background()
	mustExec(t, c1, "CREATE TABLE ev (k INT, id INT, pad TEXT, PRIMARY KEY (k, id))")
	mustExec(t, c1, "SELECT create_distributed_table('ev', 'k', shard_count => 6)")
	shards := shardTablets(t, c1, servers[0], "ev")
	keys := shardKeys(t, shards, groupOf(t, c1, "ev"))
	for i, k := range keys {
		mustExec(t, c1, fmt.Sprintf("INSERT INTO ev SELECT %d, g, repeat('x', 200) FROM generate_series(1, %d) g", k, 40*(i+1)*(i+1)))
	}
	// Node 3 serves the two smallest shards, node 1 the middle two, node
	// 2 the two largest: the plan is one swap between nodes 2 and 3, two
	// moves that leave node 1 (the coordinator that dies below) alone.
	want := []int32{3, 3, 1, 1, 2, 2}
	wantNodes := fmt.Sprint([]string{"n3", "n3", "n1", "n1", "n2", "n2"})
	placed := func(c *pgx.Conn) string {
		return fmt.Sprint(rows(t, c, "SELECT nodename FROM citus_shards WHERE table_name = 'ev'::regclass ORDER BY shardid"))
	}
	skew := func() []string {
		t.Helper()
		// The store's lease balancer keeps the table's six leases two
		// to a node: moved one at a time they pass through three on a
		// node and one on another, and the balancer may then move one
		// the loop placed before (under load it did, and the plan
		// named node 1). So place them until both nodes' directories
		// show every shard where it belongs, the counts even (then
		// nothing moves them), again if a late move undid one.
		for attempt := 1; ; attempt++ {
			for i, sh := range shards {
				moveLeaseTo(t, servers[1], sh.start, want[i])
			}
			var got string
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if got = placed(c1); got == wantNodes && placed(c2) == wantNodes {
					break
				}
			}
			if got == wantNodes && placed(c2) == wantNodes {
				break
			}
			if attempt == 5 {
				t.Fatalf("shards on %s after %d placements, want %s", got, attempt, wantNodes)
			}
			t.Logf("placement %d: shards on %s, want %s; placing again", attempt, got, wantNodes)
		}
		// Both nodes' tablet directories have the sizes (the plans
		// are made on node 1).
		for _, c := range []*pgx.Conn{c1, c2} {
			waitServedBytes(t, c, 6, func(n map[string]int64) bool { return n["n2"] > n["n1"] && n["n1"] > n["n3"] && n["n3"] > 0 })
		}
		if got := placed(c1); got != wantNodes {
			t.Fatalf("shards moved to %s after their placement, want %s", got, wantNodes)
		}
		plan := rows(t, c1, "SELECT concat_ws(' ', shardid, sourcename, targetname) FROM get_rebalance_table_shards_plan()")
		if len(plan) != 2 {
			t.Fatalf("plan: %v, want one swap", plan)
		}
		for _, p := range plan {
			if f := strings.Fields(p); f[1] == "n1" || f[2] == "n1" {
				t.Fatalf("plan: %v, want node 1 left alone", plan)
			}
		}
		return plan
	}
	status := func(c *pgx.Conn, id string) string {
		t.Helper()
		got := rows(t, c, "SELECT concat_ws(' ', state, details->'task_state_counts'->>'done', details->'task_state_counts'->>'runnable') FROM citus_rebalance_status() WHERE job_id = "+id)
		return strings.Join(got, ",")
	}

	// Stopped after its first move.
	skew()
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { session.TestingSetRebalanceBeforeMove(nil); unblock() })
	session.TestingSetRebalanceBeforeMove(func(_ int64, i int) error {
		if i == 1 {
			close(reached)
			<-release
		}
		return nil
	})
	id := rows(t, c1, "SELECT citus_rebalance_start()")
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("the rebalance never reached its second move: %v", rows(t, c2, "SELECT job_type, status, error FROM cairn_catalog.jobs"))
	}
	if _, err := c2.Exec(ctx, "SELECT citus_rebalance_start()"); err == nil || !strings.Contains(err.Error(), "55000") {
		t.Errorf("citus_rebalance_start while one runs: %v, want 55000", err)
	}
	mustExec(t, c2, "SELECT citus_rebalance_stop()")
	unblock()
	mustExec(t, c1, "SELECT citus_rebalance_wait()")
	if got := status(c2, id[0]); got != "cancelled 1 1" {
		t.Errorf("stopped rebalance %s: %q, want cancelled with 1 move done and 1 not", id[0], got)
	}
	if got := rows(t, c2, "SELECT error FROM cairn_catalog.jobs WHERE job_id = "+id[0]); len(got) != 1 || !strings.Contains(got[0], "stopped by citus_rebalance_stop after 1 of 2 moves") {
		t.Errorf("stopped rebalance's error: %v", got)
	}

	// Its coordinator dies after the first move.
	plan := skew()
	var died atomic.Bool
	var mu sync.Mutex
	var after []int // the moves begun after it died
	session.TestingSetRebalanceBeforeMove(func(_ int64, i int) error {
		if i == 1 && died.CompareAndSwap(false, true) {
			return session.ErrTestingJobDied
		}
		if died.Load() {
			mu.Lock()
			after = append(after, i)
			mu.Unlock()
		}
		return nil
	})
	id = rows(t, c1, "SELECT citus_rebalance_start()")
	for deadline := time.Now().Add(60 * time.Second); !died.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the rebalance never reached its second move: %v", rows(t, c2, "SELECT job_type, status, error FROM cairn_catalog.jobs"))
		}
	}
	c1.Close(ctx)
	if err := servers[0].Stop(ctx); err != nil {
		t.Logf("stopping node 1: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	if _, err := c2.Exec(wctx, "SELECT citus_rebalance_wait()"); err != nil {
		t.Fatalf("citus_rebalance_wait on node 2 after node 1 died: %v (jobs %v)", err, rows(t, c2, "SELECT job_id, status, error FROM cairn_catalog.jobs"))
	}
	if got := status(c2, id[0]); got != "finished 2 0" {
		t.Errorf("resumed rebalance %s: %q, want finished with both moves done", id[0], got)
	}
	mu.Lock()
	if !slices.Equal(after, []int{1}) {
		t.Errorf("moves begun after the coordinator died: %v, want only the second", after)
	}
	mu.Unlock()
	for _, p := range plan {
		f := strings.Fields(p)
		if got := rows(t, c2, "SELECT nodename FROM citus_shards WHERE shardid = "+f[0]); len(got) != 1 || got[0] != f[2] {
			t.Errorf("shard %s is on %v after the resumed rebalance, planned for %s", f[0], got, f[2])
		}
	}
}
