package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// Put writes value at key: a committed version at ts, or for a transaction
// an intent at txn.WriteTimestamp (ts is then ignored).
//
// A transactional write whose Sequence is below that of the transaction's
// intent on key is a replay of a write already done: it changes nothing and
// succeeds. The same sequence rewrites the intent (idempotent). A higher
// one keeps the intent's value in the lock's history (doc.go,
// "Savepoints").
//
// Errors: *kvpb.WriteIntentError (another transaction's intent on key),
// *kvpb.WriteTooOldError (invariants 3 and 4; nothing is written),
// *kvpb.TransactionRetryError (the key holds this transaction's intent from
// a newer epoch: the request is stale), *kvpb.InvalidArgumentError.
func Put(rw storage.ReadWriter, key []byte, ts hlc.Timestamp, value []byte, txn *kvpb.Transaction) error {
	return PutOpts(rw, key, ts, value, txn, WriteOptions{})
}

// WriteOptions adjust one write.
type WriteOptions struct {
	// NoLock is the caller's promise that key holds no lock record (an
	// exact in-memory lock table says so, and no earlier write of the
	// caller's batch laid one): the write skips reading the lock keyspace,
	// one engine lookup of the two every write makes.
	NoLock bool
	// NewestKnown is the caller's promise that Newest is at or above the
	// newest version of key (the tablet's validation cache, from the
	// key's or its row's last read). A Put with NoLock that Newest proves
	// clear of invariants 3 and 4 (Newest below the write's timestamp
	// and, in a transaction, not above its read timestamp) skips reading
	// key's versions, the other lookup of the two.
	NewestKnown bool
	Newest      hlc.Timestamp
}

// PutOpts is Put with options.
func PutOpts(rw storage.ReadWriter, key []byte, ts hlc.Timestamp, value []byte, txn *kvpb.Transaction, opts WriteOptions) error {
	w, err := prepareWrite(rw, key, ts, txn, opts, true)
	if err != nil || w.replay {
		return err
	}
	return w.write(rw, value, false)
}

// ConditionalPut writes value at key (as Put does) only if the value the
// writer would read there now equals expected (expectExists) or there is
// none (!expectExists); otherwise it fails with *kvpb.ConditionFailedError
// carrying the actual value. A transaction compares against its own intent
// first.
func ConditionalPut(rw storage.ReadWriter, key []byte, ts hlc.Timestamp, value, expected []byte, expectExists bool, txn *kvpb.Transaction) error {
	return ConditionalPutOpts(rw, key, ts, value, expected, expectExists, txn, WriteOptions{})
}

// ConditionalPutOpts is ConditionalPut with options.
func ConditionalPutOpts(rw storage.ReadWriter, key []byte, ts hlc.Timestamp, value, expected []byte, expectExists bool, txn *kvpb.Transaction, opts WriteOptions) error {
	w, err := prepareWrite(rw, key, ts, txn, opts, false)
	if err != nil || w.replay {
		return err
	}
	actual, exists, err := w.current(rw)
	if err != nil {
		return err
	}
	if exists != expectExists || (exists && !bytes.Equal(actual, expected)) {
		return &kvpb.ConditionFailedError{Key: append([]byte(nil), key...), ActualValue: actual}
	}
	return w.write(rw, value, false)
}

// Delete writes a tombstone at key (as Put writes a value) and reports
// whether the writer saw a value there. The tombstone is written even when
// there was none, so the deletion is ordered like any other write. A
// replayed transactional delete (see Put) changes nothing and reports false.
func Delete(rw storage.ReadWriter, key []byte, ts hlc.Timestamp, txn *kvpb.Transaction) (found bool, err error) {
	return DeleteOpts(rw, key, ts, txn, WriteOptions{})
}

// DeleteOpts is Delete with options.
func DeleteOpts(rw storage.ReadWriter, key []byte, ts hlc.Timestamp, txn *kvpb.Transaction, opts WriteOptions) (found bool, err error) {
	w, err := prepareWrite(rw, key, ts, txn, opts, false)
	if err != nil || w.replay {
		return false, err
	}
	_, found, err = w.current(rw)
	if err != nil {
		return false, err
	}
	return found, w.write(rw, nil, true)
}

// DeleteRange deletes every key in [start, end) with a value visible to the
// writer at its write timestamp and returns those keys in order. Another
// transaction's intent in the span fails the whole request with a
// *kvpb.WriteIntentError listing all of them.
func DeleteRange(rw storage.ReadWriter, start, end []byte, ts hlc.Timestamp, txn *kvpb.Transaction) (deleted [][]byte, err error) {
	return DeleteRangeOpts(rw, start, end, ts, txn, WriteOptions{})
}

