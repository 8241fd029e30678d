package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage"
)

// GC removes, in the batch rw and for the keys in [start, end), the
// versions no read at or above threshold can see: every version shadowed
// by a newer version at or below threshold, and a tombstone at or below
// threshold together with everything under it. Versions above threshold,
// and intents, are untouched (invariant 7). It returns how many versions it
// removed. Reads below threshold are the caller's to refuse.
func GC(rw storage.ReadWriter, start, end []byte, threshold hlc.Timestamp) (removed int, err error) {
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return 0, invalidArg("gc: empty span [%q, %q)", start, end)
	}
	it, err := rw.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return 0, fmt.Errorf("mvcc: gc: %w", err)
	}
	defer it.Close()
	// For each key (versions newest first): the first version at or below
	// threshold is kept unless it is a tombstone; everything after it goes.
	var cur []byte
	var doomed []storage.MVCCKey
	keepSeen := false
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		if !bytes.Equal(k.Key, cur) {
			cur = append(cur[:0], k.Key...)
			keepSeen = false
		}
		if k.Timestamp.IsEmpty() || threshold.Less(k.Timestamp) {
			continue
		}
		if !keepSeen {
			keepSeen = true
			raw, err := it.UnsafeValue()
			if err != nil {
				return 0, err
			}
			_, tomb, err := decodeValue(raw)
			if err != nil {
				return 0, fmt.Errorf("mvcc: gc: version %s: %w", k, err)
			}
			if !tomb {
				continue
			}
		}
		doomed = append(doomed, storage.MVCCKey{Key: append([]byte(nil), k.Key...), Timestamp: k.Timestamp})
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("mvcc: gc: %w", err)
	}
	for _, k := range doomed {
		if err := rw.Delete(k); err != nil {
			return 0, fmt.Errorf("mvcc: gc %s: %w", k, err)
		}
	}
	return len(doomed), nil
}
