package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// BulkPut writes value at key as a committed version at ts, without the
// conflict checks of Put: it is kvpb.BulkPutRequest's write, for storage
// no other transaction can reach (see there). With mustNotExist it fails
// with *kvpb.ConditionFailedError when key already has a committed version
// (a tombstone included) or a lock record, and writes nothing.
func BulkPut(rw storage.ReadWriter, key []byte, ts hlc.Timestamp, value []byte, mustNotExist bool) error {
	if len(key) == 0 {
		return invalidArg("bulk put: empty key")
	}
	if keys.IsLocal(key) {
		return invalidArg("bulk put: %q is a local key", key)
	}
	if ts.IsEmpty() {
		return invalidArg("bulk put %q: empty timestamp", key)
	}
	if mustNotExist {
		lk, err := getLock(rw, key)
		if err != nil {
			return err
		}
		latest, err := latestVersion(rw, key)
		if err != nil {
			return err
		}
		if lk != nil || !latest.IsEmpty() {
			var actual []byte
			if !latest.IsEmpty() {
				if raw, ok, err := rw.Get(storage.MVCCKey{Key: key, Timestamp: latest}); err == nil && ok {
					if v, tomb, err := decodeValue(raw); err == nil && !tomb {
						actual = v
					}
				}
			}
			return &kvpb.ConditionFailedError{Key: append([]byte(nil), key...), ActualValue: actual}
		}
	}
	if err := rw.Put(storage.MVCCKey{Key: key, Timestamp: ts}, encodeValue(value, false)); err != nil {
		return fmt.Errorf("mvcc: bulk write %q@%s: %w", key, ts, err)
	}
	return nil
}

// FirstExisting returns the index of the first of keys, which must be
// sorted and distinct, that has a committed version (a tombstone
// included), or -1 when none has. It walks one iterator forward, seeking
// only when the next key is beyond where the iterator stands, so keys that
// fall in an empty stretch of the keyspace cost no seek: a sequential bulk
// load into fresh storage costs one seek per batch. Lock records are not
// looked at (the caller checks intents).
func FirstExisting(r storage.Reader, keys [][]byte) (int, error) {
	if len(keys) == 0 {
		return -1, nil
	}
	last := keys[len(keys)-1]
	it, err := r.NewIter(storage.IterOptions{LowerBound: keys[0], UpperBound: append(append([]byte(nil), last...), 0)})
	if err != nil {
		return 0, fmt.Errorf("mvcc: checking %d keys: %w", len(keys), err)
	}
	defer it.Close()
	valid := it.SeekGE(storage.MVCCKey{Key: keys[0]})
	for i, k := range keys {
		if valid {
			if c := bytes.Compare(it.UnsafeKey().Key, k); c < 0 {
				valid = it.SeekGE(storage.MVCCKey{Key: k})
			}
		}
		if !valid {
			break
		}
		if bytes.Equal(it.UnsafeKey().Key, k) {
			return i, nil
		}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("mvcc: checking %d keys: %w", len(keys), err)
	}
	return -1, nil
}

// BulkPutCheckIntent fails with *kvpb.ConditionFailedError when key holds a
// lock record (an intent or a lock): a bulk write must not go under it.
func BulkPutCheckIntent(r storage.Reader, key []byte) error {
	lk, err := getLock(r, key)
	if err != nil {
		return err
	}
	if lk != nil {
		return &kvpb.ConditionFailedError{Key: append([]byte(nil), key...)}
	}
	return nil
}

// FirstLocked returns the index of the first of keys, which must be
// sorted and distinct, that holds a lock record (an intent or a lock), or
// -1 when none does. Like FirstExisting it walks one iterator over the
// lock keyspace of the keys' span, seeking only past stretches without
// locks: a load into fresh storage, where there are none, costs one seek
// per batch instead of a point read of the lock keyspace per key (which a
// lock table too full to rule the span out used to cost: 5.6 s of
// `pgbench -i`'s 1M-row COPY, whose transaction holds the tellers' and
// branches' intents).
func FirstLocked(r storage.Reader, userKeys [][]byte) (int, error) {
	if len(userKeys) == 0 {
		return -1, nil
	}
	last := userKeys[len(userKeys)-1]
	lo := keys.Lock(userKeys[0])
	hi := append(keys.Lock(last), 0)
	it, err := r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, fmt.Errorf("mvcc: checking locks of %d keys: %w", len(userKeys), err)
	}
	defer it.Close()
	valid := it.SeekGE(storage.MVCCKey{Key: lo})
	for i, k := range userKeys {
		if valid {
			uk, err := keys.DecodeLock(it.UnsafeKey().Key)
			if err != nil {
				return 0, fmt.Errorf("mvcc: checking locks: %w", err)
			}
			if bytes.Compare(uk, k) < 0 {
				valid = it.SeekGE(storage.MVCCKey{Key: keys.Lock(k)})
			}
		}
		if !valid {
			break
		}
		uk, err := keys.DecodeLock(it.UnsafeKey().Key)
		if err != nil {
			return 0, fmt.Errorf("mvcc: checking locks: %w", err)
		}
		if bytes.Equal(uk, k) {
			return i, nil
		}
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("mvcc: checking locks of %d keys: %w", len(userKeys), err)
	}
	return -1, nil
}