// DeleteRangeOpts is DeleteRange with options. opts.NoLock is the
// caller's promise that no lock record lies anywhere in [start, end) (as
// ReadOptions.NoLocksInSpan): the deletion then reads nothing of the lock
// keyspace. Without it, a span found to hold no lock record is read and
// its keys deleted as if promised. Either way the range's scan is its one
// read of the span: each key it found is deleted blind (its value is not
// read again, only its newest version's timestamp, as every write checks
// it). NewestKnown and Newest are ignored.
func DeleteRangeOpts(rw storage.ReadWriter, start, end []byte, ts hlc.Timestamp, txn *kvpb.Transaction, opts WriteOptions) (deleted [][]byte, err error) {
	writeTS := ts
	var reader *kvpb.Transaction
	if txn != nil {
		writeTS = txn.WriteTimestamp
		// The transaction sees its own intents; uncertainty does not apply
		// to a write, which fails on newer versions instead.
		reader = txn.Clone()
		reader.GlobalUncertaintyLimit = hlc.Timestamp{}
	}
	if writeTS.IsEmpty() {
		return nil, invalidArg("delete range [%q, %q): empty timestamp", start, end)
	}
	noLocks := opts.NoLock
	if !noLocks {
		// Every other transaction's intent in the span is in the way of a
		// range deletion, whatever its timestamp: list them all at once.
		intents, err := ScanIntents(rw, start, end, 0)
		if err != nil {
			return nil, err
		}
		var conflicts []kvpb.Intent
		for _, in := range intents {
			if txn == nil || in.Txn.ID != txn.ID {
				conflicts = append(conflicts, in)
			}
		}
		if len(conflicts) > 0 {
			return nil, &kvpb.WriteIntentError{Intents: conflicts}
		}
		// ScanIntents lists every lock record of the span, the writer's
		// own included: with none, the span holds none.
		noLocks = len(intents) == 0
	}
	res, err := Scan(rw, start, end, writeTS, ScanOptions{ReadOptions: ReadOptions{Txn: reader, NoLocksInSpan: noLocks}})
	if err != nil {
		return nil, err
	}
	for _, row := range res.Rows {
		// Each deletion lays a version or an intent on its own key only,
		// so the span's other keys still hold no lock record.
		w, err := prepareWrite(rw, row.Key, ts, txn, WriteOptions{NoLock: noLocks}, true)
		if err != nil {
			return nil, err
		}
		if !w.replay {
			if err := w.write(rw, nil, true); err != nil {
				return nil, err
			}
		}
		deleted = append(deleted, row.Key)
	}
	return deleted, nil
}

// pendingWrite is a write that passed the conflict checks.
type pendingWrite struct {
	key    []byte
	ts     hlc.Timestamp // where the version or intent goes
	txn    *kvpb.Transaction
	own    *lockRecord // the writer's own intent already on key (same or older epoch)
	latest hlc.Timestamp
	replay bool // a replayed transactional write: do nothing
}

// prepareWrite checks key for conflicts in the order the invariants give:
// intents (1), then committed versions (3, 4). blind: the caller does not
// read the value it replaces (pendingWrite.current), so opts.Newest may
// stand for the read of key's versions.
func prepareWrite(r storage.Reader, key []byte, ts hlc.Timestamp, txn *kvpb.Transaction, opts WriteOptions, blind bool) (*pendingWrite, error) {
	if len(key) == 0 {
		return nil, invalidArg("write: empty key")
	}
	if keys.IsLocal(key) {
		return nil, invalidArg("write: %q is a local key", key)
	}
	w := &pendingWrite{key: key, ts: ts, txn: txn}
	if txn != nil {
		if txn.WriteTimestamp.IsEmpty() || txn.ReadTimestamp.IsEmpty() {
			return nil, invalidArg("write %q: transaction %s without timestamps", key, txn.Short())
		}
		w.ts = txn.WriteTimestamp
	}
	if w.ts.IsEmpty() {
		return nil, invalidArg("write %q: empty timestamp", key)
	}
	var lk *lockRecord
	if !opts.NoLock {
		var err error
		if lk, err = getLock(r, key); err != nil {
			return nil, err
		}
	}
	if lk != nil {
		if txn == nil || lk.Txn.ID != txn.ID {
			return nil, &kvpb.WriteIntentError{Intents: []kvpb.Intent{{Key: append([]byte(nil), key...), Txn: lk.Txn}}}
		}
		switch {
		case lk.Txn.Epoch > txn.Epoch:
			return nil, staleEpoch(key, lk.Txn.Epoch, txn.Epoch)
		case lk.Txn.Epoch == txn.Epoch && txn.Sequence < lk.Txn.Sequence:
			w.replay = true
			return w, nil
		}
		w.own = lk
		// A pushed intent stays where the push put it.
		if lk.Txn.Epoch == txn.Epoch {
			w.ts = w.ts.Forward(lk.Txn.WriteTimestamp)
		}
	}
	if blind && opts.NoLock && opts.NewestKnown && opts.Newest.Less(w.ts) && (txn == nil || !txn.ReadTimestamp.Less(opts.Newest)) {
		// Every version of key lies at or below Newest: both checks
		// below pass. w.latest stays unknown; a blind write never asks.
		return w, nil
	}
	latest, err := latestVersion(r, key)
	if err != nil {
		return nil, err
	}
	w.latest = latest
	if latest.IsEmpty() {
		return w, nil
	}
	if w.ts.LessEq(latest) {
		return nil, writeTooOld(key, w.ts, latest.Next())
	}
	if txn != nil && txn.ReadTimestamp.Less(latest) {
		return nil, writeTooOld(key, w.ts, latest.Next().Forward(w.ts))
	}
	return w, nil
}

