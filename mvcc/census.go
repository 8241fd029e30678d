package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// RowFormats names the packed-row format of a value, for a census
// (Census, kvpb.GCRequest.Census). mvcc knows nothing of row formats; a
// tablet's Repacker may also implement it (sql/rowenc does).
type RowFormats interface {
	// PackedVersion returns the owner of key (nil: none it knows of) and,
	// when value is a packed row, the format version it was written
	// under (ok).
	PackedVersion(key, value []byte) (owner []byte, version uint32, ok bool)
}

// Census reads every value kept in [start, end), committed versions (of
// any timestamp) and the values of intents (a lock record's current value
// and its history, which a commit or a rollback to a savepoint may make
// a version), and returns the lowest packed-row format version rf finds
// per owner (invariant 11). It stops at the first key boundary after
// maxValues values (0: no limit) and returns the key to resume at (nil:
// the span is done); the intents it reports are those of the part it
// read. It writes nothing.
func Census(r storage.Reader, start, end []byte, maxValues int, rf RowFormats) (out []kvpb.PackedCensus, resume []byte, err error) {
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return nil, nil, invalidArg("census: empty span [%q, %q)", start, end)
	}
	add := func(key, value []byte) {
		owner, v, ok := rf.PackedVersion(key, value)
		if owner == nil || !ok {
			return
		}
		out = kvpb.MergeCensus(out, kvpb.PackedCensus{Owner: owner, MinVersion: v, Values: 1})
	}
	it, err := r.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return nil, nil, fmt.Errorf("mvcc: census: %w", err)
	}
	defer it.Close()
	var cur []byte
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		if !bytes.Equal(k.Key, cur) {
			if maxValues > 0 && n >= maxValues {
				resume = bytes.Clone(k.Key)
				break
			}
			cur = append(cur[:0], k.Key...)
		}
		raw, err := it.UnsafeValue()
		if err != nil {
			return nil, nil, err
		}
		v, tomb, err := decodeValue(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("mvcc: census: version %s: %w", k, err)
		}
		n++
		if !tomb {
			add(k.Key, v)
		}
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("mvcc: census: %w", err)
	}
	lockEnd := end
	if resume != nil {
		lockEnd = resume
	}
	err = walkLocks(r, start, lockEnd, func(key []byte, lk *lockRecord) (bool, error) {
		if !lk.LockOnly && !lk.Tombstone {
			add(key, lk.Value)
		}
		for _, h := range lk.History {
			if !h.Tombstone {
				add(key, h.Value)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, resume, nil
}
