package raftnode

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/rafttest"
)

// envStorage adapts a LogStore to rafttest.Storage: each write is its own
// synced batch, as if the scheduler persisted one Ready for one group.
type envStorage struct {
	*LogStore
	eng *storage.Engine
	// snapshot returns the env's latest snapshot of this node (which
	// carries the env's state machine image, as a real snapshot's SST
	// would); nil until the node exists.
	snapshot func() (*pb.Snapshot, error)
}

func (s *envStorage) commit(f func(b *storage.Batch) error) error {
	b := s.eng.NewBatch()
	defer b.Close()
	if err := f(b); err != nil {
		return err
	}
	return b.Commit()
}

func (s *envStorage) SetHardState(hs *pb.HardState) error {
	return s.commit(func(b *storage.Batch) error { return s.LogStore.SetHardState(b, hs) })
}

func (s *envStorage) ApplySnapshot(snap *pb.Snapshot) error {
	return s.commit(func(b *storage.Batch) error { return s.LogStore.ApplySnapshot(b, snap) })
}

func (s *envStorage) Compact(i uint64) error {
	return s.commit(func(b *storage.Batch) error { return s.LogStore.Compact(b, i, nil) })
}

func (s *envStorage) Append(ents []*pb.Entry) error {
	return s.commit(func(b *storage.Batch) error { return s.LogStore.Append(b, ents) })
}

func (s *envStorage) Snapshot() (*pb.Snapshot, error) {
	if s.snapshot != nil {
		return s.snapshot()
	}
	return s.LogStore.Snapshot()
}

// needsRaftInternals are etcd's scripts that set a node's randomized
// election timeout through a hook only raft's own test binary has
// (raft.SetRandomizedElectionTimeout is defined in its _test.go files).
var needsRaftInternals = map[string]bool{
	"forget_leader.txt":       true,
	"prevote_checkquorum.txt": true,
}

// TestEtcdInteractionScripts runs etcd raft's own interaction scripts (the
// testdata of the go.etcd.io/raft/v3 module this build uses, read from the
// module cache, not copied here) with every node's log and hard state in a
// LogStore over Pebble instead of raft.MemoryStorage. The scripts' expected
// output was recorded with MemoryStorage, so any difference in what the
// log store returns (bounds, terms, truncation on conflict, compaction,
// snapshots) shows up as a diff in raft's behaviour.
func TestEtcdInteractionScripts(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.etcd.io/raft/v3").Output()
	if err != nil {
		t.Fatalf("locating the raft module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "testdata")
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no raft interaction scripts under %s (%v)", dir, err)
	}
	ran := 0
	for _, path := range files {
		name := filepath.Base(path)
		if needsRaftInternals[name] {
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			var stores []*envStorage
			var env *rafttest.InteractionEnv
			env = rafttest.NewInteractionEnv(&rafttest.InteractionOpts{
				OnConfig: func(cfg *raft.Config) {
					s := logStoreLike(t, eng, cfg.ID, cfg.Storage)
					idx := int(cfg.ID - 1)
					s.snapshot = func() (*pb.Snapshot, error) {
						h := env.Nodes[idx].History
						return h[len(h)-1], nil
					}
					stores = append(stores, s)
					cfg.Storage = s
				},
			})
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				res := env.Handle(t, *d)
				// The env keeps its own handle on each node's storage for
				// the Ready loop: point it at the log store too.
				for i := range env.Nodes {
					if i < len(stores) {
						env.Nodes[i].Storage = stores[i]
					}
				}
				return res
			})
		})
	}
	if ran == 0 {
		t.Fatal("no script ran")
	}
}

// logStoreLike returns a LogStore for node id holding what the env's
// fresh MemoryStorage holds (empty, or bootstrapped from a snapshot).
func logStoreLike(t *testing.T, eng *storage.Engine, id uint64, mem raft.Storage) *envStorage {
	t.Helper()
	ls, err := OpenLogStore(eng, id)
	if err != nil {
		t.Fatal(err)
	}
	s := &envStorage{LogStore: ls, eng: eng}
	hs, cs, err := mem.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := mem.FirstIndex()
	last, _ := mem.LastIndex()
	term, err := mem.Term(first - 1)
	if err != nil {
		t.Fatal(err)
	}
	if first > 1 || len(cs.GetVoters()) > 0 || len(cs.GetLearners()) > 0 {
		idx := first - 1
		if err := s.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: &idx, Term: &term, ConfState: cs}}); err != nil {
			t.Fatal(err)
		}
	}
	if last >= first {
		ents, err := mem.Entries(first, last+1, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ents); err != nil {
			t.Fatal(err)
		}
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		if err := s.SetHardState(hs); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
