package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// ReadOptions qualify a read.
type ReadOptions struct {
	// Txn is the reading transaction, or nil. A transaction reads its own
	// intents of its current epoch (the newest value whose sequence is not
	// in Txn.IgnoredSeqNums, else what is below them) and uses its
	// GlobalUncertaintyLimit.
	Txn *kvpb.Transaction
	// LocalUncertaintyLimit, when set and below the global limit, narrows
	// the uncertainty window on this leaseholder
	// (kvpb.Transaction.LocalUncertaintyLimit): a version in (ts, global
	// limit] is uncertain only if its local timestamp is at or below it, and
	// an intent above both ts and it is not in the way (it was written after
	// the reader's observation of this node). Zero: the global limit.
	LocalUncertaintyLimit hlc.Timestamp
	// Inconsistent ignores other transactions' intents (the committed value
	// below them is returned) and reports those that would have conflicted
	// in the result's Intents.
	Inconsistent bool
	// NoLocksInSpan is the caller's promise that the reader holds no lock
	// record anywhere in the read's span, so the read skips the lock
	// keyspace (one engine lookup per Get, one iterator per Scan). mvcc
	// cannot check the promise without paying for the lookup it saves: the
	// caller must know it exactly (the tablet's lock table does, see its
	// invariant 11). A false promise makes the read miss intents.
	NoLocksInSpan bool
}

// GetResult is the answer of Get.
type GetResult struct {
	// Value is the visible value (a copy), or nil when there is none. An
	// empty value is non-nil.
	Value []byte
	// Timestamp is the version's timestamp (the intent's, for an own write).
	Timestamp hlc.Timestamp
	// Intents are the intents an Inconsistent read ignored.
	Intents []kvpb.Intent
}

// ScanOptions qualify a Scan.
type ScanOptions struct {
	ReadOptions
	// Reverse returns rows from the end of the span backwards.
	Reverse bool
	// MaxKeys stops the scan after that many rows; 0 is unlimited.
	MaxKeys int64
	// MaxBytes bounds the sum of len(key)+len(value) of the rows: a row that
	// would exceed it is left for the resume span, except that the first
	// row is always returned. 0 is unlimited.
	MaxBytes int64
	// CountTags, when non-empty, makes the scan count instead of return:
	// Rows stays empty and Count is the number of visible values whose
	// first byte is one of CountTags (a SQL table's row keys, told from
	// its column entries by their values' tag: sql/rowenc). MaxKeys then
	// bounds the visible values examined, tagged or not; MaxBytes is
	// ignored. Locks, intents and uncertainty are met exactly as by a
	// scan that returns the rows.
	CountTags []byte
	// ReadsOnTo, when above the scan's end, is where the caller's scan
	// goes on to after this one (kvpb.ScanRequest.ReadsOnTo): the files up
	// to it may be read ahead (storage.IterOptions.ScanEnd).
	ReadsOnTo []byte
	// Rows, if not nil, is where the rows go while they fit its capacity
	// (from its start; its length is ignored): a caller with room for the
	// rows it expects (a point read's one) saves their slice's allocation.
	// More rows than that go to a slice Scan allocates, as without it.
	Rows []kvpb.KeyValue
	// TrackNewest asks a forward scan that returns rows (not Reverse, no
	// CountTags) for the newest version of every key it met
	// (ScanResult.Newest): a tablet's row cache may answer a later read
	// of the span at any timestamp at or above it with the same rows.
	TrackNewest bool
}

// ScanResult is the answer of Scan.
type ScanResult struct {
	// Rows in scan order; keys and values are copies.
	Rows []kvpb.KeyValue
	// ResumeSpan is the part of the span not read because a limit stopped
	// the scan while keys remained; nil otherwise.
	ResumeSpan *kvpb.Span
	// Intents are the intents an Inconsistent scan ignored.
	Intents []kvpb.Intent
	// Count is the number of tagged values counted (ScanOptions.CountTags).
	Count int64
	// DiskBytes, for a count (CountTags) only, is how many bytes of
	// blocks it read from outside the block cache (storage.Iterator's
	// DiskBytes): sql/exec's count reads a seeking disk front to back,
	// but what the cache holds in any order.
	DiskBytes int64
	// Newest, when NewestKnown (ScanOptions.TrackNewest), is the newest
	// version of any key the scan met, tombstones and versions above
	// the read timestamp included: a read of the span at or above it sees
	// every key's newest version, the rows this scan returned if it
	// covered the whole span (no ResumeSpan). Unknown when the scan met a
	// lock record or a key without a timestamp.
	Newest      hlc.Timestamp
	NewestKnown bool
}

