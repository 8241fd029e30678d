package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// scanner merges the version stream and the lock stream of a span by user
// key. Each stream has its own iterator, moved only in the scan's
// direction: versions by NextKey (forward) or Prev (reverse), locks by
// Next/Prev. Neither seeks per row.
type scanner struct {
	readState
	opts       ScanOptions
	start, end []byte

	vit, lit *storage.Iterator
	vOK, lOK bool

	rows []kvpb.KeyValue
	// found counts the visible values met (MaxKeys), and count those
	// counted (CountTags).
	found, count int64
	nbytes       int64
	// diskBytes is what a count read from outside the block cache
	// (ScanResult.DiskBytes).
	diskBytes int64
	resume    *kvpb.Span
	valBuf    []byte
	// prev holds the key countCommitted has just counted.
	prev []byte
	// arena holds the copies of the keys and values the scan returns, so
	// rows share a few large allocations instead of two small ones each.
	arena []byte
	// newest is the newest version of the keys met so far, newestLost
	// whether one could not be told (ScanOptions.TrackNewest).
	newest     hlc.Timestamp
	newestLost bool
}

// arenaChunk is the largest size of the scan arena's allocations: large
// enough to amortise, small enough not to pin much memory for a short
// scan's rows. The first chunk is arenaFirst and each next one doubles, so
// a point read (a SQL row by primary key) does not allocate and clear 32
// KiB: it did, 42% of the bytes allocated under pgbench select-only.
const (
	arenaChunk = 32 << 10
	arenaFirst = 256
)

// Rows grow as append grows them until rowsGrowFrom, so that a point or
// short read allocates little; a scan that got that far is most likely a
// page of a longer one (an index backfill's 2,000 rows, a SQL scan's
// batches), and its rows get room for the rest of its MaxKeys at once, at
// most rowsGrowTo, doubling after that. append grows a slice of more than
// 256 rows by about 1.25× a step: a 2,000-row page allocated and copied
// several times its final size, a third of a 1M-row index build's
// allocations.
const (
	rowsGrowFrom = 64
	rowsGrowTo   = 4096
)

// growRows returns s.rows with room for more rows (it is full).
func (s *scanner) growRows() []kvpb.KeyValue {
	n := len(s.rows)
	if n < rowsGrowFrom {
		return s.rows // append's growth
	}
	want := 2 * n
	if left := s.opts.MaxKeys - s.found; left > 0 {
		want = max(want, n+int(min(left, rowsGrowTo)))
	}
	grown := make([]kvpb.KeyValue, n, want)
	copy(grown, s.rows)
	return grown
}

// copyOut copies b out of iterator memory into the arena. The copy's
// capacity ends with it, so appending to one row cannot overwrite the next;
// an empty b gives an empty, non-nil slice.
func (s *scanner) copyOut(b []byte) []byte {
	if s.arena == nil || cap(s.arena)-len(s.arena) < len(b) {
		size := arenaFirst
		if s.arena != nil {
			size = min(2*cap(s.arena), arenaChunk)
		}
		s.arena = make([]byte, 0, max(size, len(b)))
	}
	off := len(s.arena)
	s.arena = append(s.arena, b...)
	return s.arena[off:len(s.arena):len(s.arena)]
}

// copyValue takes a visible value out of iterator memory: a copy in the
// arena, or in count mode only its first byte (the value is not
// returned, only its tag looked at), as a slice of byteValues: a slice
// of the scanner's own memory would make every Scan's scanner escape to
// the heap (the rows hold the values), one allocation per point read.
func (s *scanner) copyValue(b []byte) []byte {
	if !s.counting() {
		return s.copyOut(b)
	}
	if len(b) == 0 {
		return byteValues[:0]
	}
	return byteValues[b[0] : int(b[0])+1 : int(b[0])+1]
}

// byteValues holds every byte value at its own index, never written.
var byteValues = func() (v [256]byte) {
	for i := range v {
		v[i] = byte(i)
	}
	return v
}()

func (s *scanner) counting() bool { return len(s.opts.CountTags) > 0 }

// noteDiskBytes records what the value iterator read from outside the
// block cache since it stood at from.
func (s *scanner) noteDiskBytes(from uint64) { s.diskBytes = int64(s.vit.DiskBytes() - from) }

