package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// ResolveIntent settles intent.Txn's intent on intent.Key according to
// status, where intent.Txn carries the transaction's final (or pushed)
// WriteTimestamp and its Epoch:
//
//   - Committed: an intent of that epoch becomes a committed version at
//     intent.Txn.WriteTimestamp, holding its newest value whose sequence
//     number is not in ignored (the transaction's IgnoredSeqNums); if
//     every value was rolled back to a savepoint it is discarded, as is an
//     intent of an older epoch (not part of the committed attempt).
//   - Aborted: the intent is discarded.
//   - Pending: the intent moves up to intent.Txn.WriteTimestamp if that is
//     higher (a pushed transaction); nothing else changes.
//
// resolved reports whether the lock changed. No lock, or a lock of another
// transaction, is not an error (invariant 6). ignored matters only for
// Committed.
func ResolveIntent(rw storage.ReadWriter, intent kvpb.Intent, status kvpb.TxnStatus, ignored ...kvpb.SeqRange) (resolved bool, err error) {
	if len(intent.Key) == 0 {
		return false, invalidArg("resolve intent: empty key")
	}
	lk, err := getLock(rw, intent.Key)
	if err != nil || lk == nil || lk.Txn.ID != intent.Txn.ID {
		return false, err
	}
	return resolveLock(rw, intent.Key, lk, intent.Txn, status, ignored)
}

func resolveLock(rw storage.ReadWriter, key []byte, lk *lockRecord, txn kvpb.TxnMeta, status kvpb.TxnStatus, ignored []kvpb.SeqRange) (bool, error) {
	lockKey := storage.MVCCKey{Key: keys.Lock(key)}
	switch status {
	case kvpb.Pending:
		if !lk.Txn.WriteTimestamp.Less(txn.WriteTimestamp) {
			return false, nil
		}
		lk.Txn.WriteTimestamp = txn.WriteTimestamp
		if err := rw.Put(lockKey, encodeLockRecord(nil, lk)); err != nil {
			return false, fmt.Errorf("mvcc: push intent on %q: %w", key, err)
		}
		return true, nil
	case kvpb.Committed:
		switch {
		case lk.Txn.Epoch > txn.Epoch:
			return false, fmt.Errorf("%w: intent on %q at epoch %d newer than committed epoch %d", ErrInvariant, key, lk.Txn.Epoch, txn.Epoch)
		case lk.Txn.Epoch == txn.Epoch:
			if txn.WriteTimestamp.Less(lk.Txn.WriteTimestamp) {
				return false, fmt.Errorf("%w: commit of %q at %s below its intent at %s", ErrInvariant, key, txn.WriteTimestamp, lk.Txn.WriteTimestamp)
			}
			if val, ok := lk.visible(ignored); ok {
				// Committed above where it was written: the value keeps
				// the intent's timestamp as its local one, which the
				// leaseholder's clock had reached when the intent was
				// written (doc.go, "Local timestamps").
				v := storage.MVCCKey{Key: key, Timestamp: txn.WriteTimestamp}
				if err := rw.Put(v, encodeValueLocal(val.Value, val.Tombstone, txn.WriteTimestamp, lk.Txn.WriteTimestamp)); err != nil {
					return false, fmt.Errorf("mvcc: commit intent on %q: %w", key, err)
				}
			}
		}
	case kvpb.Aborted:
	default:
		return false, invalidArg("resolve intent on %q: status %s", key, status)
	}
	if err := rw.Delete(lockKey); err != nil {
		return false, fmt.Errorf("mvcc: remove lock on %q: %w", key, err)
	}
	return true, nil
}

