package ddl

import (
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