func (s *scanner) run(r storage.Reader) (err error) {
	// A forward count or unlimited scan reads the whole span in order:
	// its files can be read ahead whole (storage.IterOptions.Scan).
	whole := !s.opts.Reverse && (s.counting() || s.opts.MaxKeys == 0 && s.opts.MaxBytes == 0)
	if s.vit, err = r.NewIter(storage.IterOptions{LowerBound: s.start, UpperBound: s.end, Scan: whole, ScanEnd: s.opts.ReadsOnTo}); err != nil {
		return fmt.Errorf("mvcc: scan: %w", err)
	}
	defer s.vit.Close()
	if s.counting() {
		// Run before the Close above (a method call, not a closure,
		// so that the scanner stays on the stack).
		defer s.noteDiskBytes(s.vit.DiskBytes())
	}
	// Without locks in the span the lock stream is empty: no iterator.
	if !s.opts.NoLocksInSpan {
		lo, hi := keys.LockSpan(s.start, s.end)
		if s.lit, err = r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi}); err != nil {
			return fmt.Errorf("mvcc: scan: %w", err)
		}
		defer s.lit.Close()
	}
	if s.opts.Reverse {
		s.vOK = s.vit.Last()
		s.lOK = s.lit != nil && s.lit.Last()
	} else {
		s.vOK = s.vit.First()
		s.lOK = s.lit != nil && s.lit.First()
	}
	fast := s.counting() && !s.opts.Reverse
	for {
		if fast {
			if err := s.countCommitted(); err != nil {
				return err
			}
		}
		if s.counting() {
			// Nothing the scan returns points into the arena but a
			// resume key, set just before the loop ends: the previous
			// key's copy can be overwritten.
			s.arena = s.arena[:0]
		}
		cur, lockHere, ok, err := s.current()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if s.limitReached() {
			s.setResume(cur)
			break
		}
		var kv kvpb.KeyValue
		found, readVersions := false, true
		if lockHere {
			s.newestLost = true
			raw, err := s.lit.UnsafeValue()
			if err != nil {
				return err
			}
			lk, err := decodeLockRecord(raw)
			if err != nil {
				return fmt.Errorf("mvcc: lock of %q: %w", cur, err)
			}
			if kv, found, readVersions, err = s.checkLock(cur, &lk); err != nil {
				return err
			}
			s.lOK = s.step(s.lit)
		}
		if s.vOK && bytes.Equal(s.vit.UnsafeKey().Key, cur) {
			if s.opts.TrackNewest {
				// Forward, a key's versions come newest first: this is
				// its newest.
				if ts := s.vit.UnsafeKey().Timestamp; ts.IsEmpty() {
					s.newestLost = true
				} else {
					s.newest = s.newest.Forward(ts)
				}
			}
			var vkv kvpb.KeyValue
			var vfound bool
			if vkv, vfound, err = s.versions(cur, readVersions); err != nil {
				return err
			}
			if readVersions {
				kv, found = vkv, vfound
			}
		}
		if err := s.vit.Err(); err != nil {
			return fmt.Errorf("mvcc: scan: %w", err)
		}
		if s.lit != nil {
			if err := s.lit.Err(); err != nil {
				return fmt.Errorf("mvcc: scan locks: %w", err)
			}
		}
		if found && s.counting() {
			s.found++
			if len(kv.Value) > 0 && bytes.IndexByte(s.opts.CountTags, kv.Value[0]) >= 0 {
				s.count++
			}
			continue
		}
		if found {
			size := int64(len(kv.Key) + len(kv.Value))
			if s.opts.MaxBytes > 0 && len(s.rows) > 0 && s.nbytes+size > s.opts.MaxBytes {
				s.setResume(cur)
				break
			}
			if len(s.rows) == cap(s.rows) {
				s.rows = s.growRows()
			}
			s.rows = append(s.rows, kv)
			s.found++
			s.nbytes += size
		}
	}
	return nil
}

// countCommitted is a forward count's walk over the keys whose newest
// version is committed at or below the read timestamp and that no lock
// record precedes: the visible version is that newest one, no uncertainty
// can come of the key (it looks only at versions above the read), and only
// its value's tags decide (a tombstone counts nothing, else the user
// value's first byte against CountTags). It returns, with the version
// stream at the key, on the first key it cannot decide so (a lock record
// at or before it, a version above the read, a bare key, the MaxKeys
// limit), and run's general step takes that key; the two give the same
// count because on such keys the general step would read the same version
// and count it the same way.
//
// What it saves over the general step (bench/README.md, "count(*)'s
// per-row walk"): no copy of the key, no closure per value, no per-row
// check of the iterators' errors (an error leaves an iterator invalid, so
// it is checked when the stream ends).
func (s *scanner) countCommitted() error {
	var lk []byte
	if s.lOK {
		k := s.lit.UnsafeKey()
		var err error
		if lk, err = keys.DecodeLock(k.Key); err != nil || !k.Timestamp.IsEmpty() {
			return nil // current reports it
		}
	}
	it := s.vit
	for s.vOK {
		if s.opts.MaxKeys > 0 && s.found >= s.opts.MaxKeys {
			return nil
		}
		k := it.UnsafeKey()
		if k.Timestamp.IsEmpty() || s.ts.Less(k.Timestamp) || (lk != nil && bytes.Compare(k.Key, lk) >= 0) {
			return nil
		}
		raw, err := it.UnsafeValue()
		if err != nil {
			return err
		}
		v, tomb, err := decodeValue(raw)
		if err != nil {
			return fmt.Errorf("mvcc: version %s: %w", k, err)
		}
		if !tomb {
			s.found++
			if len(v) > 0 && bytes.IndexByte(s.opts.CountTags, v[0]) >= 0 {
				s.count++
			}
		}
		// Next and a look at the key beat Pebble's NextPrefix when, as
		// mostly, the key has one version.
		s.prev = append(s.prev[:0], k.Key...)
		if s.vOK = it.Next(); s.vOK && bytes.Equal(it.UnsafeKey().Key, s.prev) {
			s.vOK = it.NextKey()
		}
		if !s.vOK {
			if err := it.Err(); err != nil {
				return fmt.Errorf("mvcc: scan: %w", err)
			}
		}
	}
	return nil
}

