package raftnode

import (
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestLogStoreShared: a group is shared (its lone voter's leases wait out
// the clock offset) once its configuration had several voters, once it
// took a leader's snapshot, or when marked before opening (the right side
// of a split of a shared group); the mark survives reopening, and a group
// only ever led here is not shared.
func TestLogStoreShared(t *testing.T) {
	snap := func(index uint64, voters ...uint64) *pb.Snapshot {
		term := uint64(1)
		return &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: &index, Term: &term, ConfState: &pb.ConfState{Voters: voters}}}
	}
	for _, tc := range []struct {
		name string
		// before runs on the engine before the store is opened.
		before func(t *testing.T, eng *storage.Engine)
		steps  func(t *testing.T, s *LogStore, b *storage.Batch)
		want   bool
	}{
		{name: "bootstrapped alone", steps: func(t *testing.T, s *LogStore, b *storage.Batch) {
			must(t, s.ApplySnapshot(b, snap(1, 1)))
		}, want: false},
		{name: "alone, conf rewritten alone", steps: func(t *testing.T, s *LogStore, b *storage.Batch) {
			must(t, s.ApplySnapshot(b, snap(1, 1)))
			must(t, s.SetConfState(b, &pb.ConfState{Voters: []uint64{1}, Learners: []uint64{2}}))
		}, want: false},
		{name: "bootstrapped with three voters", steps: func(t *testing.T, s *LogStore, b *storage.Batch) {
			must(t, s.ApplySnapshot(b, snap(1, 1, 2, 3)))
		}, want: true},
		{name: "grew then shrank to one voter", steps: func(t *testing.T, s *LogStore, b *storage.Batch) {
			must(t, s.ApplySnapshot(b, snap(1, 1)))
			must(t, s.SetConfState(b, &pb.ConfState{Voters: []uint64{1, 2}}))
			must(t, s.SetConfState(b, &pb.ConfState{Voters: []uint64{1}}))
		}, want: true},
		{name: "joint configuration", steps: func(t *testing.T, s *LogStore, b *storage.Batch) {
			must(t, s.ApplySnapshot(b, snap(1, 2)))
			must(t, s.SetConfState(b, &pb.ConfState{Voters: []uint64{2}, VotersOutgoing: []uint64{1}}))
		}, want: true},
		{name: "a leader's snapshot naming one voter", steps: func(t *testing.T, s *LogStore, b *storage.Batch) {
			must(t, s.ApplySnapshot(b, snap(40, 1)))
		}, want: true},
		{name: "marked before opening", before: func(t *testing.T, eng *storage.Engine) {
			must(t, MarkShared(eng, 7))
		}, steps: func(t *testing.T, s *LogStore, b *storage.Batch) {
			must(t, s.ApplySnapshot(b, snap(1, 1)))
		}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			if tc.before != nil {
				tc.before(t, eng)
			}
			s, err := OpenLogStore(eng, 7)
			if err != nil {
				t.Fatal(err)
			}
			b := eng.NewBatch()
			tc.steps(t, s, b)
			must(t, b.Commit())
			b.Close()
			if got := s.Shared(); got != tc.want {
				t.Fatalf("Shared() = %v, want %v", got, tc.want)
			}
			s2, err := OpenLogStore(eng, 7)
			if err != nil {
				t.Fatal(err)
			}
			if got := s2.Shared(); got != tc.want {
				t.Fatalf("after reopening: Shared() = %v, want %v", got, tc.want)
			}
			// Another tablet's mark is not this one's.
			other, err := OpenLogStore(eng, 8)
			if err != nil {
				t.Fatal(err)
			}
			if other.Shared() {
				t.Fatal("tablet 8 is shared by tablet 7's history")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
