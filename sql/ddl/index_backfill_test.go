package ddl

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cairn-db/cairn/sql/rowenc"
)

// TestBuildMemory: a build's sort holds IndexBuildMemory before it
// spills, or a quarter of the node's SQL budget when that is less, so a
// node started with a small --max-sql-memory leaves its statements three
// quarters of it during a build.
func TestBuildMemory(t *testing.T) {
	for _, tc := range []struct{ node, want int64 }{
		{0, IndexBuildMemory},
		{-1, IndexBuildMemory},
		{8 << 30, IndexBuildMemory},
		{4 * IndexBuildMemory, IndexBuildMemory},
		{400 << 20, 100 << 20},
		{3, 1},
	} {
		if got := buildMemory(tc.node); got != tc.want {
			t.Errorf("node budget %d: build budget %d, want %d", tc.node, got, tc.want)
		}
	}
}

// TestSameKey: the cut's duplicate check is bytes.Equal, for keys that
// differ at any byte, in length, or not at all, of lengths around its
// 8-byte words.
func TestSameKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 11))
	for n := range 40 {
		a := make([]byte, n)
		for i := range a {
			a[i] = byte(rng.IntN(256))
		}
		cases := [][]byte{bytes.Clone(a), append(bytes.Clone(a), 0)}
		if n > 0 {
			cases = append(cases, a[:n-1], a[1:])
		}
		for i := range n {
			b := bytes.Clone(a)
			b[i] ^= 1 << rng.IntN(8)
			cases = append(cases, b)
		}
		for _, b := range cases {
			if got, want := sameKey(a, b), bytes.Equal(a, b); got != want {
				t.Fatalf("sameKey(%x, %x) = %v, want %v", a, b, got, want)
			}
		}
	}
}

// TestSSTOptionsFor: a unique index's SSTs keep their bloom filters (a
// writer's uniqueness check looks its key up), every other index's are
// built without.
func TestSSTOptionsFor(t *testing.T) {
	if o := sstOptionsFor(&rowenc.IndexLayout{Unique: true}); o.NoFilter {
		t.Error("a unique index's SSTs are built without a filter")
	}
	if o := sstOptionsFor(&rowenc.IndexLayout{}); !o.NoFilter {
		t.Error("a non-unique index's SSTs are built with a filter")
	}
}