// current returns the value the writer reads at key now: its own intent's
// newest value not rolled back (current epoch), else the newest committed
// version (which prepareWrite has shown to be below the write).
func (w *pendingWrite) current(r storage.Reader) (value []byte, exists bool, err error) {
	if w.own != nil && w.own.Txn.Epoch == w.txn.Epoch {
		if v, ok := w.own.visible(w.txn.IgnoredSeqNums); ok {
			if v.Tombstone {
				return nil, false, nil
			}
			return v.Value, true, nil
		}
	}
	if w.latest.IsEmpty() {
		return nil, false, nil
	}
	raw, ok, err := r.Get(storage.MVCCKey{Key: w.key, Timestamp: w.latest})
	if err != nil {
		return nil, false, fmt.Errorf("mvcc: read %q@%s: %w", w.key, w.latest, err)
	}
	if !ok {
		return nil, false, fmt.Errorf("%w: version %q@%s vanished", ErrInvariant, w.key, w.latest)
	}
	v, tomb, err := decodeValue(raw)
	if err != nil {
		return nil, false, fmt.Errorf("mvcc: version %q@%s: %w", w.key, w.latest, err)
	}
	if tomb {
		return nil, false, nil
	}
	return v, true, nil
}

func (w *pendingWrite) write(wr storage.Writer, value []byte, tombstone bool) error {
	if w.txn == nil {
		if err := wr.Put(storage.MVCCKey{Key: w.key, Timestamp: w.ts}, encodeValue(value, tombstone)); err != nil {
			return fmt.Errorf("mvcc: write %q@%s: %w", w.key, w.ts, err)
		}
		return nil
	}
	rec := lockRecord{Txn: w.txn.TxnMeta, Tombstone: tombstone}
	rec.Txn.WriteTimestamp = w.ts
	if !tombstone {
		rec.Value = value
	}
	if w.own != nil && w.own.Txn.Epoch == w.txn.Epoch {
		rec.History = w.history()
	}
	if err := wr.Put(storage.MVCCKey{Key: keys.Lock(w.key)}, encodeLockRecord(nil, &rec)); err != nil {
		return fmt.Errorf("mvcc: write intent on %q: %w", w.key, err)
	}
	return nil
}

// history is the lock history a write over the writer's own intent of the
// same epoch keeps: the old history and the old current value (unless the
// write has the same sequence number, which rewrites it in place), minus
// every value whose sequence number is ignored, since no later read or
// resolution of this epoch can see those (ignored ranges only grow).
func (w *pendingWrite) history() []seqValue {
	ignored := w.txn.IgnoredSeqNums
	var out []seqValue
	for _, h := range w.own.History {
		if !kvpb.SeqIgnored(ignored, h.Seq) {
			out = append(out, h)
		}
	}
	if cur := w.own.Txn.Sequence; !w.own.LockOnly && cur < w.txn.Sequence && !kvpb.SeqIgnored(ignored, cur) {
		out = append(out, seqValue{Seq: cur, Value: w.own.Value, Tombstone: w.own.Tombstone})
	}
	return out
}

// latestVersion returns the timestamp of key's newest committed version, or
// the zero timestamp when it has none.
func latestVersion(r storage.Reader, key []byte) (hlc.Timestamp, error) {
	it, err := r.NewIter(storage.IterOptions{Prefix: true})
	if err != nil {
		return hlc.Timestamp{}, fmt.Errorf("mvcc: read versions of %q: %w", key, err)
	}
	defer it.Close()
	for ok := it.SeekGE(storage.MVCCKey{Key: key}); ok; ok = it.Next() {
		k := it.UnsafeKey()
		if !bytes.Equal(k.Key, key) {
			break
		}
		if !k.Timestamp.IsEmpty() {
			return k.Timestamp, nil
		}
	}
	if err := it.Err(); err != nil {
		return hlc.Timestamp{}, fmt.Errorf("mvcc: read versions of %q: %w", key, err)
	}
	return hlc.Timestamp{}, nil
}
