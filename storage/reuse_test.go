package storage

import (
	"bytes"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/storage/simfs"
)

// TestReusingReader reads one key in every 50 of a table, each as its own
// short scan in key order (a lookup join's sorted batch), through fresh
// iterators and through one ReusingReader, on a disk playing an HDD with
// a block cache of 64 KiB, far smaller than the table: every answer is
// checked, and the disk's reads counted. A fresh iterator looks its index
// and data blocks up again for each key and, the cache having dropped
// them, reads them again; the reused iterator holds them, and reads each
// data block once, in order. So does the engine's pooled iterator
// (iterpool.go), handed out again while nothing is written.
func TestReusingReader(t *testing.T) {
	const rows = 50000
	mem := vfs.NewMem()
	loadRA(t, mem, rows)
	fs := simfs.New(mem, simfs.Options{Profile: simfs.HDD, Sleep: func(time.Duration) {}})
	e, err := Open("db", Options{FS: fs, CacheSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	lookups := func(r Reader, reverse bool) (simfs.Stats, error) {
		before := fs.Stats()
		for i := 0; i < rows; i += 50 {
			it, err := r.NewIter(IterOptions{LowerBound: raKey(i), UpperBound: raKey(i + 1)})
			if err != nil {
				return simfs.Stats{}, err
			}
			ok := it.First()
			if reverse {
				ok = it.Last()
			}
			if !ok {
				it.Close()
				t.Fatalf("key %d: not found (%v)", i, it.Err())
			}
			v, err := it.UnsafeValue()
			if err != nil || !bytes.Equal(it.UnsafeKey().Key, raKey(i)) || !bytes.Equal(v, raValue(i)) {
				it.Close()
				t.Fatalf("key %d: read %q = %q (%v)", i, it.UnsafeKey().Key, v, err)
			}
			if it.Next() {
				t.Fatalf("key %d: the iterator goes past its upper bound to %q", i, it.UnsafeKey().Key)
			}
			it.Close()
		}
		after := fs.Stats()
		return simfs.Stats{Reads: after.Reads - before.Reads, Seeks: after.Seeks - before.Seeks}, nil
	}
	// Engine.NewIter would hand back its pooled iterator (iterpool.go),
	// which holds its blocks as a ReusingReader's does: the baseline opens
	// a new Pebble iterator per key.
	fresh, err := lookups(freshReader{e}, false)
	if err != nil {
		t.Fatal(err)
	}
	pooled, err := lookups(e, false)
	if err != nil {
		t.Fatal(err)
	}
	rr := e.NewReusingReader()
	reused, err := lookups(rr, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.all) != 1 {
		t.Errorf("the reusing reader built %d iterators for scans one after the other, want 1", len(rr.all))
	}
	// The same iterator, reset to each key and read backwards.
	if _, err := lookups(rr, true); err != nil {
		t.Fatal(err)
	}
	if err := rr.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lookups: fresh iterators %d reads, %d seeks; one reused %d reads, %d seeks; pooled %d reads, %d seeks", rows/50, fresh.Reads, fresh.Seeks, reused.Reads, reused.Seeks, pooled.Reads, pooled.Seeks)
	// Half the reads at most, and walking forward: a few seeks (the
	// first blocks), the rest adjacent or a short skip ahead. Under
	// -race Pebble's invariants checks sometimes drop the block an
	// iterator holds on purpose: only the answers count there.
	if raceEnabled {
		return
	}
	if reused.Reads*2 > fresh.Reads || reused.Seeks*4 > reused.Reads+8 {
		t.Errorf("reused iterator: %d reads (%d seeks), fresh ones %d: want at most half, and few seeks", reused.Reads, reused.Seeks, fresh.Reads)
	}
	// Engine.NewIter's pooled iterator, with no write in between, is one
	// iterator reset to each key as well.
	if pooled.Reads*2 > fresh.Reads || pooled.Seeks*4 > pooled.Reads+8 {
		t.Errorf("pooled iterator: %d reads (%d seeks), fresh ones %d: want at most half, and few seeks", pooled.Reads, pooled.Seeks, fresh.Reads)
	}
}

// freshReader opens a new Pebble iterator for every NewIter, bypassing the
// engine's pool.
type freshReader struct{ e *Engine }

func (r freshReader) Get(key MVCCKey) ([]byte, bool, error) { return r.e.Get(key) }

func (r freshReader) NewIter(opts IterOptions) (*Iterator, error) { return newIter(r.e, r.e.db, opts) }
