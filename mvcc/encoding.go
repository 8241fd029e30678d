package mvcc

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// Versioned value tags (doc.go, "Value encodings").
const (
	tagTombstone byte = 0x00
	tagValue     byte = 0x01
	// tagValueLocal and tagTombstoneLocal carry a local timestamp (below
	// the version's) before the user bytes: the version was resolved from
	// an intent at a higher commit timestamp than the intent's.
	tagValueLocal     byte = 0x02
	tagTombstoneLocal byte = 0x03
)

// encodeValue returns the engine value of a committed version.
func encodeValue(value []byte, tombstone bool) []byte {
	if tombstone {
		return []byte{tagTombstone}
	}
	out := make([]byte, 0, 1+len(value))
	return append(append(out, tagValue), value...)
}

// encodeValueLocal is encodeValue for a version at ts whose local timestamp
// is local: the leaseholder's clock was at or above local when the value
// was written (as an intent), which is what uncertainty on that leaseholder
// needs (doc.go, "Local timestamps"). A local timestamp at or above ts adds
// nothing and is not stored.
func encodeValueLocal(value []byte, tombstone bool, ts, local hlc.Timestamp) []byte {
	if local.IsEmpty() || ts.LessEq(local) {
		return encodeValue(value, tombstone)
	}
	tag := tagValueLocal
	if tombstone {
		tag = tagTombstoneLocal
	}
	out := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(value))
	out = appendTimestamp(append(out, tag), local)
	if !tombstone {
		out = append(out, value...)
	}
	return out
}

// decodeValue splits an engine value into its user bytes (aliasing enc) and
// whether it is a tombstone.
func decodeValue(enc []byte) (value []byte, tombstone bool, err error) {
	value, tombstone, _, err = decodeValueLocal(enc)
	return value, tombstone, err
}

// decodeValueLocal is decodeValue that also returns the version's local
// timestamp (zero when it has none: the version's own timestamp is its
// local one).
func decodeValueLocal(enc []byte) (value []byte, tombstone bool, local hlc.Timestamp, err error) {
	if len(enc) == 0 {
		return nil, false, hlc.Timestamp{}, fmt.Errorf("%w: empty version value", ErrCorrupt)
	}
	switch enc[0] {
	case tagTombstone:
		if len(enc) != 1 {
			return nil, false, hlc.Timestamp{}, fmt.Errorf("%w: tombstone with %d trailing bytes", ErrCorrupt, len(enc)-1)
		}
		return nil, true, hlc.Timestamp{}, nil
	case tagValue:
		return enc[1:], false, hlc.Timestamp{}, nil
	case tagValueLocal, tagTombstoneLocal:
		d := decoder{buf: enc, off: 1}
		local = d.timestamp()
		if d.err == nil && local.IsEmpty() {
			d.fail("empty local timestamp")
		}
		if d.err != nil {
			return nil, false, hlc.Timestamp{}, fmt.Errorf("%w: version local timestamp: %v", ErrCorrupt, d.err)
		}
		if enc[0] == tagTombstoneLocal {
			if d.off != len(enc) {
				return nil, false, hlc.Timestamp{}, fmt.Errorf("%w: tombstone with %d trailing bytes", ErrCorrupt, len(enc)-d.off)
			}
			return nil, true, local, nil
		}
		return enc[d.off:], false, local, nil
	}
	return nil, false, hlc.Timestamp{}, fmt.Errorf("%w: unknown value tag %#x", ErrCorrupt, enc[0])
}

// Record format versions: the first byte of every lock and transaction
// record. A decoder refuses versions it does not know rather than guess.
const (
	lockRecordV1 byte = 1
	txnRecordV1  byte = 1
	// txnRecordV2 is V1 followed by Transaction.IgnoredSeqNums.
	txnRecordV2 byte = 2
)

