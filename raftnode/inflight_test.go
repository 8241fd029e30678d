package raftnode

import (
	"bytes"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// TestInflightBytesBounded: a leader whose follower stops acknowledging
// keeps at most Config.MaxInflightBytes of entries in flight to it, and
// goes on replicating to the others. Before the bound only the count of
// messages (256) limited what a catch-up put on the transport.
func TestInflightBytesBounded(t *testing.T) {
	const (
		limit   = 16 << 10
		entry   = 3 << 10
		entries = 64
	)
	for _, tc := range []struct {
		name          string
		inflightBytes uint64
		wantAtMost    int // appends in flight to the muted follower
		wantAtLeast   int
	}{
		{name: "bounded", inflightBytes: limit, wantAtMost: limit/entry + 1, wantAtLeast: 1},
		// Far above what the entries add up to: every one goes out.
		{name: "unbounded", inflightBytes: 1 << 30, wantAtMost: entries + 1, wantAtLeast: entries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSimWith(t, 1, 3, func(s *sim) { s.inflightBytes = tc.inflightBytes })
			s.lossy = false
			status := func(n *simNode) raft.Status {
				r := n.node.Replica(1)
				n.node.mu.Lock()
				defer n.node.mu.Unlock()
				return r.rn.Status()
			}
			var leader *simNode
			var follower uint64
			for range 3000 {
				s.step(false, false)
				for _, n := range s.nodes {
					st := status(n)
					if st.RaftState != raft.StateLeader {
						continue
					}
					for id, pr := range st.Progress {
						if id != n.id && pr.State == tracker.StateReplicate {
							leader, follower = n, id
						}
					}
				}
				if leader != nil {
					break
				}
			}
			if leader == nil {
				t.Fatal("no leader replicating to a follower")
			}
			s.mute = follower
			for i := range entries {
				if err := leader.node.Propose(1, append(bytes.Repeat([]byte{'x'}, entry), byte(i))); err != nil {
					t.Fatal(err)
				}
				s.step(false, false)
			}
			for range 30 {
				s.step(false, false)
			}
			st := status(leader)
			if st.RaftState != raft.StateLeader {
				t.Fatalf("node %d lost its leadership", leader.id)
			}
			pr := st.Progress[follower]
			t.Logf("%d appends in flight to follower %d", pr.Inflights.Count(), follower)
			if n := pr.Inflights.Count(); n > tc.wantAtMost || n < tc.wantAtLeast {
				t.Errorf("%d appends in flight to the muted follower %d (state %s), want %d to %d", n, follower, pr.State, tc.wantAtLeast, tc.wantAtMost)
			}
			// The other follower has every entry.
			for id, p := range st.Progress {
				if id != leader.id && id != follower && p.Match < st.HardState.GetCommit() {
					t.Errorf("follower %d matched %d of the leader's %d committed", id, p.Match, st.HardState.GetCommit())
				}
			}
			if st.HardState.GetCommit() < pr.Match+entries {
				t.Errorf("commit %d: the group did not commit the %d entries (muted follower matched %d)", st.HardState.GetCommit(), entries, pr.Match)
			}
		})
	}
}
