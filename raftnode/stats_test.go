package raftnode

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"

	"github.com/cairn-db/cairn/storage"
)

// TestRoundStatsCount: the round and proposal counters behind /metrics'
// cairn_raft_* count what happened: two proposals taken by one synced
// round, then one more by the next, none of them late, and the round's
// time split into its parts.
func TestRoundStatsCount(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := NewNode(Config{NodeID: 1}, eng, nil)
	if _, err := n.AddReplica(1, []uint64{1}, &countSM{}); err != nil {
		t.Fatal(err)
	}
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	for more := true; more; {
		if more, err = n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	if st := n.Replica(1).Status(); st.RaftState != raft.StateLeader {
		t.Fatalf("the sole voter is %v, not leader", st.RaftState)
	}
	st := n.Stats()
	rounds, synced, props := st.Rounds.Load(), st.SyncedRounds.Load(), st.Proposals.Load()
	for _, batch := range [][]string{{"a", "b"}, {"c"}} {
		for _, d := range batch {
			if err := n.Propose(1, []byte(d)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Proposals.Load() - props; got != 3 {
		t.Errorf("proposals counted: %d, want 3", got)
	}
	if got := st.Rounds.Load() - rounds; got != 2 {
		t.Errorf("rounds counted: %d, want 2 (one per ProcessReady with work)", got)
	}
	if got := st.SyncedRounds.Load() - synced; got != 2 {
		t.Errorf("synced rounds counted: %d, want 2 (each appended an entry)", got)
	}
	if got := st.ProposalsLate.Load(); got != 0 {
		t.Errorf("late proposals: %d, want 0 (no round ran between a proposal and its round)", got)
	}
	for name, v := range map[string]int64{"lock wait": st.ProposeLockNanos.Load(), "queue": st.ProposeQueueNanos.Load(),
		"pre-sync": st.PreSyncNanos.Load(), "sync": st.SyncNanos.Load(), "post-sync": st.PostSyncNanos.Load(), "observe": st.ObserveNanos.Load()} {
		if v < 0 {
			t.Errorf("%s time %d < 0", name, v)
		}
	}
	if st.PreSyncNanos.Load()+st.SyncNanos.Load()+st.PostSyncNanos.Load() == 0 {
		t.Error("the rounds' time was not counted")
	}
	// Nothing left: a ProcessReady without work counts no round.
	rounds = st.Rounds.Load()
	if more, err := n.ProcessReady(); err != nil || more {
		t.Fatalf("a round with nothing proposed: more=%v err=%v", more, err)
	}
	if got := st.Rounds.Load() - rounds; got != 0 {
		t.Errorf("a ProcessReady without work counted %d rounds", got)
	}
}
