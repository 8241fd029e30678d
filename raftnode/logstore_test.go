package raftnode

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestLogStore runs testdata/logstore: the log store's operations, its
// bounds and contents after each, and what survives a reopen and a crash
// (a crash keeps only what was synced: every commit here is synced).
//
//	append            lines "index term"; one batch
//	hard-state term=T vote=V commit=C
//	compact index=I [voters=(...)]
//	apply-snapshot index=I term=T voters=(...)
//	entries lo=L hi=H [max-size=S]
//	term i=I
//	print             bounds, hard state, snapshot metadata, log
//	reopen            a new LogStore over the same engine
//	crash             the engine's filesystem as a crash leaves it, reopened
func TestLogStore(t *testing.T) {
	datadriven.Walk(t, "testdata/logstore", func(t *testing.T, path string) {
		fs := vfs.NewCrashableMem()
		open := func() (*storage.Engine, *LogStore) {
			eng, err := storage.Open("", storage.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			s, err := OpenLogStore(eng, 7)
			if err != nil {
				t.Fatal(err)
			}
			return eng, s
		}
		eng, s := open()
		defer func() { eng.Close() }()
		commit := func(f func(b *storage.Batch) error) error {
			b := eng.NewBatch()
			defer b.Close()
			if err := f(b); err != nil {
				return err
			}
			return b.Commit()
		}
		u64 := func(d *datadriven.TestData, key string) uint64 {
			var v uint64
			d.ScanArgs(t, key, &v)
			return v
		}
		confState := func(d *datadriven.TestData) *pb.ConfState {
			if !d.HasArg("voters") {
				return nil
			}
			var voters []uint64
			d.ScanArgs(t, "voters", &voters)
			return &pb.ConfState{Voters: voters}
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var err error
			switch d.Cmd {
			case "append":
				var ents []*pb.Entry
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					i, _ := strconv.ParseUint(f[0], 10, 64)
					term, _ := strconv.ParseUint(f[1], 10, 64)
					ents = append(ents, &pb.Entry{Index: &i, Term: &term, Data: []byte(fmt.Sprintf("e%d.%d", i, term))})
				}
				err = commit(func(b *storage.Batch) error { return s.Append(b, ents) })
			case "hard-state":
				term, vote, c := u64(d, "term"), u64(d, "vote"), u64(d, "commit")
				err = commit(func(b *storage.Batch) error {
					return s.SetHardState(b, &pb.HardState{Term: &term, Vote: &vote, Commit: &c})
				})
			case "compact":
				err = commit(func(b *storage.Batch) error { return s.Compact(b, u64(d, "index"), confState(d)) })
			case "apply-snapshot":
				i, term := u64(d, "index"), u64(d, "term")
				err = commit(func(b *storage.Batch) error {
					return s.ApplySnapshot(b, &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: &i, Term: &term, ConfState: confState(d)}})
				})
			case "entries":
				max := uint64(1 << 62)
				if d.HasArg("max-size") {
					max = u64(d, "max-size")
				}
				ents, err := s.Entries(u64(d, "lo"), u64(d, "hi"), max)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				var sb strings.Builder
				for _, e := range ents {
					fmt.Fprintf(&sb, "%d/%d %s\n", e.GetIndex(), e.GetTerm(), e.GetData())
				}
				return sb.String()
			case "term":
				term, err := s.Term(u64(d, "i"))
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return fmt.Sprintf("%d\n", term)
			case "print":
				return dump(t, s)
			case "reopen":
				if s, err = OpenLogStore(eng, 7); err != nil {
					t.Fatal(err)
				}
				return dump(t, s)
			case "crash":
				crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
				eng.Close()
				fs = crashed
				eng, s = open()
				return dump(t, s)
			default:
				t.Fatalf("unknown command %s", d.Cmd)
			}
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return dump(t, s)
		})
	})
}

