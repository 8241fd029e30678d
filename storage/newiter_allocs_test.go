package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestNewIterBoundsAllocs: an iterator built afresh (here through an
// indexed batch, which never takes one from the engine's pool; on the
// engine, one built while writes invalidate the pool, as an UPDATE's
// locking read is under simple-update) encodes its bounds in the seek
// key's buffer, which Pebble copies them from: building, seeking and
// closing it allocates the Iterator alone, where each bound's encoding
// made one more (issue 22, twenty-fifth session).
func TestNewIterBoundsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts and drops sync.Pool's contents")
	}
	eng, err := Open("", Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	row := []byte("\x03accounts/1\x00")
	end := []byte("\x03accounts/1\x01")
	w := eng.NewBatch()
	if err := w.Put(MVCCKey{Key: row, Timestamp: ts(10, 0)}, []byte("value")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	b := eng.NewBatch()
	defer b.Close()
	var failed string
	n := testing.AllocsPerRun(100, func() {
		it, err := b.NewIter(IterOptions{LowerBound: row, UpperBound: end})
		if err != nil {
			t.Fatal(err)
		}
		if !it.First() || string(it.UnsafeKey().Key) != string(row) {
			failed = "the row not found"
		} else if it.Next() {
			failed = "a key past the upper bound read"
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if failed != "" {
		t.Fatal(failed)
	}
	if n > 1 {
		t.Errorf("an iterator over a row's span allocated %.0f objects, want 1", n)
	}
}
