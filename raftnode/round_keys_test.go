package raftnode

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

// keySM applies each entry as one write of its own key (a tablet's
// one-row write), so that a round's count of writes holds the data too.
type keySM struct{ nopSM }

func (keySM) Apply(b *storage.Batch, e *pb.Entry) error {
	if len(e.GetData()) == 0 {
		return nil
	}
	return b.Put(storage.MVCCKey{Key: keys.TabletReplicated(1, "data")}, e.GetData())
}

// soloRounds returns a node whose sole voter of tablet 1 leads, on an
// in-memory engine.
func soloRounds(t *testing.T, cfg Config, sm StateMachine) (*Node, *storage.Engine) {
	t.Helper()
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	n := NewNode(cfg, eng, nil)
	if _, err := n.AddReplica(1, []uint64{1}, sm); err != nil {
		t.Fatal(err)
	}
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	if st := n.Replica(1).Status(); st.RaftState != raft.StateLeader {
		t.Fatalf("the sole voter is %v, not leader", st.RaftState)
	}
	return n, eng
}

// TestRoundWrites counts the engine commits and the writes (memtable
// insertions) of a sole voter's rounds, with the log truncated every
// LogKeep entries as under load. A round of one proposal writes, in its
// first pass, the entry (synced), then in its second pass the entry's
// effects and the applied index; the truncation deletes each entry once.
// The second pass also wrote the hard state for its new commit index
// alone, in a commit of its own: 3 commits and 4 writes per round (plus
// the truncation's), where 2 commits and 3 writes do. With two proposals
// per round the applied index was written per entry, now once per round.
func TestRoundWrites(t *testing.T) {
	const rounds, keep = 200, 20
	for _, per := range []int{1, 2} {
		n, _ := soloRounds(t, Config{NodeID: 1, LogKeep: keep}, keySM{})
		st := n.Stats()
		commits0, keys0 := st.Commits.Load(), st.CommittedKeys.Load()
		for i := range rounds {
			for j := range per {
				if err := n.Propose(1, []byte{byte(i), byte(j)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := n.ProcessReady(); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := n.Replica(1).Applied(), uint64(rounds*per); got < want {
			t.Fatalf("%d per round: applied index %d after %d proposals", per, got, want)
		}
		commits := float64(st.Commits.Load()-commits0) / rounds
		writes := float64(st.CommittedKeys.Load()-keys0) / rounds
		// Per round: the entries, their effects, one applied index; the
		// truncation deletes each entry (and writes the snapshot
		// metadata, once per truncation) and commits once per truncation.
		truncs := float64(per) / keep
		wantCommits := 2 + truncs
		wantWrites := float64(per) + float64(per) + 1 + float64(per) + truncs
		t.Logf("%d proposals per round: %.3f commits, %.3f writes per round", per, commits, writes)
		if commits > wantCommits+0.05 {
			t.Errorf("%d proposals per round: %.3f engine commits per round, want %.3f", per, commits, wantCommits)
		}
		if writes > wantWrites+0.05 {
			t.Errorf("%d proposals per round: %.3f writes per round, want %.3f", per, writes, wantWrites)
		}
	}
}

// TestRestartPastWrittenCommit: the hard state's commit index is not
// written when it alone changed (invariant 10), so a sole voter's
// written commit index stays behind its applied index; a node opened on
// the same engine raises it to the applied index (raft refuses an
// applied index past its commit), applies no entry twice, and commits
// new proposals.
func TestRestartPastWrittenCommit(t *testing.T) {
	sm := &entryCountSM{}
	n, eng := soloRounds(t, Config{NodeID: 1}, sm)
	for i := range 20 {
		if err := n.Propose(1, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	applied := n.Replica(1).Applied()
	ls, err := OpenLogStore(eng, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c := ls.HardState().GetCommit(); c >= applied {
		t.Fatalf("written commit index %d, applied %d: the commit index alone was written", c, applied)
	}
	before := sm.n
	n2 := NewNode(Config{NodeID: 1}, eng, nil)
	if _, err := n2.AddReplica(1, []uint64{1}, sm); err != nil {
		t.Fatal(err)
	}
	if err := n2.Campaign(1); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := n2.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	if sm.n != before {
		t.Fatalf("%d entries applied again after the restart", sm.n-before)
	}
	if err := n2.Propose(1, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.ProcessReady(); err != nil {
		t.Fatal(err)
	}
	if sm.n != before+1 {
		t.Fatalf("%d entries applied after the restart's proposal, want 1", sm.n-before)
	}
	if got := n2.Replica(1).Applied(); got <= applied {
		t.Fatalf("applied index %d after the restart, %d before it", got, applied)
	}
}

// entryCountSM counts the non-empty entries it applies.
type entryCountSM struct {
	nopSM
	n int
}

func (m *entryCountSM) Apply(b *storage.Batch, e *pb.Entry) error {
	if len(e.GetData()) > 0 {
		m.n++
	}
	return nil
}
