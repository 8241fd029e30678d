package mvcc

import (
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage"
)

// TestSSTVersionBytes: SSTVersionBytes counts exactly what PutSSTVersion
// adds to the builder's DataBytes (index backfills cut SSTs by it
// before the puts happen on another goroutine).
func TestSSTVersionBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   hlc.Timestamp
		kvs  []string // key, value, ...
	}{
		{"one empty value", hlc.Timestamp{WallTime: 10}, []string{"\x89a", ""}},
		{"logical timestamp", hlc.Timestamp{WallTime: 1 << 40, Logical: 3}, []string{"\x89a", "v", "\x89b", "value"}},
		{"long keys", hlc.Timestamp{WallTime: 7}, []string{"\x89" + string(make([]byte, 300)), string(make([]byte, 1000))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := storage.NewSSTBuilder()
			var want int64
			for i := 0; i < len(tc.kvs); i += 2 {
				k, v := []byte(tc.kvs[i]), []byte(tc.kvs[i+1])
				if err := PutSSTVersion(b, k, tc.ts, v); err != nil {
					t.Fatal(err)
				}
				want += SSTVersionBytes(k, tc.ts, v)
			}
			if got := b.DataBytes(); got != want {
				t.Fatalf("DataBytes %d, SSTVersionBytes summed %d", got, want)
			}
		})
	}
}
