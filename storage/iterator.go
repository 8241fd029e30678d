package storage

import (
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Iterator walks engine keys in the order of invariant 1. Positioning
// methods return whether the iterator is valid; Err reports an error that
// made it invalid.
type Iterator struct {
	it     *pebble.Iterator
	prefix bool
	buf    []byte
	key    MVCCKey
	err    error
	// popts and bufArr come with the Iterator's one allocation: Pebble
	// copies its options, and most seek keys fit the array, so opening and
	// seeking an iterator for a point read allocates nothing else here.
	popts  pebble.IterOptions
	bufArr [64]byte
	// reuse, when set, takes the iterator back on Close (ReusingReader);
	// batch likewise (Engine.NewReusingBatch).
	reuse *ReusingReader
	batch *Batch
	// plan reads the files of a scan ahead (IterOptions.Scan); Close
	// stops it.
	plan *scanPlan
	// planEnd: the plan ends where the iterator's bounds do (no ScanEnd
	// beyond them).
	planEnd bool
	// pool, when set, takes the iterator back on Close while it is
	// current (iterpool.go); gen is the write generation its view is of.
	pool *iterPool
	gen  uint64
	// bounds holds the encoded bounds of a pooled iterator's next use
	// (Pebble copies them).
	bounds []byte
	// seeks counts the seeks (Engine.Seeks; nil: not counted).
	seeks *atomic.Uint64
}

// counted counts a seek (Engine.Seeks).
func (i *Iterator) counted() {
	if i.seeks != nil {
		i.seeks.Add(1)
	}
}

func (i *Iterator) decode(valid bool) bool {
	if !valid {
		return false
	}
	k, err := DecodeMVCCKey(i.it.Key())
	if err != nil {
		i.err = err
		return false
	}
	i.key = k
	return true
}

// SeekGE positions at the first entry >= key. With a zero timestamp that is
// the key's bare entry or, failing that, its newest version.
func (i *Iterator) SeekGE(key MVCCKey) bool {
	i.counted()
	i.buf = key.Encode(i.buf[:0])
	if i.prefix {
		return i.decode(i.it.SeekPrefixGE(i.buf))
	}
	return i.decode(i.it.SeekGE(i.buf))
}

// SeekLT positions at the last entry < key.
func (i *Iterator) SeekLT(key MVCCKey) bool {
	i.counted()
	i.buf = key.Encode(i.buf[:0])
	return i.decode(i.it.SeekLT(i.buf))
}

// First positions at the first entry within the bounds.
func (i *Iterator) First() bool {
	i.counted()
	return i.decode(i.it.First())
}

// Last positions at the last entry within the bounds.
func (i *Iterator) Last() bool {
	i.counted()
	return i.decode(i.it.Last())
}

// Next moves to the next entry.
func (i *Iterator) Next() bool { return i.decode(i.it.Next()) }

// Prev moves to the previous entry.
func (i *Iterator) Prev() bool { return i.decode(i.it.Prev()) }

// NextKey moves to the first entry of the next user key, skipping the
// remaining versions of the current one.
func (i *Iterator) NextKey() bool {
	if i.prefix {
		return false
	}
	return i.decode(i.it.NextPrefix())
}

// Valid reports whether the iterator is positioned at an entry.
func (i *Iterator) Valid() bool { return i.err == nil && i.it.Valid() }

// Err returns the error that invalidated the iterator, if any.
func (i *Iterator) Err() error {
	if i.err != nil {
		return i.err
	}
	if err := i.it.Error(); err != nil {
		return fmt.Errorf("storage: iterate: %w", err)
	}
	return nil
}

// UnsafeKey returns the current key; it aliases iterator memory (invariant 4).
func (i *Iterator) UnsafeKey() MVCCKey { return i.key }

// UnsafeValue returns the current value; it aliases iterator memory.
func (i *Iterator) UnsafeValue() ([]byte, error) {
	v, err := i.it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("storage: read value of %s: %w", i.key, err)
	}
	return v, nil
}

// DiskBytes is how many bytes of blocks the iterator has read from
// outside the block cache (from the disk, or the OS's or read-ahead's
// memory in front of it) since it was opened, or taken from the pool:
// Pebble's own count, which a pooled iterator keeps across its uses, so
// callers take differences.
func (i *Iterator) DiskBytes() uint64 {
	st := i.it.Stats().InternalStats
	return st.BlockBytes - st.BlockBytesInCache
}

// Close releases the iterator (to its ReusingReader, if it came from one).
func (i *Iterator) Close() error {
	if i.plan != nil {
		i.plan.done(i.planEnd && !i.it.Valid() && i.it.Error() == nil)
		i.plan = nil
	}
	if i.reuse != nil {
		i.reuse.free = append(i.reuse.free, i)
		return nil
	}
	if i.batch != nil {
		i.batch.free = append(i.batch.free, i)
		return nil
	}
	if i.pool != nil && i.pool.put(i) {
		return nil
	}
	return i.it.Close()
}
