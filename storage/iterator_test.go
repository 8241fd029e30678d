package storage

import (
	"slices"
	"testing"
)

// TestIteratorBoundsAndNextKey checks invariant 3 (bounds are user keys and
// take all of a key's versions in or out together) and that NextKey and
// SeekLT step over whole user keys.
func TestIteratorBoundsAndNextKey(t *testing.T) {
	e := openMem(t)
	b := e.NewWriteOnlyBatch()
	for _, s := range []string{`"a"`, `"a"@5,0`, `"a"@3,0`, `"b"`, `"b"@2,0`, `"c"@1,0`, `"c"@9,0`} {
		if err := b.Put(mustKey(t, s), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()

	keys := func(it *Iterator) []string {
		var out []string
		for ok := it.First(); ok; ok = it.NextKey() {
			out = append(out, it.UnsafeKey().String())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		lower, upper string
		want         []string
	}{
		{"", "", []string{`"a"`, `"b"`, `"c"@9,0`}},
		{"b", "", []string{`"b"`, `"c"@9,0`}},
		{"a", "c", []string{`"a"`, `"b"`}},
		{"a\x00", "b\x00", []string{`"b"`}},
	} {
		opts := IterOptions{}
		if tc.lower != "" {
			opts.LowerBound = []byte(tc.lower)
		}
		if tc.upper != "" {
			opts.UpperBound = []byte(tc.upper)
		}
		it, err := e.NewIter(opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(it); !slices.Equal(got, tc.want) {
			t.Errorf("bounds [%q, %q): NextKey walk = %v, want %v", tc.lower, tc.upper, got, tc.want)
		}
		_ = it.Close()
	}

	it, err := e.NewIter(IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = it.Close() }()
	// SeekLT of a bare key lands on the previous user key's oldest version.
	if !it.SeekLT(MVCCKey{Key: []byte("b")}) || it.UnsafeKey().String() != `"a"@3,0` {
		t.Fatalf("SeekLT(b) at %s", it.UnsafeKey())
	}
	// SeekGE of a version lands on the newest version at or below it.
	if !it.SeekGE(mustKey(t, `"a"@4,0`)) || it.UnsafeKey().String() != `"a"@3,0` {
		t.Fatalf("SeekGE(a@4) at %s", it.UnsafeKey())
	}
	if !it.SeekGE(mustKey(t, `"c"@5,0`)) || it.UnsafeKey().String() != `"c"@1,0` {
		t.Fatalf("SeekGE(c@5) at %s", it.UnsafeKey())
	}
}