// ResolveIntentRange resolves, as ResolveIntent does, txn's intents in
// [start, end) (end empty: the single key start), at most max of them
// (0: all). When max stopped it with more of txn's intents left in the
// span, resume is the rest of the span, starting at the first of them.
func ResolveIntentRange(rw storage.ReadWriter, start, end []byte, txn kvpb.TxnMeta, status kvpb.TxnStatus, max int64, ignored ...kvpb.SeqRange) (n int, resume *kvpb.Span, err error) {
	if len(end) == 0 {
		ok, err := ResolveIntent(rw, kvpb.Intent{Key: start, Txn: txn}, status, ignored...)
		if ok {
			n = 1
		}
		return n, nil, err
	}
	if bytes.Compare(start, end) >= 0 || max < 0 {
		return 0, nil, invalidArg("resolve intent range [%q, %q) max %d", start, end, max)
	}
	// Collect first, then write: resolution rewrites the span being read.
	// Collected a chunk at a time, so that resolving a transaction of a
	// million intents does not hold a million copies of their records at
	// once (they were most of the garbage collector's work at the commit
	// of a 1M-row COPY).
	var (
		todo      []kvpb.Intent
		recs      []lockRecord
		collected int64
	)
	for {
		todo, recs = todo[:0], recs[:0]
		var next []byte
		err = walkLocks(rw, start, end, func(key []byte, lk *lockRecord) (bool, error) {
			if lk.Txn.ID != txn.ID {
				return true, nil
			}
			if max > 0 && collected == max {
				resume = &kvpb.Span{Key: append([]byte(nil), key...), EndKey: append([]byte(nil), end...)}
				return false, nil
			}
			if len(todo) == resolveChunk {
				next = append([]byte(nil), key...)
				return false, nil
			}
			todo = append(todo, kvpb.Intent{Key: append([]byte(nil), key...), Txn: lk.Txn})
			recs = append(recs, *lk)
			collected++
			return true, nil
		})
		if err != nil {
			return 0, nil, err
		}
		for i, in := range todo {
			ok, err := resolveLock(rw, in.Key, &recs[i], txn, status, ignored)
			if err != nil {
				return n, nil, err
			}
			if ok {
				n++
			}
		}
		if next == nil {
			return n, resume, nil
		}
		start = next
	}
}

// resolveChunk is how many intents ResolveIntentRange collects before it
// resolves them and reads on.
const resolveChunk = 1024

// ScanIntents lists the intents in [start, end) (end empty: the single key
// start) in key order, at most max of them (0: all).
func ScanIntents(r storage.Reader, start, end []byte, max int64) ([]kvpb.Intent, error) {
	if len(end) == 0 {
		in, err := GetIntent(r, start)
		if err != nil || in == nil {
			return nil, err
		}
		return []kvpb.Intent{*in}, nil
	}
	var out []kvpb.Intent
	err := walkLocks(r, start, end, func(key []byte, lk *lockRecord) (bool, error) {
		out = append(out, kvpb.Intent{Key: append([]byte(nil), key...), Txn: lk.Txn})
		return max <= 0 || int64(len(out)) < max, nil
	})
	return out, err
}

// GetIntent returns the intent on key, or nil when there is none.
func GetIntent(r storage.Reader, key []byte) (*kvpb.Intent, error) {
	lk, err := getLock(r, key)
	if err != nil || lk == nil {
		return nil, err
	}
	return &kvpb.Intent{Key: append([]byte(nil), key...), Txn: lk.Txn}, nil
}

// walkLocks calls fn for each lock in user keys [start, end) in key order
// until fn returns false. key aliases iterator memory.
func walkLocks(r storage.Reader, start, end []byte, fn func(key []byte, lk *lockRecord) (bool, error)) error {
	lo, hi := keys.LockSpan(start, end)
	it, err := r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("mvcc: scan locks: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		key, err := keys.DecodeLock(k.Key)
		if err != nil || !k.Timestamp.IsEmpty() {
			return fmt.Errorf("%w: entry %s in the lock keyspace", ErrCorrupt, k)
		}
		raw, err := it.UnsafeValue()
		if err != nil {
			return err
		}
		lk, err := decodeLockRecord(raw)
		if err != nil {
			return fmt.Errorf("mvcc: lock of %q: %w", key, err)
		}
		more, err := fn(key, &lk)
		if err != nil || !more {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("mvcc: scan locks: %w", err)
	}
	return nil
}
