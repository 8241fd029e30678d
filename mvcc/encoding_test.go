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
	for _, bad := range [][]byte{nil, {0x00, 0x01}, {0x02}, {0xff, 'x'}} {
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
		{"txn: empty", nil, decTxn},
		{"txn: unknown version", append([]byte{9}, xenc[1:]...), decTxn},
		{"txn: truncated", xenc[:len(xenc)-1], decTxn},
		{"txn: trailing bytes", append(xenc, 0), decTxn},
		{"txn: bad status", badStatus(&txn), decTxn},
		{"txn: span count beyond input", spanCount(&txn), decTxn},
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

func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// FuzzDecodeLockRecord: decoding arbitrary bytes never panics, and whatever
// decodes re-encodes to a record that decodes to the same thing.
func FuzzDecodeLockRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeLockRecord(nil, &lockRecord{Value: []byte("v")}))
	f.Add(encodeLockRecord(nil, &lockRecord{Txn: kvpb.TxnMeta{Key: []byte("anchor"), Epoch: 3, WriteTimestamp: hlc.Timestamp{WallTime: 1e18, Logical: 5}}, Tombstone: true}))
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
