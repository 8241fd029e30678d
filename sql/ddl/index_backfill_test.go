package ddl

import "testing"

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
