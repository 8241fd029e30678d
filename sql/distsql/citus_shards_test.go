package distsql_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
)

// TestCitusShardsWithoutLocalReplica: on four nodes with three replicas
// every shard's tablet is missing from one node, and citus_shards read
// on that node still names the shard's leaseholder and gives its bytes
// (asked of the leaseholder, docs/distributed.md), exactly what the
// leaseholder counts, as does citus_shard_sizes(); every node lists
// every shard with a node and a size.
func TestCitusShardsWithoutLocalReplica(t *testing.T) {
	servers := startNServers(t, 4, func(cfg *server.Config) { cfg.ReplicationFactor = 3 })
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE ev (k INT, id INT, pad TEXT, PRIMARY KEY (k, id))")
	mustExec(t, c, "SELECT create_distributed_table('ev', 'k', shard_count => 4)")
	mustExec(t, c, "INSERT INTO ev SELECT g % 200, g, repeat('x', 100) FROM generate_series(1, 4000) g")
	g := groupOf(t, c, "ev")

	waitPlacements(t, "three voters per shard", 3*time.Minute, func() bool {
		ps := placements(t, servers[0], g)
		for _, p := range ps {
			if len(p.Voters) != 3 || len(p.Learners) != 0 {
				return false
			}
		}
		return len(ps) == 4
	})

	type shard struct {
		node       string
		size, sums int64 // citus_shards' shard_size, citus_shard_sizes()' size
	}
	lacking := 0 // (node, shard) pairs where the node holds no replica
	for _, s := range servers {
		sc := connect(t, s)
		me := s.NodeID()
		var problem string
		checked := false
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			before := placements(t, servers[0], g)
			var got []shard
			for _, r := range rows(t, sc, "SELECT concat_ws(' ', coalesce(c.nodename, '-'), c.shard_size, z.size) FROM citus_shards c JOIN citus_shard_sizes() z ON z.shard_id = c.shardid WHERE c.table_name = 'ev'::regclass ORDER BY c.shardid") {
				f := strings.Fields(r)
				n, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil {
					t.Fatalf("citus_shards row %q: %v", r, err)
				}
				z, err := strconv.ParseInt(f[2], 10, 64)
				if err != nil {
					t.Fatalf("citus_shard_sizes size in %q: %v", r, err)
				}
				got = append(got, shard{f[0], n, z})
			}
			if after := placements(t, servers[0], g); !samePlacements(before, after) || len(got) != len(before) {
				problem = "placements changed while reading citus_shards"
				continue
			}
			problem = ""
			n := 0
			for i, p := range before {
				want := fmt.Sprintf("n%d", p.Leaseholder)
				switch {
				case !slices.Contains(p.Voters, me) && (got[i].node != want || got[i].size != p.LiveBytes || got[i].sums != p.LiveBytes):
					problem = fmt.Sprintf("shard %d, no replica on node %d: %s %d bytes (citus_shard_sizes %d), its leaseholder says %s %d",
						i, me, got[i].node, got[i].size, got[i].sums, want, p.LiveBytes)
				case got[i].node != want || got[i].size <= 0:
					problem = fmt.Sprintf("shard %d on node %d: %s %d bytes, want %s and some bytes", i, me, got[i].node, got[i].size, want)
				}
				if !slices.Contains(p.Voters, me) {
					n++
				}
			}
			if problem == "" {
				lacking += n
				checked = true
				break
			}
		}
		if !checked {
			t.Errorf("citus_shards on node %d: %s", me, problem)
		}
	}
	// Each shard's three voters leave one of the four nodes without it.
	if lacking != 4 {
		t.Errorf("%d (node, shard) pairs without a replica were checked, want 4", lacking)
	}
}

// samePlacements reports whether two descriptions of a group's tablets
// agree on every tablet's span, voters, leaseholder and live bytes.
func samePlacements(a, b []kvpb.PlacementResponse) bool {
	return slices.EqualFunc(a, b, func(x, y kvpb.PlacementResponse) bool {
		return x.Desc.TabletID == y.Desc.TabletID && slices.Equal(x.Voters, y.Voters) &&
			x.Leaseholder == y.Leaseholder && x.LiveBytes == y.LiveBytes
	})
}