// lockRecord is what the lock keyspace stores for an intent.
type lockRecord struct {
	Txn       kvpb.TxnMeta // Txn.WriteTimestamp is the intent's timestamp
	Value     []byte       // provisional value; nil when Tombstone
	Tombstone bool
	// LockOnly: a row lock (kvpb.LockRequest) with no value at all; Value
	// is nil, Tombstone false and History empty. Reads, the holder's
	// included, see the committed versions through it; resolving it
	// writes nothing.
	LockOnly bool
	// History holds the transaction's earlier values of the key in the
	// lock's epoch, oldest first, at sequence numbers strictly increasing
	// and below Txn.Sequence (the current value's), so a rollback to a
	// savepoint can fall back to them (doc.go, "Savepoints").
	History []seqValue
}

// seqValue is a value (or deletion) a transaction wrote at a sequence
// number.
type seqValue struct {
	Seq       int32
	Value     []byte // nil when Tombstone
	Tombstone bool
}

// visible returns the newest of the lock's values whose sequence number is
// not ignored; ok is false when every value was rolled back.
func (r *lockRecord) visible(ignored []kvpb.SeqRange) (v seqValue, ok bool) {
	if r.LockOnly {
		return seqValue{}, false
	}
	if !kvpb.SeqIgnored(ignored, r.Txn.Sequence) {
		return seqValue{Seq: r.Txn.Sequence, Value: r.Value, Tombstone: r.Tombstone}, true
	}
	for i := len(r.History) - 1; i >= 0; i-- {
		if h := r.History[i]; !kvpb.SeqIgnored(ignored, h.Seq) {
			return h, true
		}
	}
	return seqValue{}, false
}

const (
	lockFlagTombstone byte = 1 << 0
	// lockFlagHistory: a count and that many history entries follow the
	// TxnMeta. Records without history (the common case) keep the V1
	// layout byte for byte.
	lockFlagHistory byte = 1 << 1
	// lockFlagLockOnly: a lock without a value (lockRecord.LockOnly);
	// nothing follows the TxnMeta.
	lockFlagLockOnly byte = 1 << 2

	lockFlagsKnown = lockFlagTombstone | lockFlagHistory | lockFlagLockOnly
)

// encodeLockRecord: version, flags, TxnMeta, [history], value (the rest of
// the bytes). A history entry is its seq, then 1 for a deletion or 0 and
// the length-prefixed value.
func encodeLockRecord(dst []byte, r *lockRecord) []byte {
	dst = append(dst, lockRecordV1)
	var flags byte
	if r.Tombstone {
		flags |= lockFlagTombstone
	}
	if len(r.History) > 0 {
		flags |= lockFlagHistory
	}
	if r.LockOnly {
		flags |= lockFlagLockOnly
	}
	dst = append(dst, flags)
	dst = appendTxnMeta(dst, &r.Txn)
	if len(r.History) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(r.History)))
		for _, h := range r.History {
			dst = binary.AppendVarint(dst, int64(h.Seq))
			if h.Tombstone {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
				dst = appendBytes(dst, h.Value)
			}
		}
	}
	if !r.Tombstone && !r.LockOnly {
		dst = append(dst, r.Value...)
	}
	return dst
}

// decodeLockRecord decodes a lock record. The result does not alias enc.
func decodeLockRecord(enc []byte) (lockRecord, error) {
	d := decoder{buf: enc}
	var r lockRecord
	if v := d.byte(); d.err == nil && v != lockRecordV1 {
		return r, fmt.Errorf("%w: lock record version %d", ErrCorrupt, v)
	}
	flags := d.byte()
	if d.err == nil && flags&^lockFlagsKnown != 0 {
		return r, fmt.Errorf("%w: lock record flags %#x", ErrCorrupt, flags)
	}
	r.Tombstone = flags&lockFlagTombstone != 0
	d.txnMeta(&r.Txn)
	if flags&lockFlagHistory != 0 {
		d.history(&r)
	}
	if d.err != nil {
		return lockRecord{}, fmt.Errorf("%w: lock record: %v", ErrCorrupt, d.err)
	}
	rest := d.buf[d.off:]
	r.LockOnly = flags&lockFlagLockOnly != 0
	if r.LockOnly {
		if len(rest) != 0 || r.Tombstone || len(r.History) > 0 {
			return lockRecord{}, fmt.Errorf("%w: lock-only record with a value or history", ErrCorrupt)
		}
		return r, nil
	}
	if r.Tombstone {
		if len(rest) != 0 {
			return lockRecord{}, fmt.Errorf("%w: tombstone lock record with %d value bytes", ErrCorrupt, len(rest))
		}
	} else {
		r.Value = append([]byte{}, rest...)
	}
	return r, nil
}

