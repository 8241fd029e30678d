package mvcc

import (
	"bytes"
	"fmt"

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
	// counted (CountTags); tag holds the counted value's first byte.
	found, count int64
	tag          [1]byte
	nbytes       int64
	resume       *kvpb.Span
	valBuf       []byte
	// arena holds the copies of the keys and values the scan returns, so
	// rows share a few large allocations instead of two small ones each.
	arena []byte
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
// returned, only its tag looked at).
func (s *scanner) copyValue(b []byte) []byte {
	if !s.counting() {
		return s.copyOut(b)
	}
	if len(b) == 0 {
		return s.tag[:0]
	}
	s.tag[0] = b[0]
	return s.tag[:1]
}

func (s *scanner) counting() bool { return len(s.opts.CountTags) > 0 }

func (s *scanner) run(r storage.Reader) (err error) {
	// A forward count or unlimited scan reads the whole span in order:
	// its files can be read ahead whole (storage.IterOptions.Scan).
	whole := !s.opts.Reverse && (s.counting() || s.opts.MaxKeys == 0 && s.opts.MaxBytes == 0)
	if s.vit, err = r.NewIter(storage.IterOptions{LowerBound: s.start, UpperBound: s.end, Scan: whole, ScanEnd: s.opts.ReadsOnTo}); err != nil {
		return fmt.Errorf("mvcc: scan: %w", err)
	}
	defer s.vit.Close()
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
	for {
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
		if s.vit.Valid() && bytes.Equal(s.vit.UnsafeKey().Key, cur) {
			s.vit.NextKey()
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
