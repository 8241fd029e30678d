package storage

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// readKey reads key's bare entry through a fresh Engine iterator bounded
// to it, and closes the iterator (to the pool, when it is current).
func readKey(t *testing.T, e *Engine, key string) (string, bool) {
	t.Helper()
	it, err := e.NewIter(IterOptions{LowerBound: []byte(key), UpperBound: []byte(key + "\x00")})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.First() {
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return "", false
	}
	v, err := it.UnsafeValue()
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

// TestIterPoolSeesEveryWrite is invariant 7: each way of writing to the
// engine is followed by a read through Engine.NewIter, which must see it
// although the iterators before it were pooled; and while nothing is
// written, the read is served by the pooled iterator itself.
func TestIterPoolSeesEveryWrite(t *testing.T) {
	e := openMem(t)
	writes := []struct {
		name  string
		write func(key, value string) error
	}{
		{"Batch.Commit", func(k, v string) error {
			b := e.NewWriteOnlyBatch()
			defer b.Close()
			if err := b.Put(MVCCKey{Key: []byte(k)}, []byte(v)); err != nil {
				return err
			}
			return b.Commit()
		}},
		{"Batch.CommitNoSync", func(k, v string) error {
			b := e.NewBatch()
			defer b.Close()
			if err := b.Put(MVCCKey{Key: []byte(k)}, []byte(v)); err != nil {
				return err
			}
			return b.CommitNoSync()
		}},
		{"ApplyBatchRepr", func(k, v string) error {
			b := e.NewWriteOnlyBatch()
			defer b.Close()
			if err := b.Put(MVCCKey{Key: []byte(k)}, []byte(v)); err != nil {
				return err
			}
			return e.ApplyBatchRepr(b.Repr())
		}},
		{"IngestBytes", func(k, v string) error {
			sb := NewSSTBuilder()
			if err := sb.Put(MVCCKey{Key: []byte(k)}, []byte(v)); err != nil {
				return err
			}
			data, err := sb.Finish()
			if err != nil {
				return err
			}
			return e.IngestBytes(context.Background(), data)
		}},
	}
	for round := range 3 {
		for _, w := range writes {
			key := "k/" + w.name
			want := fmt.Sprintf("v%d", round)
			// Pool an iterator of the state before the write.
			readKey(t, e, key)
			if e.iters.n.Load() == 0 {
				t.Fatalf("%s: no iterator pooled after a read with no write in flight", w.name)
			}
			if err := w.write(key, want); err != nil {
				t.Fatalf("%s: %v", w.name, err)
			}
			if n := e.iters.n.Load(); n != 0 {
				t.Fatalf("%s: %d iterators still pooled after a write", w.name, n)
			}
			if got, ok := readKey(t, e, key); !ok || got != want {
				t.Fatalf("%s, round %d: read %q (found %t), want %q", w.name, round, got, ok, want)
			}
		}
	}
	// No write since the last read: the next read reuses its iterator.
	it1, err := e.NewIter(IterOptions{LowerBound: []byte("a"), UpperBound: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	it1.Close()
	it2, err := e.NewIter(IterOptions{LowerBound: []byte("k/"), UpperBound: []byte("k0")})
	if err != nil {
		t.Fatal(err)
	}
	if it1 != it2 {
		t.Fatal("a read with no write since the last one opened a new iterator")
	}
	// Its new bounds hold: every key under k/, in order, and nothing else.
	n := 0
	for ok := it2.First(); ok; ok = it2.Next() {
		n++
	}
	if n != len(writes) {
		t.Fatalf("reused iterator with bounds [k/, k0) saw %d keys, want %d", n, len(writes))
	}
	it2.Close()
	// A flush writes nothing but replaces the memtable the pooled
	// iterator pins: the pool lets it go.
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	it3, err := e.NewIter(IterOptions{LowerBound: []byte("k/"), UpperBound: []byte("k0")})
	if err != nil {
		t.Fatal(err)
	}
	if it3 == it2 {
		t.Fatal("an iterator opened before a flush was handed out after it")
	}
	it3.Close()
	// So does a compaction, which replaces the files it pins.
	if err := e.Compact(context.Background(), []byte("a"), []byte("z")); err != nil {
		t.Fatal(err)
	}
	it4, err := e.NewIter(IterOptions{LowerBound: []byte("k/"), UpperBound: []byte("k0")})
	if err != nil {
		t.Fatal(err)
	}
	defer it4.Close()
	if it4 == it3 {
		t.Fatal("an iterator opened before a compaction was handed out after it")
	}
	n = 0
	for ok := it4.First(); ok; ok = it4.Next() {
		n++
	}
	if n != len(writes) {
		t.Fatalf("after the compaction the reads see %d keys, want %d", n, len(writes))
	}
}

// TestIterPoolConcurrentWrites races readers against a writer: a reader
// that starts after a write's Commit returned must see it (the writer
// publishes each key's number only then), whichever pooled or new
// iterator it gets.
func TestIterPoolConcurrentWrites(t *testing.T) {
	e := openMem(t)
	const writes = 2000
	var published atomic.Int64
	published.Store(-1)
	key := func(i int64) string { return fmt.Sprintf("w/%06d", i) }
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Go(func() {
		for i := int64(0); i < writes; i++ {
			b := e.NewWriteOnlyBatch()
			if err := b.Put(MVCCKey{Key: []byte(key(i))}, []byte("x")); err != nil {
				errs <- err
				return
			}
			if err := b.Commit(); err != nil {
				errs <- err
				return
			}
			b.Close()
			published.Store(i)
		}
	})
	for range 3 {
		wg.Go(func() {
			for {
				i := published.Load()
				if i >= 0 {
					it, err := e.NewIter(IterOptions{LowerBound: []byte(key(i)), UpperBound: []byte(key(i + 1))})
					if err != nil {
						errs <- err
						return
					}
					ok := it.First()
					it.Close()
					if !ok {
						errs <- fmt.Errorf("key %s, committed before the read began, not seen", key(i))
						return
					}
				}
				if i == writes-1 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestCloseWaitsForDrain: a flush or compaction ending drains the pool on
// a goroutine of its own; Engine.Close waits for that drain to close the
// iterators it took before the DB closes. Before, Close only drained what
// was still pooled, and a drain that had taken the iterators just before
// closed them after the DB: Pebble panicked ("evicting in-use file").
func TestCloseWaitsForDrain(t *testing.T) {
	e, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := readKey(t, e, "a"); ok {
		t.Fatal("an empty engine has key a")
	}
	if n := e.iters.n.Load(); n != 1 {
		t.Fatalf("%d pooled iterators after a read, want 1", n)
	}
	took := make(chan struct{})
	var dbOpenAtClose atomic.Bool
	e.iters.testingDrainHook = func() {
		close(took)
		// Hold the taken iterators until Close has begun: the drain
		// then closes them while Close runs.
		for !e.iters.isClosed() {
			runtime.Gosched()
		}
		// Close waits in drains.Wait, so the DB is still open: reading
		// through it must work.
		_, closer, err := e.db.Get([]byte("x"))
		if err == nil {
			closer.Close()
		}
		dbOpenAtClose.Store(err == nil || errors.Is(err, pebble.ErrNotFound))
	}
	e.iters.invalidate()
	<-took
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !dbOpenAtClose.Load() {
		t.Fatal("the drain ran after the DB was closed")
	}
}
