package mvcc

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// TestComputeSpanStats: live bytes are the newest non-tombstone version of
// each key, total bytes every version, tombstone and lock record, each the
// encoded key plus the stored value; a key filter and the span bounds
// exclude what they should.
func TestComputeSpanStats(t *testing.T) {
	eng := openMem(t)
	at := func(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }
	b := eng.NewBatch()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	v := func(n int) []byte { return []byte(strings.Repeat("v", n)) }
	// a: two versions, the newest live.
	must(Put(b, []byte("a"), at(1), v(10), nil))
	must(Put(b, []byte("a"), at(2), v(20), nil))
	// b: a version shadowed by a tombstone.
	must(Put(b, []byte("b"), at(1), v(30), nil))
	_, err := Delete(b, []byte("b"), at(2), nil)
	must(err)
	// c: one live version, and an intent above it.
	must(Put(b, []byte("c"), at(1), v(5), nil))
	txn := &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: [16]byte{7}, WriteTimestamp: at(3), MinTimestamp: at(3)}, ReadTimestamp: at(3)}
	must(Put(b, []byte("c"), at(3), v(40), txn))
	// z: outside the spans asked about below.
	must(Put(b, []byte("z"), at(1), v(50), nil))
	must(b.Commit())
	b.Close()

	// version is the bytes of one version of key with a value of n bytes
	// (tag byte included); a tombstone stores the tag alone (n = 0).
	version := func(key string, n int) int64 {
		return int64(storage.MVCCKey{Key: []byte(key), Timestamp: at(1)}.EncodedLen() + 1 + n)
	}
	lockBytes := func() int64 {
		it, err := eng.NewIter(storage.IterOptions{LowerBound: []byte("\x01x"), UpperBound: []byte("\x01y")})
		must(err)
		defer it.Close()
		var n int64
		for ok := it.First(); ok; ok = it.Next() {
			raw, err := it.UnsafeValue()
			must(err)
			n += int64(it.UnsafeKey().EncodedLen() + len(raw))
		}
		return n
	}()
	if lockBytes == 0 {
		t.Fatal("the intent on c left no lock record")
	}

	for _, tc := range []struct {
		name       string
		start, end string
		keep       func([]byte) bool
		want       SpanStats
	}{
		{name: "all but z", start: "a", end: "d", want: SpanStats{
			LiveBytes:  version("a", 20) + version("c", 5),
			TotalBytes: version("a", 10) + version("a", 20) + version("b", 30) + version("b", 0) + version("c", 5) + lockBytes,
			LiveKeys:   2, Versions: 5, Locks: 1,
		}},
		{name: "deleted key only", start: "b", end: "c", want: SpanStats{
			TotalBytes: version("b", 30) + version("b", 0), Versions: 2,
		}},
		{name: "filter keeps a", start: "a", end: "d", keep: func(k []byte) bool { return string(k) == "a" }, want: SpanStats{
			LiveBytes: version("a", 20), TotalBytes: version("a", 10) + version("a", 20), LiveKeys: 1, Versions: 2,
		}},
		{name: "filter keeps c with its lock", start: "a", end: "d", keep: func(k []byte) bool { return string(k) == "c" }, want: SpanStats{
			LiveBytes: version("c", 5), TotalBytes: version("c", 5) + lockBytes, LiveKeys: 1, Versions: 1, Locks: 1,
		}},
		{name: "empty span", start: "m", end: "n", want: SpanStats{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ComputeSpanStats(eng, []byte(tc.start), []byte(tc.end), tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if got.LiveBytes > got.TotalBytes {
				t.Fatalf("live %d > total %d", got.LiveBytes, got.TotalBytes)
			}
		})
	}
	if _, err := ComputeSpanStats(eng, []byte("b"), []byte("a"), nil); err == nil {
		t.Fatal("an inverted span was accepted")
	}
}
