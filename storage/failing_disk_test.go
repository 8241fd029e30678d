package storage

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCommitRefusedOnFailingDisk checks invariant 5: when the disk fails
// under a commit, the commit is not acknowledged, the engine refuses further
// writes and reads, and after a restart on the healed disk every
// acknowledged write is there.
func TestCommitRefusedOnFailingDisk(t *testing.T) {
	fs := simfs.New(vfs.NewMem(), simfs.Options{})
	e, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	put := func(e *Engine, k string) error {
		b := e.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(MVCCKey{Key: []byte(k)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		return b.Commit()
	}
	if err := put(e, "acked"); err != nil {
		t.Fatal(err)
	}

	errFull := errors.New("no space left on device")
	fs.InjectWriteError(errFull)
	err = put(e, "refused")
	if !errors.Is(err, ErrEngineFailed) || !errors.Is(err, errFull) {
		t.Fatalf("commit on a failing disk returned %v, want ErrEngineFailed wrapping the disk error", err)
	}
	fs.InjectWriteError(nil)
	// Healing the disk does not revive the engine: Pebble's commit pipeline
	// is gone, and the refused write must not be read back.
	if err := put(e, "later"); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("commit after failure returned %v", err)
	}
	if err := e.ApplyBatchRepr(nil); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("ApplyBatchRepr after failure returned %v", err)
	}
	if _, _, err := e.Get(MVCCKey{Key: []byte("refused")}); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("Get after failure returned %v", err)
	}
	if _, err := e.NewIter(IterOptions{}); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("NewIter after failure returned %v", err)
	}
	snap := e.NewSnapshot()
	if _, _, err := snap.Get(MVCCKey{Key: []byte("refused")}); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("snapshot Get after failure returned %v", err)
	}
	snap.Close()
	// Close reports the disk error it saw; the restart is what matters.
	_ = e.Close()

	e2, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if _, ok, err := e2.Get(MVCCKey{Key: []byte("acked")}); err != nil || !ok {
		t.Fatalf("acknowledged write lost after restart: ok=%v err=%v", ok, err)
	}
	if err := put(e2, "after-restart"); err != nil {
		t.Fatalf("commit after restart on a healed disk: %v", err)
	}
}
