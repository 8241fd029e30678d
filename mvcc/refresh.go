package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/google/uuid"
)

// CheckRefresh verifies that reads of [start, end) (end empty: the single
// key start) made at from would return the same at to: no committed version
// in (from, to] and no other transaction's intent at or below to. Intents
// of txnID are the reader's own and ignored. It fails with
// *kvpb.TransactionRetryError{RetrySerializable} naming the first key that
// changed.
func CheckRefresh(r storage.Reader, start, end []byte, from, to hlc.Timestamp, txnID uuid.UUID) error {
	return CheckRefreshOpts(r, start, end, from, to, txnID, WriteOptions{})
}

// CheckRefreshOpts is CheckRefresh with options; NoLock is the caller's
// promise that no lock record lies in the span (see AcquireLockOpts for
// why skipping that walk matters on hot rows).
func CheckRefreshOpts(r storage.Reader, start, end []byte, from, to hlc.Timestamp, txnID uuid.UUID, opts WriteOptions) error {
	_, _, err := checkRefresh(r, start, end, from, to, txnID, opts)
	return err
}

// CheckRefreshNewest is CheckRefreshOpts of the single key key that also
// returns, when the check passed, the timestamp of the key's newest
// version (empty: it has none) and known, whether that timestamp is
// exact: false when the key has an unversioned value, which has no
// timestamp to compare. A caller that remembers newest may pass a later
// check of the key from a timestamp at or above it without reading, for
// as long as it knows that nothing wrote the key since (the tablet's
// validation cache).
func CheckRefreshNewest(r storage.Reader, key []byte, from, to hlc.Timestamp, txnID uuid.UUID, opts WriteOptions) (newest hlc.Timestamp, known bool, err error) {
	return checkRefresh(r, key, nil, from, to, txnID, opts)
}

// checkRefresh is CheckRefreshOpts; for a single key (end empty) it also
// returns what CheckRefreshNewest does.
func checkRefresh(r storage.Reader, start, end []byte, from, to hlc.Timestamp, txnID uuid.UUID, opts WriteOptions) (newest hlc.Timestamp, known bool, _ error) {
	point := len(end) == 0
	if len(end) == 0 {
		end = keys.Next(start)
	}
	if bytes.Compare(start, end) >= 0 || to.Less(from) {
		return hlc.Timestamp{}, false, invalidArg("refresh [%q, %q) from %s to %s", start, end, from, to)
	}
	retry := func(format string, args ...any) error {
		return &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable, Detail: fmt.Sprintf(format, args...)}
	}
	var failure error
	err := lockWalker(opts)(r, start, end, func(key []byte, lk *lockRecord) (bool, error) {
		if lk.Txn.ID != txnID && !lk.LockOnly && lk.Txn.WriteTimestamp.LessEq(to) {
			failure = retry("intent of txn %s on %q at %s", lk.Txn.Short(), key, lk.Txn.WriteTimestamp)
			return false, nil
		}
		return true, nil
	})
	if err != nil || failure != nil {
		return hlc.Timestamp{}, false, firstErr(err, failure)
	}
	it, err := r.NewIter(storage.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return hlc.Timestamp{}, false, fmt.Errorf("mvcc: refresh: %w", err)
	}
	defer it.Close()
	// For a single key the first version met is its newest (versions
	// come newest first); an unversioned value there makes it unknown.
	known = point
	first := true
	// Per key, versions come newest first: step over those above to; the
	// next one decides; then skip the rest of the key's history.
	for ok := it.First(); ok; {
		k := it.UnsafeKey()
		if k.Timestamp.IsEmpty() {
			known = false
		} else if first {
			newest, first = k.Timestamp, false
		}
		if k.Timestamp.IsEmpty() || to.Less(k.Timestamp) {
			ok = it.Next()
			continue
		}
		if from.Less(k.Timestamp) {
			return hlc.Timestamp{}, false, retry("committed value on %q at %s", k.Key, k.Timestamp)
		}
		ok = it.NextKey()
	}
	if err := it.Err(); err != nil {
		return hlc.Timestamp{}, false, fmt.Errorf("mvcc: refresh: %w", err)
	}
	return newest, known, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
