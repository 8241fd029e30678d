package distsql_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
)

// TestReferenceTableOnEveryNode: on five nodes with three replicas, a
// table has three voters until create_reference_table, then one on every
// node (membership.EveryNode: its zone has global reads), so each node
// holds a replica and reads it there; undistribute_table brings it back
// to three.
func TestReferenceTableOnEveryNode(t *testing.T) {
	servers := startNServers(t, 5, func(cfg *server.Config) { cfg.ReplicationFactor = 3 })
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE ref (k INT PRIMARY KEY, v TEXT)")
	mustExec(t, c, "INSERT INTO ref SELECT i, 'v' || i FROM generate_series(1, 100) AS i")
	g := uint64(tableID(t, c, "ref"))
	s := servers[1]
	voters := func(want int) func() bool {
		return func() bool {
			ps := placements(t, s, g)
			for _, p := range ps {
				if len(p.Voters) != want || len(p.Learners) != 0 {
					return false
				}
			}
			return len(ps) > 0
		}
	}
	waitPlacements(t, "three voters before", 2*time.Minute, voters(3))

	mustExec(t, c, "SELECT create_reference_table('ref')")
	waitPlacements(t, "a voter on every node", 2*time.Minute, voters(5))
	for _, p := range placements(t, s, g) {
		if !slices.Equal(p.Voters, []uint64{1, 2, 3, 4, 5}) {
			t.Errorf("tablet %d: voters %v", p.Desc.TabletID, p.Voters)
		}
		for i, srv := range servers {
			if srv.Replica(kvpb.TabletID(p.Desc.TabletID)) == nil {
				t.Errorf("node %d holds no replica of tablet %d", i+1, p.Desc.TabletID)
			}
		}
	}
	for i, srv := range servers {
		if got := rows(t, connect(t, srv), "SELECT count(*), min(v), max(k) FROM ref"); len(got) != 1 || got[0] != "100v1100" {
			t.Errorf("node %d reads %v", i+1, got)
		}
	}
	mustExec(t, c, "INSERT INTO ref VALUES (101, 'w')")
	if got := rows(t, connect(t, servers[4]), "SELECT v FROM ref WHERE k = 101"); fmt.Sprint(got) != "[w]" {
		t.Errorf("node 5 reads the new row as %v", got)
	}

	mustExec(t, c, "SELECT undistribute_table('ref')")
	waitPlacements(t, "three voters after", 2*time.Minute, voters(3))
}
