package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestIterPoolServesPrefixReads: a prefix iterator (mvcc.Get's) comes from
// the engine's pool as a bounded one does, and one pooled iterator serves
// prefix and bounded reads in turn, each reading what a new iterator of
// its kind would: a prefix seek stays within its user key (its versions,
// not the next key's), a bounded read after it walks every key of its
// span, and a write is seen by the next read of either kind. Before the
// twenty-sixth session every prefix read built a Pebble iterator of its
// own (two builds per pair of reads below, not none).
func TestIterPoolServesPrefixReads(t *testing.T) {
	e, err := Open("", Options{FS: vfs.NewMem(), NoSync: true, CountSeeks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	put := func(k string, wall int64, v string) {
		t.Helper()
		b := e.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(MVCCKey{Key: []byte(k), Timestamp: ts(wall, 0)}, []byte(v)); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 10, "a10")
	put("b", 20, "b20")
	put("b", 10, "b10")
	put("c", 10, "c10")

	// prefixRead returns the versions of key a prefix iterator reads.
	prefixRead := func(key string) []string {
		t.Helper()
		it, err := e.NewIter(IterOptions{Prefix: true})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var got []string
		for ok := it.SeekGE(MVCCKey{Key: []byte(key)}); ok; ok = it.Next() {
			v, err := it.UnsafeValue()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(v))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// spanRead returns the newest version of each key of [lo, hi).
	spanRead := func(lo, hi string) []string {
		t.Helper()
		it, err := e.NewIter(IterOptions{LowerBound: []byte(lo), UpperBound: []byte(hi)})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var got []string
		for ok := it.First(); ok; ok = it.NextKey() {
			v, err := it.UnsafeValue()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(v))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	eq := func(what string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: read %q, want %q", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: read %q, want %q", what, got, want)
			}
		}
	}

	// The first read builds an iterator; it goes to the pool.
	eq("span [a, d)", spanRead("a", "d"), "a10", "b20", "c10")
	builds := e.IterBuilds()
	eq("prefix b", prefixRead("b"), "b20", "b10")
	eq("prefix a", prefixRead("a"), "a10")
	eq("span [b, d) after prefix reads", spanRead("b", "d"), "b20", "c10")
	eq("prefix c after a span read", prefixRead("c"), "c10")
	eq("prefix bb (absent)", prefixRead("bb"))
	if got := e.IterBuilds() - builds; got != 0 {
		t.Errorf("prefix and bounded reads with no write between built %d Pebble iterators, want 0 (the pooled one)", got)
	}

	// A write drains the pool: the next read of either kind sees it.
	put("b", 30, "b30")
	eq("prefix b after a write", prefixRead("b"), "b30", "b20", "b10")
	eq("span [a, c) after a write", spanRead("a", "c"), "a10", "b30")

	// From SSTs (the flush drains the pool too): a prefix seek through
	// the bloom filters, then bounded reads, on one pooled iterator.
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	eq("prefix b from SSTs", prefixRead("b"), "b30", "b20", "b10")
	builds = e.IterBuilds()
	eq("prefix bb from SSTs (absent)", prefixRead("bb"))
	eq("span [a, d) from SSTs", spanRead("a", "d"), "a10", "b30", "c10")
	eq("prefix c from SSTs", prefixRead("c"), "c10")
	if got := e.IterBuilds() - builds; got != 0 {
		t.Errorf("reads from SSTs with no write between built %d Pebble iterators, want 0", got)
	}
}
