package distsql_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// TestRebalanceStoredBytes: on five nodes with three replicas a node
// stores only the shards it holds a replica of. Node 1 is made to hold a
// replica of the three largest of six shards and none of the three
// smallest (replica counts left even), so it stores far more than the
// mean (at least 1.2 times); rebalance_table_shards then moves replicas
// (copies to a node holding none, the source's removed) as
// get_rebalance_table_shards_plan showed them, and the bytes stored per
// node end closer together, the fullest node's fewer than the fullest's
// were, replica counts no further apart than one (or than before), while another session's
// INSERTs all succeed and are there after.
func TestRebalanceStoredBytes(t *testing.T) {
	servers := startNServers(t, 5, func(cfg *server.Config) { cfg.ReplicationFactor = 3 })
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE ev (k INT, id INT, pad TEXT, PRIMARY KEY (k, id))")
	mustExec(t, c, "SELECT create_distributed_table('ev', 'k', shard_count => 6)")
	g := groupOf(t, c, "ev")
	s := servers[1]

	// Every shard's tablet on three voters first, spread by the
	// replicate queue over the five nodes (their replica counts within
	// one: the split left them all on the first three).
	var shards []kvpb.PlacementResponse
	waitPlacements(t, "three voters per shard, spread", 3*time.Minute, func() bool {
		shards = placements(t, s, g)
		for _, p := range shards {
			if len(p.Voters) != 3 || len(p.Learners) != 0 {
				return false
			}
		}
		return len(shards) == 6 && countSpread(shards) <= 1
	})
	var tabs []shardTablet
	for _, p := range shards {
		tabs = append(tabs, shardTablet{id: p.Desc.TabletID, start: p.Desc.StartKey, end: p.Desc.EndKey})
	}
	keys := shardKeys(t, tabs, g)
	for i, k := range keys {
		mustExec(t, c, fmt.Sprintf("INSERT INTO ev SELECT %d, g, repeat('x', 200) FROM generate_series(1, %d) g", k, 40*(i+1)*(i+1)))
	}

	// Node 1 takes a replica of each large shard in exchange for its
	// replica of a small one, and leads none of the large ones, whose
	// replicas on it the rebalancer may then move. Each exchange is two
	// moves made at once between node 1 and another node X (X's replica
	// of the large shard to node 1, node 1's of the small one to X), so
	// that no node's replica count changes for long: the replicate queue
	// would even out counts two apart with moves of its own. It may still
	// move a replica of its own meanwhile
	// (it was evening out counts when the skew began): the skew is made
	// again, up to three times, until node 1 is well over the mean.
	skew := func() {
		shards = placements(t, s, g)
		var gains, losses []int
		for i, p := range shards {
			has := slices.Contains(p.Voters, 1)
			if i >= 3 && !has {
				gains = append(gains, i)
			}
			if i < 3 && has {
				losses = append(losses, i)
			}
		}
		for len(gains) > 0 || len(losses) > 0 {
			ps := placements(t, s, g)
			type move struct {
				key      []byte
				from, to uint64
			}
			var moves []move
			switch {
			case len(gains) > 0 && len(losses) > 0:
				l, sm := ps[gains[0]], ps[losses[0]]
				x := uint64(0)
				for _, v := range l.Voters {
					if v != l.Leaseholder && !slices.Contains(sm.Voters, v) {
						x = v
					}
				}
				if x == 0 {
					moves = []move{{l.Desc.StartKey, otherVoter(l, 0), 1}, {sm.Desc.StartKey, 1, nonVoter(t, sm, ps)}}
				} else {
					moves = []move{{l.Desc.StartKey, x, 1}, {sm.Desc.StartKey, 1, x}}
				}
				gains, losses = gains[1:], losses[1:]
			case len(gains) > 0:
				l := ps[gains[0]]
				moves = []move{{l.Desc.StartKey, otherVoter(l, 0), 1}}
				gains = gains[1:]
			default:
				sm := ps[losses[0]]
				moves = []move{{sm.Desc.StartKey, 1, nonVoter(t, sm, ps)}}
				losses = losses[1:]
			}
			errs := make([]error, len(moves))
			var wg sync.WaitGroup
			for i, m := range moves {
				wg.Go(func() { errs[i] = tryMoveReplica(s, m.key, m.from, m.to) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, p := range placements(t, s, g)[3:] {
			if p.Leaseholder == 1 {
				moveLeaseTo(t, s, p.Desc.StartKey, int32(otherVoter(p, 1)))
			}
		}
	}
	var pre []kvpb.PlacementResponse
	var before map[uint64]int64
	for attempt := 1; ; attempt++ {
		skew()
		pre = placements(t, s, g)
		before = stored(pre)
		var total int64
		for _, b := range before {
			total += b
		}
		mean := total / 5
		if before[1] >= mean*12/10 {
			break
		}
		if attempt == 3 {
			t.Fatalf("node 1 stores %d bytes, not much over the mean %d: %v", before[1], mean, before)
		}
		t.Logf("attempt %d: node 1 stores %d bytes, the mean is %d: skewing again", attempt, before[1], mean)
	}
	for i, p := range pre {
		t.Logf("shard %d: %d bytes, voters %v, leaseholder %d", i, p.LiveBytes, p.Voters, p.Leaseholder)
	}
	beforeCounts := countSpread(pre)
	sizes := map[kvpb.TabletID]int64{}
	for _, p := range pre {
		sizes[p.Desc.TabletID] = p.LiveBytes
	}
	t.Logf("bytes stored per node before: %v", before)

	// The plan, on node 1 (whose sizes come from each shard's leaseholder).
	var plan []string
	waitPlacements(t, "a plan", time.Minute, func() bool {
		plan = rows(t, c, "SELECT concat_ws(' ', shardid, sourcename, targetname) FROM get_rebalance_table_shards_plan()")
		return len(plan) > 0
	})
	t.Logf("plan: %v", plan)

	stop := writeAlong(connect(t, servers[2]), 1_000_000, func(i int) string {
		return fmt.Sprintf("INSERT INTO ev VALUES (%d, %d, 'w')", keys[i%len(keys)], i)
	})
	mustExec(t, c, "SELECT rebalance_table_shards('ev')")
	n := stop()
	if got := rows(t, c, "SELECT count(*) FROM ev WHERE id >= 1000000"); got[0] != strconv.Itoa(n) || n == 0 {
		t.Errorf("%d inserts succeeded during the rebalance, %v rows are there", n, got)
	}
	if got := rows(t, c, "SELECT count(*) FROM cairn_catalog.jobs WHERE job_type = 'REBALANCE' AND status = 'succeeded'"); got[0] != "1" {
		t.Errorf("rebalance jobs: %v", rows(t, c, "SELECT job_type, status, fraction_completed, error FROM cairn_catalog.jobs"))
	}
	// Where the replicas are now, weighed with the shards' sizes before
	// (the writes during the rebalance grew every shard).
	after := placements(t, s, g)
	got := map[uint64]int64{}
	for _, p := range after {
		size, ok := sizes[p.Desc.TabletID]
		if !ok {
			t.Fatalf("tablet %d is new since the plan (a split?)", p.Desc.TabletID)
		}
		for _, v := range p.Voters {
			got[v] += size
		}
	}
	t.Logf("bytes stored per node after (the shards' sizes before): %v; as stored now: %v", got, stored(after))
	if storedSpread(got) >= storedSpread(before) || slices.Max(slices.Collect(maps.Values(got))) >= slices.Max(slices.Collect(maps.Values(before))) {
		t.Errorf("bytes stored per node %v after the rebalance, %v before", got, before)
	}
	// Replica counts per node no further apart than one, or than before
	// (the plan's rule: sql/rebalance invariant 5).
	if sp := countSpread(after); sp > max(1, beforeCounts) {
		t.Errorf("replica counts per node %d apart after the rebalance, %d before", sp, beforeCounts)
	}
	// Every shard's rows are all there.
	for i, k := range keys {
		if got := rows(t, c, fmt.Sprintf("SELECT count(*) FROM ev WHERE k = %d AND id < 1000000", k)); got[0] != strconv.Itoa(40*(i+1)*(i+1)) {
			t.Errorf("shard %d: %v rows, want %d", i, got, 40*(i+1)*(i+1))
		}
	}
}

// placements describes group g's tablets in key order as their
// leaseholders see them (kvpb.PlacementRequest), through s.
func placements(t *testing.T, s *server.Server, g uint64) []kvpb.PlacementResponse {
	t.Helper()
	ctx := context.Background()
	span := rowenc.GroupSpan(g)
	var out []kvpb.PlacementResponse
	for key := span.Key; bytes.Compare(key, span.EndKey) < 0; {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PlacementRequest{Key: key})
		br, err := s.DB().Send(ctx, ba)
		if err != nil {
			t.Fatalf("placement at %x: %v", key, err)
		}
		p := *br.Responses[0].(*kvpb.PlacementResponse)
		out = append(out, p)
		if bytes.Compare(p.Desc.EndKey, key) <= 0 {
			break
		}
		key = p.Desc.EndKey
	}
	return out
}

// waitPlacements polls cond until it holds.
func waitPlacements(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// tryMoveReplica moves the replica of the tablet at key from node from
// to node to, asking until it is done.
func tryMoveReplica(s *server.Server, key []byte, from, to uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PlacementRequest{Key: key, From: from, To: to})
		br, err := s.DB().Send(ctx, ba)
		if err == nil {
			r := br.Responses[0].(*kvpb.PlacementResponse)
			if r.Done {
				return nil
			}
			if r.Refused {
				return fmt.Errorf("moving the replica of the tablet at %x from node %d to %d: refused (voters %v)", key, from, to, r.Voters)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("moving the replica of the tablet at %x from node %d to %d: %v", key, from, to, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// otherVoter is a voter of p that is neither its leaseholder nor not.
func otherVoter(p kvpb.PlacementResponse, not uint64) uint64 {
	for _, v := range p.Voters {
		if v != p.Leaseholder && v != not {
			return v
		}
	}
	return 0
}

// nonVoter is the node holding no replica of p with the fewest replicas
// of the group all holds.
func nonVoter(t *testing.T, p kvpb.PlacementResponse, all []kvpb.PlacementResponse) uint64 {
	t.Helper()
	counts := map[uint64]int{}
	for _, q := range all {
		for _, v := range q.Voters {
			counts[v]++
		}
	}
	var best uint64
	for id := uint64(1); id <= 5; id++ {
		if !slices.Contains(p.Voters, id) && (best == 0 || counts[id] < counts[best]) {
			best = id
		}
	}
	if best == 0 {
		t.Fatalf("no node without a replica of %v", p.Voters)
	}
	return best
}

// stored sums the live bytes of the tablets each node is a voter of.
func stored(ps []kvpb.PlacementResponse) map[uint64]int64 {
	out := map[uint64]int64{}
	for _, p := range ps {
		for _, v := range p.Voters {
			out[v] += p.LiveBytes
		}
	}
	return out
}

// storedSpread is the difference between the most and the fewest bytes
// stored by nodes 1..5.
func storedSpread(b map[uint64]int64) int64 {
	lo, hi := b[1], b[1]
	for id := uint64(2); id <= 5; id++ {
		lo, hi = min(lo, b[id]), max(hi, b[id])
	}
	return hi - lo
}

// countSpread is the difference between the most and the fewest replicas
// of ps held by nodes 1..5.
func countSpread(ps []kvpb.PlacementResponse) int {
	counts := map[uint64]int{}
	for _, p := range ps {
		for _, v := range p.Voters {
			counts[v]++
		}
	}
	lo, hi := counts[1], counts[1]
	for id := uint64(2); id <= 5; id++ {
		lo, hi = min(lo, counts[id]), max(hi, counts[id])
	}
	return hi - lo
}
