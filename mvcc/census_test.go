package mvcc

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// toyFormats: a key's owner is its first byte; a value "pN" is a packed
// row of version N, anything else is not packed.
type toyFormats struct{}

func (toyFormats) PackedVersion(key, value []byte) ([]byte, uint32, bool) {
	if len(value) == 2 && value[0] == 'p' {
		return key[:1], uint32(value[1] - '0'), true
	}
	return key[:1], 0, false
}

// TestCensus: a census sees old committed versions (also under a newer
// tombstone), an intent's current value and the history a savepoint
// rollback could fall back to, and nothing of unpacked values; bounded
// requests resumed to the end find the same.
func TestCensus(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b := eng.NewBatch()
	ts := func(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }
	put := func(key string, w int64, v string, txn *kvpb.Transaction) {
		t.Helper()
		if err := Put(b, []byte(key), ts(w), []byte(v), txn); err != nil {
			t.Fatal(err)
		}
	}
	put("a1", 10, "p3", nil)
	put("a1", 20, "p5", nil)
	put("a2", 10, "p2", nil)
	if _, err := Delete(b, []byte("a2"), ts(30), nil); err != nil {
		t.Fatal(err)
	}
	put("b1", 10, "u", nil)
	put("b2", 10, "p7", nil)
	txn := &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: [16]byte{1}, WriteTimestamp: ts(40), MinTimestamp: ts(40), Sequence: 1}, ReadTimestamp: ts(40)}
	put("b2", 40, "p4", txn)
	txn.Sequence = 2
	put("b2", 40, "p6", txn)
	txn2 := &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: [16]byte{2}, WriteTimestamp: ts(40), MinTimestamp: ts(40), Sequence: 1}, ReadTimestamp: ts(40)}
	put("c1", 40, "p1", txn2)
	txn2.Sequence = 2
	if _, err := Delete(b, []byte("c1"), ts(40), txn2); err != nil {
		t.Fatal(err)
	}
	want := "a:2/3 b:4/3 c:1/1"
	show := func(cs []kvpb.PackedCensus) string {
		out := ""
		for _, c := range cs {
			if out != "" {
				out += " "
			}
			out += fmt.Sprintf("%s:%d/%d", c.Owner, c.MinVersion, c.Values)
		}
		return out
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	all, resume, err := Census(eng, []byte("a"), []byte("z"), 0, toyFormats{})
	if err != nil || resume != nil {
		t.Fatalf("census: %v, resume %q", err, resume)
	}
	if got := show(all); got != want {
		t.Fatalf("census: %s, want %s (owner:min/values)", got, want)
	}
	for _, limit := range []int{1, 2, 3} {
		var merged []kvpb.PackedCensus
		from, n := []byte("a"), 0
		for from != nil {
			out, resume, err := Census(eng, from, []byte("z"), limit, toyFormats{})
			if err != nil {
				t.Fatal(err)
			}
			merged = kvpb.MergeCensus(merged, out...)
			from = resume
			if n++; n > 20 {
				t.Fatalf("limit %d: census does not progress", limit)
			}
		}
		if got := show(merged); got != want {
			t.Errorf("limit %d: resumed census %s, want %s", limit, got, want)
		}
	}
	if _, _, err := Census(eng, []byte("b"), []byte("a"), 0, toyFormats{}); err == nil {
		t.Error("census of an empty span accepted")
	}
}
