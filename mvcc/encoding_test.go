package mvcc

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// Generators produce values in the canonical form decoding yields: empty
// byte fields are nil.

func genBytes(t *rapid.T, label string) []byte {
	if rapid.Bool().Draw(t, label+"-nil") {
		return nil
	}
	return rapid.SliceOfN(rapid.Byte(), 1, 12).Draw(t, label)
}

func genTimestamp(t *rapid.T, label string) hlc.Timestamp {
	return hlc.Timestamp{WallTime: rapid.Int64().Draw(t, label+"-wall"), Logical: rapid.Int32().Draw(t, label+"-logical")}
}

func genTxnMeta(t *rapid.T) kvpb.TxnMeta {
	var id uuid.UUID
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "id"))
	return kvpb.TxnMeta{
		ID:             id,
		Key:            genBytes(t, "anchor"),
		Epoch:          rapid.Int32().Draw(t, "epoch"),
		WriteTimestamp: genTimestamp(t, "write"),
		MinTimestamp:   genTimestamp(t, "min"),
		Priority:       rapid.Int32().Draw(t, "priority"),
		Sequence:       rapid.Int32().Draw(t, "seq"),
	}
}

func genLockRecord(t *rapid.T) lockRecord {
	r := lockRecord{Txn: genTxnMeta(t), Tombstone: rapid.Bool().Draw(t, "tombstone")}
	if !r.Tombstone {
		r.Value = rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "value")
	}
	// History: increasing sequence numbers below the current one.
	seq := int64(r.Txn.Sequence)
	n := rapid.IntRange(0, 3).Draw(t, "history")
	var hist []seqValue
	for i := 0; i < n && seq > -1<<31; i++ {
		seq = rapid.Int64Range(-1<<31, seq-1).Draw(t, "history-seq")
		h := seqValue{Seq: int32(seq), Tombstone: rapid.Bool().Draw(t, "history-tombstone")}
		if !h.Tombstone {
			h.Value = rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "history-value")
		}
		hist = append([]seqValue{h}, hist...)
	}
	r.History = hist
	return r
}

func genTxnRecord(t *rapid.T) kvpb.Transaction {
	txn := kvpb.Transaction{
		TxnMeta:                genTxnMeta(t),
		Name:                   rapid.String().Draw(t, "name"),
		Status:                 kvpb.TxnStatus(rapid.IntRange(0, 2).Draw(t, "status")),
		ReadTimestamp:          genTimestamp(t, "read"),
		GlobalUncertaintyLimit: genTimestamp(t, "limit"),
		LastHeartbeat:          genTimestamp(t, "hb"),
	}
	n := rapid.IntRange(0, 3).Draw(t, "spans")
	for i := 0; i < n; i++ {
		txn.LockSpans = append(txn.LockSpans, kvpb.Span{Key: genBytes(t, "span-key"), EndKey: genBytes(t, "span-end")})
	}
	n = rapid.IntRange(0, 3).Draw(t, "ignored")
	for i := 0; i < n; i++ {
		start := rapid.Int32Range(-100, 100).Draw(t, "ignored-start")
		end := rapid.Int32Range(start, 100).Draw(t, "ignored-end")
		txn.IgnoredSeqNums = kvpb.AddIgnoredSeqRange(txn.IgnoredSeqNums, kvpb.SeqRange{Start: start, End: end})
	}
	return txn
}

func TestLockRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genLockRecord(t)
		out, err := decodeLockRecord(encodeLockRecord(nil, &in))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("round trip:\n in  %+v\n out %+v", in, out)
		}
	})
}

func TestTxnRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genTxnRecord(t)
		out, err := decodeTxnRecord(encodeTxnRecord(nil, &in))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("round trip:\n in  %+v\n out %+v", in, out)
		}
	})
}

