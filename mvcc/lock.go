package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// Row locks (kvpb.LockRequest): a lock record with no value (LockOnly).
// To other transactions' writes it is an intent like any other (invariant
// 1: they meet it as a WriteIntentError and wait); to every read it is
// invisible, since there is nothing to read in it; resolving it, however
// the transaction ended, writes no version. A later write of the holder on
// the key replaces it with an ordinary intent with no history.

// AcquireLock takes txn's row lock on key for the span [key, end) (end
// empty: key alone). It fails with a *kvpb.WriteIntentError listing every
// other transaction's lock in the span, or with a *kvpb.WriteTooOldError
// when a committed version in the span is above txn's read timestamp (ts
// for a nil txn, which only checks). It writes a lock-only record at key
// unless txn already holds a lock or intent there in its epoch, and
// reports whether it wrote one. ts is the lock's timestamp.
func AcquireLock(rw storage.ReadWriter, key, end []byte, ts hlc.Timestamp, txn *kvpb.Transaction) (acquired bool, err error) {
	return AcquireLockOpts(rw, key, end, ts, txn, WriteOptions{})
}

// AcquireLockOpts is AcquireLock with options; NoLock is the caller's
// promise that no lock record lies in [key, end), which saves walking the
// lock keyspace of the span. That walk is not a seek: a hot row's lock
// key carries an internal version for every intent laid and resolved on
// it since the last flush, and the iterator steps over each (it was a
// third of the CPU of contended pgbench tpcb-like under buffered writes).
func AcquireLockOpts(rw storage.ReadWriter, key, end []byte, ts hlc.Timestamp, txn *kvpb.Transaction, opts WriteOptions) (acquired bool, err error) {
	if len(key) == 0 {
		return false, invalidArg("lock: empty key")
	}
	if keys.IsLocal(key) {
		return false, invalidArg("lock: %q is a local key", key)
	}
	if len(end) == 0 {
		end = keys.Next(key)
	}
	if bytes.Compare(key, end) >= 0 {
		return false, invalidArg("lock: empty span [%q, %q)", key, end)
	}
	var conflicts []kvpb.Intent
	var own *lockRecord
	err = lockWalker(opts)(rw, key, end, func(k []byte, lk *lockRecord) (bool, error) {
		if txn == nil || lk.Txn.ID != txn.ID {
			conflicts = append(conflicts, kvpb.Intent{Key: append([]byte(nil), k...), Txn: lk.Txn})
			return true, nil
		}
		if lk.Txn.Epoch > txn.Epoch {
			return false, staleEpoch(k, lk.Txn.Epoch, txn.Epoch)
		}
		if bytes.Equal(k, key) && lk.Txn.Epoch == txn.Epoch {
			c := *lk
			own = &c
		}
		return true, nil
	})
	if err != nil {
		return false, err
	}
	if len(conflicts) > 0 {
		return false, &kvpb.WriteIntentError{Intents: conflicts}
	}
	readTS := ts
	if txn != nil {
		readTS = txn.ReadTimestamp
	}
	newest, newestKey, err := newestVersion(rw, key, end)
	if err != nil {
		return false, err
	}
	if readTS.Less(newest) || (txn == nil && !newest.IsEmpty() && ts.LessEq(newest)) {
		return false, writeTooOld(newestKey, ts, newest.Next().Forward(ts))
	}
	if txn == nil || own != nil {
		return false, nil
	}
	rec := lockRecord{Txn: txn.TxnMeta, LockOnly: true}
	rec.Txn.WriteTimestamp = ts
	if err := rw.Put(storage.MVCCKey{Key: keys.Lock(key)}, encodeLockRecord(nil, &rec)); err != nil {
		return false, fmt.Errorf("mvcc: write lock on %q: %w", key, err)
	}
	return true, nil
}

// CheckLock makes the checks of an unreplicated lock of txn on [key, end)
// (end empty: key alone), a lock held in the leaseholder's memory and
// written nowhere: another transaction's lock or intent in the span is a
// *kvpb.WriteIntentError, and a version at or above txn's read timestamp
// a *kvpb.WriteTooOldError, as for AcquireLock with a nil txn. txn's own
// locks and intents are no conflict, and the versions of their keys are
// not checked (no other transaction can have written above them). held
// reports that the span is one key on which txn holds a lock or intent in
// its epoch already, so it needs no other lock there. (Checked as a nil
// txn, a transaction that deleted a row and inserted it again met its own
// intent as a conflict it could never wait out: sysbench's
// oltp_read_write does that in every transaction.)
func CheckLock(r storage.Reader, key, end []byte, txn *kvpb.Transaction, opts WriteOptions) (held bool, err error) {
	return CheckLockNewest(r, key, end, txn, opts, nil)
}