// dump prints what raft can read from s.
func dump(t *testing.T, s *LogStore) string {
	t.Helper()
	var sb strings.Builder
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	hs, cs, err := s.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := s.Snapshot()
	fmt.Fprintf(&sb, "first=%d last=%d", first, last)
	if hs != nil {
		fmt.Fprintf(&sb, " hs=(term %d vote %d commit %d)", hs.GetTerm(), hs.GetVote(), hs.GetCommit())
	}
	fmt.Fprintf(&sb, " snap=(index %d term %d voters %v)\n", snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm(), cs.GetVoters())
	if last >= first {
		ents, err := s.Entries(first, last+1, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, e := range ents {
			parts = append(parts, fmt.Sprintf("%d/%d", e.GetIndex(), e.GetTerm()))
		}
		fmt.Fprintf(&sb, "log: %s\n", strings.Join(parts, " "))
	}
	if _, err := s.Entries(first-1, first, 1); first > 1 && !errors.Is(err, raft.ErrCompacted) {
		t.Errorf("entry before first: %v, want ErrCompacted", err)
	}
	return sb.String()
}

// TestLogStoreEntryCache: the entries just appended are read back from
// the cache (rule C1), a side-loaded one without reading its file, and
// what the cache serves is what the log holds after each change of it: a
// replaced tail, an apply, a compaction, an eviction, a snapshot.
func TestLogStoreEntryCache(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s, err := OpenLogStore(eng, 3)
	if err != nil {
		t.Fatal(err)
	}
	s.sideloader = &sideSM{}
	commit := func(f func(b *storage.Batch) error) { t.Helper(); commitBatch(t, eng, f) }
	// check reads [lo, hi) and wants the terms and data of want, and
	// sideReads side-loaded payloads read back so far.
	check := func(lo, hi uint64, sideReads int64, want ...*pb.Entry) {
		t.Helper()
		got, err := s.Entries(lo, hi, 1<<30)
		if err != nil {
			t.Fatalf("entries [%d, %d): %v", lo, hi, err)
		}
		if len(got) != len(want) {
			t.Fatalf("entries [%d, %d): %d, want %d", lo, hi, len(got), len(want))
		}
		for i, e := range got {
			if e.GetIndex() != want[i].GetIndex() || e.GetTerm() != want[i].GetTerm() || string(e.GetData()) != string(want[i].GetData()) {
				t.Fatalf("entries [%d, %d): entry %d is %d/%d %q, want %d/%d %q", lo, hi, i, e.GetIndex(), e.GetTerm(), e.GetData(),
					want[i].GetIndex(), want[i].GetTerm(), want[i].GetData())
			}
			if term, err := s.Term(e.GetIndex()); err != nil || term != e.GetTerm() {
				t.Fatalf("term of %d: %d, %v, want %d", e.GetIndex(), term, err, e.GetTerm())
			}
		}
		if n := s.sideReads.Load(); n != sideReads {
			t.Fatalf("entries [%d, %d): %d side-loaded payloads read back, want %d", lo, hi, n, sideReads)
		}
	}
	e1, e2, e3 := ent(1, 1, "a"), ent(2, 1, sidePrefix+"sst|tail"), ent(3, 1, "c")
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{e1, e2, e3}) })
	// Just appended: all from the cache, the side-loaded payload too.
	check(1, 4, 0, e1, e2, e3)
	if n := s.cacheHits.Load(); n != 3 {
		t.Fatalf("%d entries from the cache, want 3", n)
	}
	// maxSize cuts the cache's entries as the engine's (at least one).
	if got, err := s.Entries(1, 4, 1); err != nil || len(got) != 1 {
		t.Fatalf("entries [1, 4) of at most 1 byte: %d entries, %v; want 1", len(got), err)
	}

	// A new leader's entry replaces the tail at 3 and adds 4.
	e3b, e4 := ent(3, 2, "c2"), ent(4, 2, sidePrefix+"sst4")
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{e3b, e4}) })
	check(1, 5, 0, e1, e2, e3b, e4)

	// Applied through 2: those come from the engine (the payload of 2
	// from its file), the rest still from the cache.
	s.AppliedTo(2)
	check(1, 5, 1, e1, e2, e3b, e4)
	check(3, 5, 1, e3b, e4)

	// Compacted through 3: gone from both.
	commit(func(b *storage.Batch) error { return s.Compact(b, 3, nil) })
	if _, err := s.Entries(3, 5, 1<<30); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("entries [3, 5) after the compaction: %v, want ErrCompacted", err)
	}
	check(4, 5, 1, e4)

	// Over the bound, the oldest leave the cache first.
	s.cacheMax = uint64(proto.Size(e4)) + 1
	e5 := ent(5, 2, "e")
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{e5}) })
	check(5, 6, 1, e5)
	check(4, 6, 2, e4, e5)

	// A snapshot empties it.
	commit(func(b *storage.Batch) error {
		return s.ApplySnapshot(b, &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: u64p(9), Term: u64p(3)}})
	})
	e10 := ent(10, 3, "j")
	commit(func(b *storage.Batch) error { return s.Append(b, []*pb.Entry{e10}) })
	check(10, 11, 2, e10)
	if _, err := s.Term(5); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("term of 5 after the snapshot: %v, want ErrCompacted", err)
	}
}

func u64p(v uint64) *uint64 { return &v }

// commitBatch runs f on a new batch of eng and commits it, failing the
// test on either's error.
func commitBatch(t *testing.T, eng *storage.Engine, f func(b *storage.Batch) error) {
	t.Helper()
	b := eng.NewBatch()
	defer b.Close()
	if err := f(b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}