func TestValueEncoding(t *testing.T) {
	for _, tc := range []struct {
		name      string
		value     []byte
		tombstone bool
		enc       []byte
	}{
		{"tombstone", nil, true, []byte{0x00}},
		{"empty value", []byte{}, false, []byte{0x01}},
		{"value", []byte("xy"), false, []byte{0x01, 'x', 'y'}},
		{"value starting with a tag byte", []byte{0x00}, false, []byte{0x01, 0x00}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := encodeValue(tc.value, tc.tombstone)
			if !bytes.Equal(enc, tc.enc) {
				t.Fatalf("encoded %x, want %x", enc, tc.enc)
			}
			v, tomb, err := decodeValue(enc)
			if err != nil || tomb != tc.tombstone || !bytes.Equal(v, tc.value) {
				t.Fatalf("decoded %q, %v, %v", v, tomb, err)
			}
		})
	}
	for _, tc := range []struct {
		name      string
		value     []byte
		tombstone bool
		ts, local hlc.Timestamp
		wantLocal hlc.Timestamp
	}{
		{"value with local", []byte("xy"), false, hlc.Timestamp{WallTime: 20}, hlc.Timestamp{WallTime: 9, Logical: 2}, hlc.Timestamp{WallTime: 9, Logical: 2}},
		{"tombstone with local", nil, true, hlc.Timestamp{WallTime: 20}, hlc.Timestamp{WallTime: 9}, hlc.Timestamp{WallTime: 9}},
		{"empty value with local", []byte{}, false, hlc.Timestamp{WallTime: 20}, hlc.Timestamp{WallTime: 9}, hlc.Timestamp{WallTime: 9}},
		{"local at the version: not stored", []byte("xy"), false, hlc.Timestamp{WallTime: 20}, hlc.Timestamp{WallTime: 20}, hlc.Timestamp{}},
		{"no local", []byte("xy"), false, hlc.Timestamp{WallTime: 20}, hlc.Timestamp{}, hlc.Timestamp{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := encodeValueLocal(tc.value, tc.tombstone, tc.ts, tc.local)
			v, tomb, local, err := decodeValueLocal(enc)
			if err != nil || tomb != tc.tombstone || !bytes.Equal(v, tc.value) || local != tc.wantLocal || (v == nil) != (tc.value == nil) {
				t.Fatalf("decoded %q, %v, local %s, %v; want %q, %v, local %s", v, tomb, local, err, tc.value, tc.tombstone, tc.wantLocal)
			}
			if tc.wantLocal.IsEmpty() && !bytes.Equal(enc, encodeValue(tc.value, tc.tombstone)) {
				t.Fatalf("a version without a local timestamp encoded as %x", enc)
			}
		})
	}
	for _, bad := range [][]byte{nil, {0x00, 0x01}, {0x02}, {0xff, 'x'},
		{0x02, 0x00, 0x00, 'x'}, // an empty local timestamp
		{0x03, 0x12},            // truncated
		{0x03, 0x12, 0x00, 'x'}, // a tombstone with bytes after it
		{0x04, 'x'},
	} {
		if _, _, err := decodeValue(bad); err == nil {
			t.Errorf("decodeValue(%x) succeeded", bad)
		}
	}
}

