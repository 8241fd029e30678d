package storage

import (
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func ts(w int64, l int32) hlc.Timestamp { return hlc.Timestamp{WallTime: w, Logical: l} }

// TestOrder checks invariant 1 through both the memtable and flushed SSTs.
func TestOrder(t *testing.T) {
	for _, flush := range []bool{false, true} {
		e, err := Open("", Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		b := e.NewWriteOnlyBatch()
		in := []MVCCKey{
			{Key: []byte("b"), Timestamp: ts(1, 0)},
			{Key: []byte("a"), Timestamp: ts(5, 0)},
			{Key: []byte("a")},
			{Key: []byte("a"), Timestamp: ts(5, 2)},
			{Key: []byte("a\x00"), Timestamp: ts(9, 0)},
			{Key: []byte("a"), Timestamp: ts(3, 0)},
			{Key: []byte("ab")},
		}
		for _, k := range in {
			if err := b.Put(k, []byte(k.String())); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if flush {
			if err := e.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{`"a"`, `"a"@5,2`, `"a"@5,0`, `"a"@3,0`, `"a\x00"@9,0`, `"ab"`, `"b"@1,0`}
		it, err := e.NewIter(IterOptions{LowerBound: []byte("a"), UpperBound: []byte("c")})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for ok := it.First(); ok; ok = it.Next() {
			got = append(got, it.UnsafeKey().String())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("flush=%v: got %v, want %v", flush, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("flush=%v: got %v, want %v", flush, got, want)
			}
		}
		// Prefix iteration over one user key sees only its entries.
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		pit, err := e.NewIter(IterOptions{Prefix: true})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ok := pit.SeekGE(MVCCKey{Key: []byte("a")}); ok; ok = pit.Next() {
			n++
		}
		if n != 4 {
			t.Fatalf("flush=%v: prefix iteration saw %d entries of \"a\", want 4", flush, n)
		}
		_ = pit.Close()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
