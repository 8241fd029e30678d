package ddl_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/sql/ddl"
)

// TestInterpolateKeys: the cut points between two keys are strictly
// between them, increasing, at most parts-1, spaced by the bytes after
// the keys' common prefix; keys too close to cut give none.
func TestInterpolateKeys(t *testing.T) {
	for _, tc := range []struct {
		lo, hi string
		parts  int
		want   []string // nil: check only the order and bounds
		n      int
	}{
		{lo: "t\x00", hi: "t\x04", parts: 4, want: []string{"t\x01\x00\x00\x00\x00\x00\x00\x00", "t\x02\x00\x00\x00\x00\x00\x00\x00", "t\x03\x00\x00\x00\x00\x00\x00\x00"}},
		{lo: "ab", hi: "abc", parts: 2, n: 1},                              // lo a prefix of hi
		{lo: "a", hi: "a\x00\x00\x00\x00\x00\x00\x00\x01", parts: 4, n: 0}, // no room in 8 bytes
		{lo: "k\x01\x02", hi: "k\x01\x02\x00", parts: 3, n: 0},             // hi = lo then a zero
		{lo: "\x03\x82\x89\x12", hi: "\x03\x82\x8a", parts: 8, n: 7},
		{lo: "x", hi: "y", parts: 1, n: 0},
	} {
		got := ddl.InterpolateKeys([]byte(tc.lo), []byte(tc.hi), tc.parts)
		if tc.want != nil {
			if len(got) != len(tc.want) {
				t.Fatalf("%q..%q: %q, want %q", tc.lo, tc.hi, got, tc.want)
			}
			for i := range got {
				if string(got[i]) != tc.want[i] {
					t.Errorf("%q..%q: point %d is %q, want %q", tc.lo, tc.hi, i, got[i], tc.want[i])
				}
			}
		} else if len(got) != tc.n {
			t.Errorf("%q..%q in %d parts: %d points %q, want %d", tc.lo, tc.hi, tc.parts, len(got), got, tc.n)
		}
		prev := []byte(tc.lo)
		for _, k := range got {
			if bytes.Compare(k, prev) <= 0 || bytes.Compare(k, []byte(tc.hi)) >= 0 {
				t.Errorf("%q..%q: point %q out of order or bounds", tc.lo, tc.hi, k)
			}
			prev = k
		}
	}
}

// TestBackfillSubSpans builds an index of a table in one tablet: the
// build's node cuts it into sub-spans read by several readers, and every
// row is read whole by one of them though each row is several KV entries
// (a packed row and, after a partial UPDATE, a column entry), so the cut
// points fall between a row's keys unless moved to its row key: the
// index is exact and holds one entry per row.
func TestBackfillSubSpans(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c := connect(t, url, "postgres")
	const rows = 20000
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT)")
	mustExec(t, c, fmt.Sprintf("INSERT INTO t SELECT g, (g * 7919) %% 5000, g FROM generate_series(1, %d) g", rows))
	mustExec(t, c, "UPDATE t SET w = w + 1")
	mustExec(t, c, "CREATE INDEX t_w ON t (w)")
	pieces, _, entries := ddl.LastBackfill()
	t.Logf("t_w: %d pieces, %d entries", pieces, entries)
	if want := 2 * ddl.BackfillReaders(); pieces != want || entries != rows {
		t.Errorf("one tablet read in %d pieces (want %d), %d entries (want %d)", pieces, want, entries, rows)
	}
	checkIndexExact(t, s, c, "t_w")
	// A unique index over the column the UPDATE wrote: its entries are
	// the column entries' values, each row's once.
	mustExec(t, c, "CREATE UNIQUE INDEX t_wu ON t (w)")
	checkIndexExact(t, s, c, "t_wu")
	var n int64
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM t WHERE w = 7920").Scan(&n); err != nil || n != 1 {
		t.Errorf("count through the index: %d %v", n, err)
	}
}