// TestDecodeRejects checks that damaged records fail with ErrCorrupt rather
// than decode to something else.
func TestDecodeRejects(t *testing.T) {
	lk := lockRecord{Txn: kvpb.TxnMeta{Key: []byte("k"), Epoch: 2}, Value: []byte("v")}
	lenc := encodeLockRecord(nil, &lk)
	tomb := lockRecord{Txn: lk.Txn, Tombstone: true}
	tenc := encodeLockRecord(nil, &tomb)
	txn := kvpb.Transaction{TxnMeta: lk.Txn, Name: "n", LockSpans: []kvpb.Span{{Key: []byte("a")}}}
	xenc := encodeTxnRecord(nil, &txn)
	hist := lockRecord{Txn: kvpb.TxnMeta{Sequence: 5}, Value: []byte("v"), History: []seqValue{{Seq: 1, Value: []byte("a")}, {Seq: 3, Tombstone: true}}}
	ign := kvpb.Transaction{TxnMeta: lk.Txn, IgnoredSeqNums: []kvpb.SeqRange{{Start: 2, End: 3}, {Start: 6, End: 6}}}
	for _, tc := range []struct {
		name string
		enc  []byte
		dec  func([]byte) error
	}{
		{"lock: empty", nil, decLock},
		{"lock: unknown version", append([]byte{9}, lenc[1:]...), decLock},
		{"lock: unknown flag", append([]byte{lenc[0], 0x80}, lenc[2:]...), decLock},
		{"lock: truncated meta", lenc[:10], decLock},
		{"lock: tombstone with a value", append(tenc, 'x'), decLock},
		{"lock: history out of order", reencodeLock(hist, func(r *lockRecord) { r.History[0].Seq = 4 }), decLock},
		{"lock: history at the current sequence", reencodeLock(hist, func(r *lockRecord) { r.History[1].Seq = 5 }), decLock},
		{"lock: history flag without entries", reencodeLock(hist, func(r *lockRecord) { r.History = []seqValue{} }), decLock},
		{"lock: history count beyond input", historyCount(hist), decLock},
		{"lock: unknown history entry kind", historyKind(hist), decLock},
		{"txn: empty", nil, decTxn},
		{"txn: unknown version", append([]byte{9}, xenc[1:]...), decTxn},
		{"txn: truncated", xenc[:len(xenc)-1], decTxn},
		{"txn: trailing bytes", append(xenc, 0), decTxn},
		{"txn: bad status", badStatus(&txn), decTxn},
		{"txn: span count beyond input", spanCount(&txn), decTxn},
		{"txn: ignored ranges overlapping", reencodeTxn(ign, func(t *kvpb.Transaction) { t.IgnoredSeqNums[1].Start = 3 }), decTxn},
		{"txn: ignored range empty", reencodeTxn(ign, func(t *kvpb.Transaction) { t.IgnoredSeqNums[0].End = 1 }), decTxn},
		{"txn: v2 without ignored ranges", append([]byte{txnRecordV2}, xenc[1:]...), decTxn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.dec(tc.enc); err == nil || !isCorrupt(err) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

func decLock(b []byte) error { _, err := decodeLockRecord(b); return err }
func decTxn(b []byte) error  { _, err := decodeTxnRecord(b); return err }

// badStatus re-encodes txn with an out-of-range status byte.
func badStatus(txn *kvpb.Transaction) []byte {
	c := *txn
	c.Status = 7
	return encodeTxnRecord(nil, &c)
}

// spanCount encodes a record whose span count claims far more spans than
// the bytes that follow could hold.
func spanCount(txn *kvpb.Transaction) []byte {
	c := *txn
	c.LockSpans = nil
	enc := encodeTxnRecord(nil, &c)
	return append(enc[:len(enc)-1], 0xff, 0xff, 0xff, 0x0f)
}

// reencodeLock encodes r after damaging it with f; the encoder writes
// whatever it is given (a zero-length non-nil History still sets the flag
// only when non-empty, so that case is forced by hand).
func reencodeLock(r lockRecord, f func(*lockRecord)) []byte {
	r.History = append([]seqValue(nil), r.History...)
	f(&r)
	if r.History != nil && len(r.History) == 0 {
		enc := encodeLockRecord(nil, &r)
		enc[1] |= lockFlagHistory
		// The count goes right after the TxnMeta, before the value.
		meta := appendTxnMeta(nil, &r.Txn)
		at := 2 + len(meta)
		return append(append(append([]byte(nil), enc[:at]...), 0), enc[at:]...)
	}
	return encodeLockRecord(nil, &r)
}

// historyCount encodes r with a history count claiming far more entries
// than the bytes that follow could hold.
func historyCount(r lockRecord) []byte {
	enc := encodeLockRecord(nil, &r)
	at := 2 + len(appendTxnMeta(nil, &r.Txn))
	return append(append(append([]byte(nil), enc[:at]...), 0xff, 0xff, 0xff, 0x0f), enc[at+1:]...)
}

// historyKind encodes r with its first history entry's kind byte set to 7.
func historyKind(r lockRecord) []byte {
	enc := encodeLockRecord(nil, &r)
	// version, flags, meta, count (one byte), seq (one byte), kind.
	at := 2 + len(appendTxnMeta(nil, &r.Txn)) + 2
	enc[at] = 7
	return enc
}

// reencodeTxn encodes t after damaging it with f (the encoder writes the
// ranges as given).
func reencodeTxn(t kvpb.Transaction, f func(*kvpb.Transaction)) []byte {
	t.IgnoredSeqNums = append([]kvpb.SeqRange(nil), t.IgnoredSeqNums...)
	f(&t)
	return encodeTxnRecord(nil, &t)
}

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// FuzzDecodeLockRecord: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to a record that decodes to the same thing.
func FuzzDecodeLockRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeLockRecord(nil, &lockRecord{Value: []byte("v")}))
	f.Add(encodeLockRecord(nil, &lockRecord{Txn: kvpb.TxnMeta{Key: []byte("anchor"), Epoch: 3, WriteTimestamp: hlc.Timestamp{WallTime: 1e18, Logical: 5}}, Tombstone: true}))
	f.Add(encodeLockRecord(nil, &lockRecord{Txn: kvpb.TxnMeta{Sequence: 4}, Value: []byte("v"), History: []seqValue{{Seq: 1, Value: []byte{}}, {Seq: 2, Tombstone: true}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeLockRecord(b)
		if err != nil {
			return
		}
		again, err := decodeLockRecord(encodeLockRecord(nil, &r))
		if err != nil || !reflect.DeepEqual(r, again) {
			t.Fatalf("re-encoding %+v gave %+v, %v", r, again, err)
		}
	})
}

// FuzzDecodeTxnRecord: as FuzzDecodeLockRecord, for transaction records.
func FuzzDecodeTxnRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeTxnRecord(nil, &kvpb.Transaction{}))
	f.Add(encodeTxnRecord(nil, &kvpb.Transaction{
		TxnMeta: kvpb.TxnMeta{Key: []byte("a"), Sequence: 9}, Name: "x", Status: kvpb.Committed,
		LockSpans: []kvpb.Span{{Key: []byte("a"), EndKey: []byte("b")}, {Key: []byte("c")}},
	}))
	f.Add(encodeTxnRecord(nil, &kvpb.Transaction{Status: kvpb.Committed, IgnoredSeqNums: []kvpb.SeqRange{{Start: 2, End: 4}, {Start: 9, End: 9}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeTxnRecord(b)
		if err != nil {
			return
		}
		again, err := decodeTxnRecord(encodeTxnRecord(nil, &r))
		if err != nil || !reflect.DeepEqual(r, again) {
			t.Fatalf("re-encoding %+v gave %+v, %v", r, again, err)
		}
	})
}

// FuzzDecodeValue: decoding a version value never panics, and what decodes
// re-encodes (with its local timestamp) to the same decoded value.
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte{0x01, 'x'})
	f.Add([]byte{0x00})
	f.Add(encodeValueLocal([]byte("v"), false, hlc.Timestamp{WallTime: 1e18}, hlc.Timestamp{WallTime: 5, Logical: 1}))
	f.Add(encodeValueLocal(nil, true, hlc.Timestamp{WallTime: 1e18}, hlc.Timestamp{WallTime: 5}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, tomb, local, err := decodeValueLocal(b)
		if err != nil {
			return
		}
		// Any version timestamp above local keeps it.
		above := local.Next()
		if local.IsEmpty() {
			above = hlc.Timestamp{}
		}
		v2, tomb2, local2, err := decodeValueLocal(encodeValueLocal(v, tomb, above, local))
		if err != nil || tomb2 != tomb || !bytes.Equal(v2, v) || local2 != local {
			t.Fatalf("re-encoding %q %v %s gave %q %v %s, %v", v, tomb, local, v2, tomb2, local2, err)
		}
	})
}