// CheckLockNewest is CheckLock that also tells seen (when not nil), for
// each key of the span with no lock or intent of txn and no unversioned
// value, the timestamp of its newest version, which the check reads
// anyway; for a single key with no version at all, the empty timestamp.
// The key aliases the iterator's memory, and what seen was told holds
// only if the check then passes (err nil). The tablet's validation cache
// keeps it, so that the commit's refresh of a locked row need not read
// the row again.
func CheckLockNewest(r storage.Reader, key, end []byte, txn *kvpb.Transaction, opts WriteOptions, seen func(key []byte, newest hlc.Timestamp)) (held bool, err error) {
	held, _, _, err = CheckLockSpanNewest(r, key, end, txn, opts, seen)
	return held, err
}

// CheckLockSpanNewest is CheckLockNewest that also returns the newest
// version of any key of the span (the empty timestamp: none), with whole
// true when that is every key's: no key of the span holds a lock or
// intent of txn, whose versions are not read, or an unversioned value. A
// check that passed with whole true proves that no key of the span has a
// version above newest.
func CheckLockSpanNewest(r storage.Reader, key, end []byte, txn *kvpb.Transaction, opts WriteOptions, seen func(key []byte, newest hlc.Timestamp)) (held bool, spanNewest hlc.Timestamp, whole bool, err error) {
	return checkLockSpan(r, key, end, txn, opts, seen, nil)
}

// CheckLockScan is CheckLockSpanNewest that also returns, when whole, the
// rows a Scan of [key, end) at txn's read timestamp would (ScanResult.Rows,
// with no limit): read in the same pass over the span's versions, not by
// a second seek. A check that passed proves every key's newest version
// lies below the read timestamp, so it is the version the scan would read,
// and no lock of another transaction is in the span; a tombstone hides its
// key. Not whole (txn's own lock or intent, or an unversioned value, in
// the span, which the scan reads otherwise), rows is nil and the caller
// scans. The rows are the caller's.
func CheckLockScan(r storage.Reader, key, end []byte, txn *kvpb.Transaction, opts WriteOptions, seen func(key []byte, newest hlc.Timestamp)) (held bool, spanNewest hlc.Timestamp, whole bool, rows []kvpb.KeyValue, err error) {
	var buf []byte
	collect := func(it *storage.Iterator) error {
		k := it.UnsafeKey()
		raw, err := it.UnsafeValue()
		if err != nil {
			return err
		}
		v, tomb, err := decodeValue(raw)
		if err != nil {
			return fmt.Errorf("mvcc: version %s: %w", k, err)
		}
		if tomb {
			return nil
		}
		off := len(buf)
		if buf == nil {
			// Sized for the first row: one allocation for the
			// common span of one key, not one per append.
			buf = make([]byte, 0, len(k.Key)+len(v))
		}
		buf = append(append(buf, k.Key...), v...)
		// buf may have moved: the earlier rows keep their old copy.
		kk := buf[off : off+len(k.Key) : off+len(k.Key)]
		rows = append(rows, kvpb.KeyValue{Key: kk, Value: buf[off+len(k.Key) : len(buf) : len(buf)], Timestamp: k.Timestamp})
		return nil
	}
	held, spanNewest, whole, err = checkLockSpan(r, key, end, txn, opts, seen, collect)
	if err != nil || !whole {
		return held, spanNewest, whole, nil, err
	}
	return held, spanNewest, whole, rows, nil
}

// checkLockSpan is CheckLockSpanNewest, calling each (when not nil) at
// each key's newest version read (newestVersionExcept).
func checkLockSpan(r storage.Reader, key, end []byte, txn *kvpb.Transaction, opts WriteOptions, seen func(key []byte, newest hlc.Timestamp), each func(*storage.Iterator) error) (held bool, spanNewest hlc.Timestamp, whole bool, err error) {
	if len(key) == 0 || keys.IsLocal(key) {
		return false, hlc.Timestamp{}, false, invalidArg("lock: bad key %q", key)
	}
	single := len(end) == 0
	if single {
		end = keys.Next(key)
	}
	if bytes.Compare(key, end) >= 0 {
		return false, hlc.Timestamp{}, false, invalidArg("lock: empty span [%q, %q)", key, end)
	}
	var own map[string]bool
	if !opts.NoLock {
		// Walked only when a lock record may be there: a caller's
		// promise of none (opts.NoLock, an UPDATE's locking read whose
		// lock table says so) costs no closure, conflict list or map.
		if held, own, err = checkSpanLocks(r, key, end, txn, single); err != nil {
			return false, hlc.Timestamp{}, false, err
		}
	}
	newest, newestKey, bare, err := newestVersionExcept(r, key, end, own, seen, each)
	if err != nil {
		return false, hlc.Timestamp{}, false, err
	}
	if ts := txn.ReadTimestamp; !newest.IsEmpty() && ts.LessEq(newest) {
		return false, hlc.Timestamp{}, false, writeTooOld(newestKey, ts, newest.Next().Forward(ts))
	}
	if seen != nil && single && newest.IsEmpty() && !bare && own == nil {
		seen(key, hlc.Timestamp{})
	}
	return held, newest, own == nil && !bare, nil
}

