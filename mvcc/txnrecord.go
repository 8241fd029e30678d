package mvcc

import (
	"fmt"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/google/uuid"
)

// GetTxnRecord reads the record of transaction id anchored at anchor;
// found is false when there is none.
func GetTxnRecord(r storage.Reader, anchor []byte, id uuid.UUID) (txn kvpb.Transaction, found bool, err error) {
	raw, ok, err := r.Get(storage.MVCCKey{Key: keys.TxnRecord(anchor, id)})
	if err != nil {
		return kvpb.Transaction{}, false, fmt.Errorf("mvcc: read txn record %s: %w", id, err)
	}
	if !ok {
		return kvpb.Transaction{}, false, nil
	}
	txn, err = decodeTxnRecord(raw)
	if err != nil {
		return kvpb.Transaction{}, false, fmt.Errorf("mvcc: txn record %s: %w", id, err)
	}
	return txn, true, nil
}

// PutTxnRecord writes txn's record at keys.TxnRecord(txn.Key, txn.ID),
// replacing any previous one. Deciding whether the transition is allowed
// (e.g. never from a final status) is the caller's job.
func PutTxnRecord(w storage.Writer, txn *kvpb.Transaction) error {
	if len(txn.Key) == 0 {
		return invalidArg("txn record of %s: empty anchor key", txn.Short())
	}
	if err := w.Put(storage.MVCCKey{Key: keys.TxnRecord(txn.Key, txn.ID)}, encodeTxnRecord(nil, txn)); err != nil {
		return fmt.Errorf("mvcc: write txn record %s: %w", txn.Short(), err)
	}
	return nil
}

// DeleteTxnRecord removes a record (once its intents are all resolved).
func DeleteTxnRecord(w storage.Writer, anchor []byte, id uuid.UUID) error {
	if err := w.Delete(storage.MVCCKey{Key: keys.TxnRecord(anchor, id)}); err != nil {
		return fmt.Errorf("mvcc: delete txn record %s: %w", id, err)
	}
	return nil
}

// IsExpired reports whether a pending record is abandoned: its last sign
// of life (the later of LastHeartbeat and MinTimestamp) is more than
// liveness before now. Final records never expire.
func IsExpired(rec kvpb.Transaction, now hlc.Timestamp, liveness time.Duration) bool {
	if rec.Status != kvpb.Pending {
		return false
	}
	last := rec.LastHeartbeat.Forward(rec.MinTimestamp)
	return last.WallTime < now.WallTime-liveness.Nanoseconds()
}

// ScanTxnRecords calls fn with every transaction record anchored in
// [start, end), in key order, until fn returns false or an error.
func ScanTxnRecords(r storage.Reader, start, end []byte, fn func(kvpb.Transaction) (bool, error)) error {
	lo, hi := keys.TxnRecordSpan(start, end)
	it, err := r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("mvcc: scan txn records: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		raw, err := it.UnsafeValue()
		if err != nil {
			return err
		}
		txn, err := decodeTxnRecord(raw)
		if err != nil {
			return fmt.Errorf("mvcc: txn record %q: %w", it.UnsafeKey().Key, err)
		}
		if more, err := fn(txn); err != nil || !more {
			return err
		}
	}
	return it.Err()
}
