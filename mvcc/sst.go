package mvcc

import (
	"bytes"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

// SSTs of committed versions, ingested below MVCC (kvpb.AddSSTableRequest,
// an index backfill's sorted entries). Like BulkPut they bypass
// invariants 2 and 3 (a version may land under an existing newer one, or
// under an intent): the caller guarantees that nobody else writes the
// span at or below their timestamp. An ingested version at ts and a
// version someone else wrote above ts order by timestamp, not by when
// each reached the engine, so the newer one wins for every reader (5).

// PutSSTVersion adds to b the committed version of key at ts holding
// value. Keys must come in increasing order (storage.SSTBuilder).
func PutSSTVersion(b *storage.SSTBuilder, key []byte, ts hlc.Timestamp, value []byte) error {
	if len(key) == 0 {
		return invalidArg("sst version: empty key")
	}
	if keys.IsLocal(key) {
		return invalidArg("sst version: %q is a local key", key)
	}
	if ts.IsEmpty() {
		return invalidArg("sst version %q: empty timestamp", key)
	}
	// The version's encoding goes in the builder's buffer: a build of a
	// million entries allocated a million values here.
	return b.PutEncoded(storage.MVCCKey{Key: key, Timestamp: ts}, func(dst []byte) []byte {
		return append(append(dst, tagValue), value...)
	})
}

// SSTVersionBytes is what PutSSTVersion(b, key, ts, value) adds to
// b.DataBytes(): a caller that hands the puts to another goroutine cuts
// its SSTs by this count.
func SSTVersionBytes(key []byte, ts hlc.Timestamp, value []byte) int64 {
	return int64(storage.MVCCKey{Key: key, Timestamp: ts}.EncodedLen() + 1 + len(value))
}

// CheckSST fails with *kvpb.InvalidArgumentError unless data is an SST
// that only adds committed versions (no tombstone, no deletion of any
// kind) at exactly ts of keys inside [start, end), none local and no
// value over maxValue bytes; it returns how many versions it holds. A
// tablet checks an SST this way before any replica ingests it.
func CheckSST(data []byte, start, end []byte, ts hlc.Timestamp, maxValue int) (int, error) {
	want, err := storage.CheckSSTPoints(data)
	if err != nil {
		return 0, invalidArg("%v", err)
	}
	n := 0
	err = storage.ForEachSST(data, nil, nil, func(k storage.MVCCKey, v []byte) error {
		if k.Timestamp != ts {
			return invalidArg("sst version %s is not at the request's timestamp %s", k, ts)
		}
		if keys.IsLocal(k.Key) || bytes.Compare(k.Key, start) < 0 || (len(end) > 0 && bytes.Compare(k.Key, end) >= 0) {
			return invalidArg("sst key %q outside the request's span [%q, %q)", k.Key, start, end)
		}
		val, tomb, err := decodeValue(v)
		if err != nil {
			return invalidArg("sst version %s: %v", k, err)
		}
		if tomb {
			return invalidArg("sst version %s is a tombstone", k)
		}
		if len(val) > maxValue {
			return invalidArg("sst version %s: value of %d bytes exceeds the limit of %d", k, len(val), maxValue)
		}
		n++
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n != want {
		return 0, invalidArg("sst holds %d entries but %d versions were read", want, n)
	}
	return n, nil
}