// checkSpanLocks walks the lock records of [key, end) for checkLockSpan:
// a WriteIntentError listing every other transaction's, an error for one
// of txn's from a later epoch; own holds the keys txn has a record on,
// and held reports that the span is one key (single) with txn's record
// of this epoch.
func checkSpanLocks(r storage.Reader, key, end []byte, txn *kvpb.Transaction, single bool) (held bool, own map[string]bool, err error) {
	var conflicts []kvpb.Intent
	err = walkLocks(r, key, end, func(k []byte, lk *lockRecord) (bool, error) {
		if lk.Txn.ID != txn.ID {
			conflicts = append(conflicts, kvpb.Intent{Key: append([]byte(nil), k...), Txn: lk.Txn})
			return true, nil
		}
		if lk.Txn.Epoch > txn.Epoch {
			return false, staleEpoch(k, lk.Txn.Epoch, txn.Epoch)
		}
		if own == nil {
			own = map[string]bool{}
		}
		own[string(k)] = true
		held = single && lk.Txn.Epoch == txn.Epoch
		return true, nil
	})
	if err != nil {
		return false, nil, err
	}
	if len(conflicts) > 0 {
		return false, nil, &kvpb.WriteIntentError{Intents: conflicts}
	}
	return held, own, nil
}

// ReplicateLock writes txn's lock-only record at key, as AcquireLock would
// have, without its checks: for an unreplicated lock (held in the
// leaseholder's memory only) that must survive its key changing lock
// tables, at a split or a lease transfer. The caller vouches, by its
// latches and lock table, that no lock record is on key (the holder's
// own would have replaced the unreplicated lock; another's could not
// coexist with it).
func ReplicateLock(w storage.Writer, key []byte, txn kvpb.TxnMeta) error {
	if len(key) == 0 || keys.IsLocal(key) {
		return invalidArg("lock: bad key %q", key)
	}
	rec := lockRecord{Txn: txn, LockOnly: true}
	if err := w.Put(storage.MVCCKey{Key: keys.Lock(key)}, encodeLockRecord(nil, &rec)); err != nil {
		return fmt.Errorf("mvcc: replicate lock on %q: %w", key, err)
	}
	return nil
}

// lockWalker is walkLocks, or for a caller that promised there is no lock
// record to find (opts.NoLock) a walk that finds none.
func lockWalker(opts WriteOptions) func(storage.Reader, []byte, []byte, func([]byte, *lockRecord) (bool, error)) error {
	if opts.NoLock {
		return func(storage.Reader, []byte, []byte, func([]byte, *lockRecord) (bool, error)) error { return nil }
	}
	return walkLocks
}

// newestVersion returns the timestamp of the newest committed version in
// [start, end) and its key (zero when there is none).
func newestVersion(r storage.Reader, start, end []byte) (hlc.Timestamp, []byte, error) {
	ts, key, _, err := newestVersionExcept(r, start, end, nil, nil, nil)
	return ts, key, err
}

// newestVersionExcept is newestVersion over the keys not in skip; bare
// reports an unversioned value in the span, and seen (when not nil) is
// told each key's newest version, but not a key with an unversioned value.
// each (when not nil) is called with the iterator at each key's newest
// version (a key in skip excepted).
func newestVersionExcept(r storage.Reader, start, end []byte, skip map[string]bool, seen func(key []byte, newest hlc.Timestamp), each func(*storage.Iterator) error) (newest hlc.Timestamp, newestKey []byte, bare bool, _ error) {
	it, err := r.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return hlc.Timestamp{}, nil, false, fmt.Errorf("mvcc: read versions in [%q, %q): %w", start, end, err)
	}
	defer it.Close()
	// Versions of a key come newest first: look at the first, skip the
	// rest. A key's unversioned value sorts before its versions.
	var bareKey []byte
	for ok := it.First(); ok; {
		k := it.UnsafeKey()
		if k.Timestamp.IsEmpty() {
			bare = true
			bareKey = append(bareKey[:0], k.Key...)
			ok = it.Next()
			continue
		}
		if skip[string(k.Key)] {
			ok = it.NextKey()
			continue
		}
		if seen != nil && !(bareKey != nil && bytes.Equal(bareKey, k.Key)) {
			seen(k.Key, k.Timestamp)
		}
		if newest.Less(k.Timestamp) {
			newest, newestKey = k.Timestamp, append(newestKey[:0], k.Key...)
		}
		if each != nil {
			if err := each(it); err != nil {
				return hlc.Timestamp{}, nil, false, fmt.Errorf("mvcc: read versions in [%q, %q): %w", start, end, err)
			}
		}
		ok = it.NextKey()
	}
	if err := it.Err(); err != nil {
		return hlc.Timestamp{}, nil, false, fmt.Errorf("mvcc: read versions in [%q, %q): %w", start, end, err)
	}
	return newest, newestKey, bare, nil
}