// current returns the next user key in scan order present in either stream
// (a copy), and whether the lock stream is at it.
func (s *scanner) current() (cur []byte, lockHere, ok bool, err error) {
	var vk, lk []byte
	if s.vOK {
		vk = s.vit.UnsafeKey().Key
	}
	if s.lOK {
		k := s.lit.UnsafeKey()
		if !k.Timestamp.IsEmpty() {
			return nil, false, false, fmt.Errorf("%w: versioned entry %s in the lock keyspace", ErrCorrupt, k)
		}
		if lk, err = keys.DecodeLock(k.Key); err != nil {
			return nil, false, false, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	switch {
	case !s.vOK && !s.lOK:
		return nil, false, false, nil
	case !s.vOK:
		return s.copyOut(lk), true, true, nil
	case !s.lOK:
		return s.copyOut(vk), false, true, nil
	}
	c := bytes.Compare(vk, lk)
	if s.opts.Reverse {
		c = -c
	}
	switch {
	case c < 0:
		return s.copyOut(vk), false, true, nil
	default:
		return s.copyOut(lk), true, true, nil
	}
}

func (s *scanner) step(it *storage.Iterator) bool {
	if s.opts.Reverse {
		return it.Prev()
	}
	return it.Next()
}

func (s *scanner) limitReached() bool {
	return (s.opts.MaxKeys > 0 && s.found >= s.opts.MaxKeys) ||
		(s.opts.MaxBytes > 0 && s.nbytes >= s.opts.MaxBytes)
}

// setResume records that cur and everything after it in scan order is
// unread.
func (s *scanner) setResume(cur []byte) {
	if s.opts.Reverse {
		s.resume = &kvpb.Span{Key: append([]byte(nil), s.start...), EndKey: keys.Next(cur)}
		return
	}
	s.resume = &kvpb.Span{Key: cur, EndKey: append([]byte(nil), s.end...)}
}

// versions consumes the version stream's entries of cur (the stream is at
// cur's first entry in scan order) and, when read is true, returns the
// visible version.
func (s *scanner) versions(cur []byte, read bool) (kvpb.KeyValue, bool, error) {
	if !s.opts.Reverse {
		var kv kvpb.KeyValue
		var found bool
		if read {
			var err error
			if kv, found, err = s.readVersions(s.vit, cur, true, s.copyValue); err != nil {
				return kvpb.KeyValue{}, false, err
			}
		}
		// On to the next user key: Next and a look at the key, and
		// Pebble's NextPrefix only if cur has an older version left. A
		// key mostly has one version, where NextPrefix costs more than
		// Next (in a 1M-row index build's profile, whose scan reads each
		// row's one version, the step took 0.24 s of 2.05 s sampled with
		// NextPrefix, 0.17 s of 1.99 s with Next; bench/README.md, issue
		// 18, ninth pass), as countCommitted found for count(*). cur is
		// a copy, so it outlives the move.
		if s.vit.Valid() && bytes.Equal(s.vit.UnsafeKey().Key, cur) {
			if s.vit.Next() && bytes.Equal(s.vit.UnsafeKey().Key, cur) {
				s.vit.NextKey()
			}
		}
		s.vOK = s.vit.Valid()
		return kv, found, nil
	}
	// Reverse: versions of cur come oldest first. The visible one is the
	// last seen at or below ts; stepping on to the previous user key costs
	// no seek.
	var bestTS = s.ts
	have := false
	for ; s.vit.Valid(); s.vit.Prev() {
		k := s.vit.UnsafeKey()
		if !bytes.Equal(k.Key, cur) {
			break
		}
		if !read || k.Timestamp.IsEmpty() {
			continue
		}
		if s.ts.Less(k.Timestamp) {
			if err := s.uncertain(cur, k.Timestamp, s.vit); err != nil {
				return kvpb.KeyValue{}, false, err
			}
			continue
		}
		raw, err := s.vit.UnsafeValue()
		if err != nil {
			return kvpb.KeyValue{}, false, err
		}
		s.valBuf = append(s.valBuf[:0], raw...)
		bestTS, have = k.Timestamp, true
	}
	s.vOK = s.vit.Valid()
	if !have {
		return kvpb.KeyValue{}, false, nil
	}
	v, tomb, err := decodeValue(s.valBuf)
	if err != nil {
		return kvpb.KeyValue{}, false, fmt.Errorf("mvcc: version %q@%s: %w", cur, bestTS, err)
	}
	if tomb {
		return kvpb.KeyValue{}, false, nil
	}
	return kvpb.KeyValue{Key: cur, Value: s.copyValue(v), Timestamp: bestTS}, true, nil
}