// Get reads the value of key visible at ts (invariant 5).
//
// Errors: *kvpb.WriteIntentError when another transaction's intent is in
// the way; *kvpb.ReadWithinUncertaintyIntervalError when a committed value
// is in (ts, Txn.GlobalUncertaintyLimit]; *kvpb.InvalidArgumentError for an
// empty key or timestamp.
func Get(r storage.Reader, key []byte, ts hlc.Timestamp, opts ReadOptions) (GetResult, error) {
	if len(key) == 0 {
		return GetResult{}, invalidArg("get: empty key")
	}
	if ts.IsEmpty() {
		return GetResult{}, invalidArg("get %q: empty timestamp", key)
	}
	rd := newReadState(ts, opts)
	var lk *lockRecord
	if !opts.NoLocksInSpan {
		var err error
		if lk, err = getLock(r, key); err != nil {
			return GetResult{}, err
		}
	}
	var res GetResult
	var kv kvpb.KeyValue
	var found bool
	var err error
	readVersions := true
	if lk != nil {
		kv, found, readVersions, err = rd.checkLock(key, lk)
		if err != nil {
			return GetResult{}, err
		}
	}
	if readVersions {
		it, err := r.NewIter(storage.IterOptions{Prefix: true})
		if err != nil {
			return GetResult{}, fmt.Errorf("mvcc: get %q: %w", key, err)
		}
		defer it.Close()
		// Versions above the uncertainty limit can neither be read nor make
		// the read uncertain: seek past them.
		it.SeekGE(storage.MVCCKey{Key: key, Timestamp: rd.limit})
		kv, found, err = rd.readVersions(it, key, false, cloneValue)
		if err != nil {
			return GetResult{}, err
		}
	}
	if err := rd.conflictErr(); err != nil {
		return GetResult{}, err
	}
	if found {
		res.Value, res.Timestamp = kv.Value, kv.Timestamp
	}
	res.Intents = rd.ignored
	return res, nil
}

// Scan reads the values visible at ts of the keys in [start, end), in key
// order (or reverse), within the options' limits. It walks versions and
// locks as two ordered streams merged by key; NextKey skips old versions, so
// an in-order scan never seeks per row.
//
// Errors as for Get; a WriteIntentError lists every conflicting intent met
// before the scan stopped. An uncertain value fails the scan at once.
func Scan(r storage.Reader, start, end []byte, ts hlc.Timestamp, opts ScanOptions) (ScanResult, error) {
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return ScanResult{}, invalidArg("scan: empty span [%q, %q)", start, end)
	}
	if ts.IsEmpty() {
		return ScanResult{}, invalidArg("scan [%q, %q): empty timestamp", start, end)
	}
	if opts.MaxKeys < 0 || opts.MaxBytes < 0 {
		return ScanResult{}, invalidArg("scan: negative limit")
	}
	s := scanner{
		readState: newReadState(ts, opts.ReadOptions),
		opts:      opts,
		start:     start,
		end:       end,
		rows:      opts.Rows[:0],
	}
	if err := s.run(r); err != nil {
		return ScanResult{}, err
	}
	if err := s.conflictErr(); err != nil {
		return ScanResult{}, err
	}
	known := opts.TrackNewest && !opts.Reverse && !s.counting() && !s.newestLost
	return ScanResult{Rows: s.rows, ResumeSpan: s.resume, Intents: s.ignored, Count: s.count, DiskBytes: s.diskBytes,
		Newest: s.newest, NewestKnown: known}, nil
}

// readState holds what a read decides per key: the timestamps and what it
// met along the way.
type readState struct {
	ts, limit hlc.Timestamp // limit >= ts: end of the uncertainty window
	// local <= limit: the local uncertainty limit (ReadOptions); it may be
	// below ts.
	local        hlc.Timestamp
	txn          *kvpb.Transaction
	inconsistent bool
	conflicts    []kvpb.Intent
	ignored      []kvpb.Intent
}

func newReadState(ts hlc.Timestamp, opts ReadOptions) readState {
	rd := readState{ts: ts, limit: ts, txn: opts.Txn, inconsistent: opts.Inconsistent}
	if opts.Txn != nil {
		rd.limit = ts.Forward(opts.Txn.GlobalUncertaintyLimit)
	}
	rd.local = rd.limit
	if l := opts.LocalUncertaintyLimit; !l.IsEmpty() && l.Less(rd.limit) {
		rd.local = l
	}
	return rd
}

func (rd *readState) conflictErr() error {
	if len(rd.conflicts) == 0 {
		return nil
	}
	return &kvpb.WriteIntentError{Intents: rd.conflicts}
}

