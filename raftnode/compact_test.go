package raftnode

import (
	"encoding/binary"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestCompactWritesNoRangeDeletion: a log truncation deletes its entries
// one key at a time, so it leaves no range deletion in the memtable, over
// which Pebble would build a range-deletion iterator for every later read
// of any key (an object per Get or iterator until the memtable is
// flushed); a stretch longer than compactPointMax is still one range
// deletion. Either way the log holds exactly the entries after the
// compaction point.
func TestCompactWritesNoRangeDeletion(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s, err := OpenLogStore(eng, 7)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(f func(b *storage.Batch) error) (ranged bool, deleted int) {
		t.Helper()
		b := eng.NewBatch()
		defer b.Close()
		if err := f(b); err != nil {
			t.Fatal(err)
		}
		ranged, err := storage.VisitReprKeys(b.Repr(), func([]byte) { deleted++ })
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		return ranged, deleted
	}
	appendTo := func(from, to uint64) {
		t.Helper()
		var ents []*pb.Entry
		for i := from; i <= to; i++ {
			ents = append(ents, ent(i, 1, "x"))
		}
		commit(func(b *storage.Batch) error { return s.Append(b, ents) })
		s.AppliedTo(to)
	}
	// held lists the indexes of the entries the engine holds.
	held := func() (lo, hi uint64, n int) {
		t.Helper()
		start := keys.TabletLocal(7, entrySuffix)
		end := keys.TabletLocal(7, entrySuffix+"\xff")
		it, err := eng.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for ok := it.SeekGE(storage.MVCCKey{Key: start}); ok; ok = it.Next() {
			i := binary.BigEndian.Uint64(it.UnsafeKey().Key[len(start):])
			if n == 0 {
				lo = i
			}
			if n > 0 && i != hi+1 {
				t.Fatalf("entry %d follows %d", i, hi)
			}
			hi = i
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return lo, hi, n
	}
	user := storage.MVCCKey{Key: []byte("user key")}
	getAllocs := func() float64 {
		return testing.AllocsPerRun(50, func() {
			if _, _, err := eng.Get(user); err != nil {
				t.Fatal(err)
			}
		})
	}

	appendTo(1, 100)
	before := getAllocs()
	ranged, n := commit(func(b *storage.Batch) error { return s.Compact(b, 40, nil) })
	if ranged || n != 40+1 { // 40 entries and the snapshot metadata
		t.Fatalf("compaction through 40: ranged %v, %d point writes; want no range deletion, 41", ranged, n)
	}
	if lo, hi, n := held(); lo != 41 || hi != 100 || n != 60 {
		t.Fatalf("log holds [%d, %d] (%d entries); want [41, 100]", lo, hi, n)
	}
	if after := getAllocs(); after != before {
		t.Fatalf("a Get allocates %.0f objects after the compaction, %.0f before", after, before)
	}
	// The next deletes from where the last stopped.
	ranged, n = commit(func(b *storage.Batch) error { return s.Compact(b, 90, nil) })
	if ranged || n != 50+1 {
		t.Fatalf("compaction through 90: ranged %v, %d point writes; want no range deletion, 51", ranged, n)
	}
	if lo, hi, n := held(); lo != 91 || hi != 100 || n != 10 {
		t.Fatalf("log holds [%d, %d] (%d entries); want [91, 100]", lo, hi, n)
	}

	// A stretch longer than compactPointMax: one range deletion.
	appendTo(101, 100+compactPointMax+20)
	ranged, _ = commit(func(b *storage.Batch) error { return s.Compact(b, 100+compactPointMax+10, nil) })
	if !ranged {
		t.Fatalf("compaction of %d entries wrote no range deletion", compactPointMax+20)
	}
	if lo, hi, n := held(); lo != 100+compactPointMax+11 || hi != 100+compactPointMax+20 || n != 10 {
		t.Fatalf("log holds [%d, %d] (%d entries); want the last 10", lo, hi, n)
	}

	// A snapshot deletes the rest, one key each too.
	ranged, n = commit(func(b *storage.Batch) error {
		return s.ApplySnapshot(b, &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: u64p(200 + compactPointMax), Term: u64p(2)}})
	})
	if ranged || n < 10 {
		t.Fatalf("snapshot: ranged %v, %d point writes; want no range deletion, the 10 entries and the metadata", ranged, n)
	}
	if _, _, n := held(); n != 0 {
		t.Fatalf("log holds %d entries after the snapshot", n)
	}
	// A replaced tail: deleted one key each.
	appendTo(201+compactPointMax, 230+compactPointMax)
	ranged, _ = commit(func(b *storage.Batch) error {
		return s.Append(b, []*pb.Entry{ent(211+compactPointMax, 3, "y")})
	})
	if ranged {
		t.Fatal("a replaced tail wrote a range deletion")
	}
	if lo, hi, n := held(); lo != 201+compactPointMax || hi != 211+compactPointMax || n != 11 {
		t.Fatalf("log holds [%d, %d] (%d entries) after the replaced tail; want 11 up to the new entry", lo, hi, n)
	}
}