// history decodes a lock record's history entries into r, checking that
// their sequence numbers increase and stay below the current value's.
func (d *decoder) history(r *lockRecord) {
	n := d.uvarint()
	// Each entry takes at least two bytes: bound n before allocating.
	if d.err != nil || n == 0 || n > uint64(len(d.buf)-d.off)/2 {
		d.fail("history count")
		return
	}
	r.History = make([]seqValue, n)
	for i := range r.History {
		h := &r.History[i]
		h.Seq = d.int32()
		switch d.byte() {
		case 0:
			h.Value = d.bytes()
			if h.Value == nil {
				h.Value = []byte{} // an empty value, not a deletion
			}
		case 1:
			h.Tombstone = true
		default:
			d.fail("history entry kind")
		}
		if d.err == nil && ((i > 0 && h.Seq <= r.History[i-1].Seq) || h.Seq >= r.Txn.Sequence) {
			d.err = fmt.Errorf("history sequence %d out of order (current %d)", h.Seq, r.Txn.Sequence)
		}
	}
}

// encodeTxnRecord: version, TxnMeta, name, status, read ts, uncertainty
// limit, last heartbeat, lock spans; in V2 also the ignored sequence
// ranges. A record without ignored ranges is written as V1, so only
// transactions that rolled back to a savepoint pay for the field.
// ObservedTimestamps are not stored: they are the coordinator's, and mean
// nothing to a pusher reading the record.
func encodeTxnRecord(dst []byte, t *kvpb.Transaction) []byte {
	version := txnRecordV1
	if len(t.IgnoredSeqNums) > 0 {
		version = txnRecordV2
	}
	dst = append(dst, version)
	dst = appendTxnMeta(dst, &t.TxnMeta)
	dst = appendBytes(dst, []byte(t.Name))
	dst = append(dst, byte(t.Status))
	dst = appendTimestamp(dst, t.ReadTimestamp)
	dst = appendTimestamp(dst, t.GlobalUncertaintyLimit)
	dst = appendTimestamp(dst, t.LastHeartbeat)
	dst = binary.AppendUvarint(dst, uint64(len(t.LockSpans)))
	for _, s := range t.LockSpans {
		dst = appendBytes(dst, s.Key)
		dst = appendBytes(dst, s.EndKey)
	}
	if version == txnRecordV2 {
		dst = binary.AppendUvarint(dst, uint64(len(t.IgnoredSeqNums)))
		for _, r := range t.IgnoredSeqNums {
			dst = binary.AppendVarint(dst, int64(r.Start))
			dst = binary.AppendVarint(dst, int64(r.End))
		}
	}
	return dst
}

// decodeTxnRecord decodes a transaction record. The result does not alias
// enc.
func decodeTxnRecord(enc []byte) (kvpb.Transaction, error) {
	d := decoder{buf: enc}
	var t kvpb.Transaction
	version := d.byte()
	if d.err == nil && version != txnRecordV1 && version != txnRecordV2 {
		return t, fmt.Errorf("%w: txn record version %d", ErrCorrupt, version)
	}
	d.txnMeta(&t.TxnMeta)
	t.Name = string(d.bytes())
	status := kvpb.TxnStatus(d.byte())
	if d.err == nil && status != kvpb.Pending && !status.IsFinal() {
		return kvpb.Transaction{}, fmt.Errorf("%w: txn record status %d", ErrCorrupt, status)
	}
	t.Status = status
	t.ReadTimestamp = d.timestamp()
	t.GlobalUncertaintyLimit = d.timestamp()
	t.LastHeartbeat = d.timestamp()
	n := d.uvarint()
	// Each span takes at least two bytes, which bounds n by the input
	// before anything is allocated.
	if d.err == nil && n > uint64(len(d.buf)-d.off)/2 {
		return kvpb.Transaction{}, fmt.Errorf("%w: txn record claims %d lock spans", ErrCorrupt, n)
	}
	if n > 0 {
		t.LockSpans = make([]kvpb.Span, n)
		for i := range t.LockSpans {
			t.LockSpans[i].Key = d.bytes()
			t.LockSpans[i].EndKey = d.bytes()
		}
	}
	if version == txnRecordV2 {
		d.seqRanges(&t)
	}
	if d.err == nil && d.off != len(d.buf) {
		d.err = fmt.Errorf("%d trailing bytes", len(d.buf)-d.off)
	}
	if d.err != nil {
		return kvpb.Transaction{}, fmt.Errorf("%w: txn record: %v", ErrCorrupt, d.err)
	}
	return t, nil
}

