package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

// SpanStats is what a key span holds, counted in the bytes of its engine
// keys and values as they are stored, before Pebble's compression and
// block overhead (what the SQL size functions and the tablet views
// report, docs/sql.md "Sizes").
//
// Live counts, for each user key, the newest committed version unless it
// is a tombstone: what a read now returns. Total adds every older version
// and tombstone (the garbage GC removes) and the lock records (intents and
// row locks) of the span's keys, so Live <= Total always.
type SpanStats struct {
	LiveBytes, TotalBytes int64
	// LiveKeys counts the user keys with a live newest version; Versions
	// counts every version, tombstones included; Locks the lock records.
	LiveKeys, Versions, Locks int64
}

// Add returns the sum of s and o.
func (s SpanStats) Add(o SpanStats) SpanStats {
	return SpanStats{
		LiveBytes: s.LiveBytes + o.LiveBytes, TotalBytes: s.TotalBytes + o.TotalBytes,
		LiveKeys: s.LiveKeys + o.LiveKeys, Versions: s.Versions + o.Versions, Locks: s.Locks + o.Locks,
	}
}

// ComputeSpanStats scans the user keys in [start, end) of r, with all
// their versions and their lock records, and counts them. keep, when not
// nil, selects the user keys counted (a relation whose entries share a
// span with others', such as a local index of a hash-partitioned table);
// it sees iterator memory and must not keep it. The cost is one pass over
// the span: callers that show sizes often cache the result.
func ComputeSpanStats(r storage.Reader, start, end []byte, keep func(userKey []byte) bool) (SpanStats, error) {
	var s SpanStats
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return s, invalidArg("span stats: empty span [%q, %q)", start, end)
	}
	it, err := r.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return s, fmt.Errorf("mvcc: span stats: %w", err)
	}
	var cur []byte
	newest := false
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		if keep != nil && !keep(k.Key) {
			continue
		}
		raw, err := it.UnsafeValue()
		if err != nil {
			it.Close()
			return s, fmt.Errorf("mvcc: span stats: %w", err)
		}
		n := int64(k.EncodedLen() + len(raw))
		s.TotalBytes += n
		if k.Timestamp.IsEmpty() {
			continue // a bare key: not a version (none are written in table spans)
		}
		s.Versions++
		if !bytes.Equal(k.Key, cur) {
			cur = append(cur[:0], k.Key...)
			newest = true
		} else {
			newest = false
		}
		if !newest {
			continue
		}
		_, tomb, err := decodeValue(raw)
		if err != nil {
			it.Close()
			return s, fmt.Errorf("mvcc: span stats: version %s: %w", k, err)
		}
		if !tomb {
			s.LiveBytes += n
			s.LiveKeys++
		}
	}
	if err := it.Err(); err != nil {
		it.Close()
		return s, fmt.Errorf("mvcc: span stats: %w", err)
	}
	it.Close()

	// Lock records sit in the lock keyspace under the same user keys.
	lo, hi := keys.LockSpan(start, end)
	lit, err := r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return s, fmt.Errorf("mvcc: span stats: locks: %w", err)
	}
	defer lit.Close()
	for ok := lit.First(); ok; ok = lit.Next() {
		k := lit.UnsafeKey()
		if keep != nil {
			uk, err := keys.DecodeLock(k.Key)
			if err != nil {
				return s, fmt.Errorf("mvcc: span stats: %w", err)
			}
			if !keep(uk) {
				continue
			}
		}
		raw, err := lit.UnsafeValue()
		if err != nil {
			return s, fmt.Errorf("mvcc: span stats: locks: %w", err)
		}
		s.TotalBytes += int64(k.EncodedLen() + len(raw))
		s.Locks++
	}
	if err := lit.Err(); err != nil {
		return s, fmt.Errorf("mvcc: span stats: locks: %w", err)
	}
	return s, nil
}