// checkLock decides what the lock on key means for this read: either the
// reader's own provisional value (found reports whether it is a value
// rather than a deletion), or whether to go on to the committed versions.
func (rd *readState) checkLock(key []byte, lk *lockRecord) (kv kvpb.KeyValue, found, readVersions bool, err error) {
	if rd.txn != nil && lk.Txn.ID == rd.txn.ID {
		switch {
		case lk.Txn.Epoch == rd.txn.Epoch:
			v, ok := lk.visible(rd.txn.IgnoredSeqNums)
			if !ok {
				// Every value was rolled back to a savepoint: the key
				// reads as if the transaction had not written it.
				return kvpb.KeyValue{}, false, true, nil
			}
			if v.Tombstone {
				return kvpb.KeyValue{}, false, false, nil
			}
			return kvpb.KeyValue{Key: key, Value: v.Value, Timestamp: lk.Txn.WriteTimestamp}, true, false, nil
		case lk.Txn.Epoch < rd.txn.Epoch:
			// Written by an earlier attempt: not part of this one.
			return kvpb.KeyValue{}, false, true, nil
		default:
			return kvpb.KeyValue{}, false, false, staleEpoch(key, lk.Txn.Epoch, rd.txn.Epoch)
		}
	}
	if p := lk.Txn.WriteTimestamp; lk.LockOnly || (rd.ts.Less(p) && rd.local.Less(p)) {
		// A row lock holds no value to wait for; or written after
		// anything this reader must observe: above the read and above the
		// local limit, the intent was written (or pushed) on this
		// leaseholder after the reader observed its clock (an intent's
		// timestamp is at most the clock of the leaseholder holding it).
		return kvpb.KeyValue{}, false, true, nil
	}
	// A copy: a counting scan reuses the memory of key for the next one.
	in := kvpb.Intent{Key: append([]byte(nil), key...), Txn: lk.Txn}
	if rd.inconsistent {
		rd.ignored = append(rd.ignored, in)
		return kvpb.KeyValue{}, false, true, nil
	}
	rd.conflicts = append(rd.conflicts, in)
	return kvpb.KeyValue{}, false, false, nil
}

// uncertain returns the error for a committed version at vts (the
// iterator's position), or nil when vts is outside (ts, limit] or, above
// the local limit, its local timestamp is too: then it was written on this
// leaseholder after the reader observed the clock, or resolved from such an
// intent, and cannot have been acknowledged before the reader started.
func (rd *readState) uncertain(key []byte, vts hlc.Timestamp, it *storage.Iterator) error {
	if !rd.ts.Less(vts) || rd.limit.Less(vts) {
		return nil
	}
	if rd.local.Less(vts) {
		raw, err := it.UnsafeValue()
		if err != nil {
			return fmt.Errorf("mvcc: read %q@%s: %w", key, vts, err)
		}
		_, _, local, err := decodeValueLocal(raw)
		if err != nil {
			return fmt.Errorf("mvcc: version %q@%s: %w", key, vts, err)
		}
		if local.IsEmpty() || rd.local.Less(local) {
			return nil
		}
	}
	return &kvpb.ReadWithinUncertaintyIntervalError{
		Key:               append([]byte(nil), key...),
		ReadTimestamp:     rd.ts,
		ExistingTimestamp: vts,
		UncertaintyLimit:  rd.limit,
	}
}

// seekAfterNexts is how many newer-than-read versions a forward walk steps
// over with Next before it seeks instead: Next is much cheaper than a seek
// when there are only a few.
const seekAfterNexts = 4

// cloneValue copies a value out of iterator memory; an empty value stays
// non-nil (it is not a deletion).
func cloneValue(v []byte) []byte { return append([]byte{}, v...) }

// readVersions walks forward over key's versions from the iterator's
// position and returns the visible one, its value copied by copyOut. It leaves the iterator somewhere
// within or after key's versions. When skipLimit is true versions above the
// uncertainty limit may still be ahead; they are stepped over (and, past a
// few, sought over).
func (rd *readState) readVersions(it *storage.Iterator, key []byte, skipLimit bool, copyOut func([]byte) []byte) (kvpb.KeyValue, bool, error) {
	nexts := 0
	for it.Valid() {
		k := it.UnsafeKey()
		if !bytes.Equal(k.Key, key) {
			break
		}
		if k.Timestamp.IsEmpty() { // not an MVCC entry; not ours to read
			it.Next()
			continue
		}
		if rd.ts.Less(k.Timestamp) {
			if err := rd.uncertain(key, k.Timestamp, it); err != nil {
				return kvpb.KeyValue{}, false, err
			}
			if skipLimit && rd.limit.Less(k.Timestamp) && nexts >= seekAfterNexts {
				it.SeekGE(storage.MVCCKey{Key: key, Timestamp: rd.limit})
				skipLimit = false
				continue
			}
			nexts++
			it.Next()
			continue
		}
		raw, err := it.UnsafeValue()
		if err != nil {
			return kvpb.KeyValue{}, false, err
		}
		v, tomb, err := decodeValue(raw)
		if err != nil {
			return kvpb.KeyValue{}, false, fmt.Errorf("mvcc: version %s: %w", k, err)
		}
		if tomb {
			return kvpb.KeyValue{}, false, nil
		}
		return kvpb.KeyValue{Key: key, Value: copyOut(v), Timestamp: k.Timestamp}, true, nil
	}
	if err := it.Err(); err != nil {
		return kvpb.KeyValue{}, false, fmt.Errorf("mvcc: read %q: %w", key, err)
	}
	return kvpb.KeyValue{}, false, nil
}

// getLock returns the lock record on key, or nil.
func getLock(r storage.Reader, key []byte) (*lockRecord, error) {
	raw, ok, err := r.Get(storage.MVCCKey{Key: keys.Lock(key)})
	if err != nil {
		return nil, fmt.Errorf("mvcc: read lock of %q: %w", key, err)
	}
	if !ok {
		return nil, nil
	}
	lk, err := decodeLockRecord(raw)
	if err != nil {
		return nil, fmt.Errorf("mvcc: lock of %q: %w", key, err)
	}
	return &lk, nil
}