// seqRanges decodes a V2 record's ignored sequence ranges, which must be
// non-empty, sorted and disjoint.
func (d *decoder) seqRanges(t *kvpb.Transaction) {
	n := d.uvarint()
	if d.err != nil || n == 0 || n > uint64(len(d.buf)-d.off)/2 {
		d.fail("ignored sequence count")
		return
	}
	t.IgnoredSeqNums = make([]kvpb.SeqRange, n)
	for i := range t.IgnoredSeqNums {
		r := &t.IgnoredSeqNums[i]
		r.Start, r.End = d.int32(), d.int32()
		if d.err == nil && (r.End < r.Start || (i > 0 && r.Start <= t.IgnoredSeqNums[i-1].End)) {
			d.err = fmt.Errorf("ignored sequence ranges %s unsorted or overlapping", kvpb.FormatSeqRanges(t.IgnoredSeqNums[:i+1]))
		}
	}
}

func appendTxnMeta(dst []byte, m *kvpb.TxnMeta) []byte {
	dst = append(dst, m.ID[:]...)
	dst = appendBytes(dst, m.Key)
	dst = binary.AppendVarint(dst, int64(m.Epoch))
	dst = appendTimestamp(dst, m.WriteTimestamp)
	dst = appendTimestamp(dst, m.MinTimestamp)
	dst = binary.AppendVarint(dst, int64(m.Priority))
	return binary.AppendVarint(dst, int64(m.Sequence))
}

func appendTimestamp(dst []byte, ts hlc.Timestamp) []byte {
	dst = binary.AppendVarint(dst, ts.WallTime)
	return binary.AppendVarint(dst, int64(ts.Logical))
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// decoder reads fields in order and remembers the first error, so record
// decoders read straight through and check once.
type decoder struct {
	buf []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or malformed %s at offset %d", what, d.off)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || d.off >= len(d.buf) {
		d.fail("byte")
		return 0
	}
	b := d.buf[d.off]
	d.off++
	return b
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf[d.off:])
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v != int64(int32(v)) {
		d.fail("int32")
		return 0
	}
	return int32(v)
}

// bytes returns a copy of a length-prefixed field; nil when empty, so
// decoding is canonical.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)-d.off) {
		d.fail("bytes")
		return nil
	}
	if n == 0 {
		return nil
	}
	b := append([]byte(nil), d.buf[d.off:d.off+int(n)]...)
	d.off += int(n)
	return b
}

func (d *decoder) timestamp() hlc.Timestamp {
	w := d.varint()
	l := d.int32()
	return hlc.Timestamp{WallTime: w, Logical: l}
}

func (d *decoder) txnMeta(m *kvpb.TxnMeta) {
	if d.err != nil || len(d.buf)-d.off < len(uuid.UUID{}) {
		d.fail("txn id")
		return
	}
	copy(m.ID[:], d.buf[d.off:])
	d.off += len(m.ID)
	m.Key = d.bytes()
	m.Epoch = d.int32()
	m.WriteTimestamp = d.timestamp()
	m.MinTimestamp = d.timestamp()
	m.Priority = d.int32()
	m.Sequence = d.int32()
}
