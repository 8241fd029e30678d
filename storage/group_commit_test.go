package storage

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestGroupCommit measures invariant 2's fsync sharing on a real on-disk
// engine. It counts WAL syncs through simfs, never time: committed alone,
// every synced batch costs at least one WAL sync; committed by 16 goroutines
// at once, batches that arrive while a sync is in flight ride on the next
// one, so a few hundred commits need strictly fewer syncs than commits. The
// SSD profile adds 0.1 ms to each sync so that a fast tmpfs cannot make
// every sync finish before the next commit arrives.
func TestGroupCommit(t *testing.T) {
	fs := simfs.New(vfs.Default, simfs.Options{Profile: simfs.SSD})
	e, err := Open(t.TempDir(), Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	commit := func(key string) error {
		b := e.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(MVCCKey{Key: []byte(key)}, []byte("v")); err != nil {
			return err
		}
		return b.Commit()
	}

	// Control: sequential commits cannot share, so the counter must see at
	// least one WAL sync per commit (otherwise it is not counting them).
	const sequential = 20
	before := fs.Stats().WALSyncs
	for i := range sequential {
		if err := commit(fmt.Sprintf("seq%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if syncs := fs.Stats().WALSyncs - before; syncs < sequential {
		t.Fatalf("%d sequential synced commits made only %d WAL syncs", sequential, syncs)
	}

	const goroutines, perGoroutine = 16, 25
	commits := int64(goroutines * perGoroutine)
	before = fs.Stats().WALSyncs
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for i := range perGoroutine {
				if err := commit(fmt.Sprintf("g%02d/%03d", g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	syncs := fs.Stats().WALSyncs - before
	if syncs == 0 {
		t.Fatal("no WAL syncs counted for synced commits")
	}
	t.Logf("%d concurrent commits, %d WAL syncs: %.1f commits/sync", commits, syncs, float64(commits)/float64(syncs))
	if syncs >= commits {
		t.Fatalf("%d concurrent commits needed %d WAL syncs: commits are not sharing fsyncs", commits, syncs)
	}
}
