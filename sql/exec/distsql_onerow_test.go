package exec

import (
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// TestOneRow: distsql = auto keeps a scan local without placing it when
// its one span fixes every key column of the primary index (one row, one
// tablet); any other span is placed as before.
func TestOneRow(t *testing.T) {
	k := []byte("\x88\x89\x8a")
	point := []kvpb.Span{{Key: k, EndKey: keys.PrefixEnd(k)}}
	wide := []kvpb.Span{{Key: k, EndKey: []byte("\x88\x8a")}}
	v := []types.Datum{types.DInt(1), types.DInt(2)}
	w := []types.Datum{types.DInt(1), types.DInt(3)}
	for _, tc := range []struct {
		name  string
		spans []plan.Span
		keys  []kvpb.Span
		n     int
		want  bool
	}{
		{"every key column", []plan.Span{{Start: v, End: v, EndInclusive: true}}, point, 2, true},
		{"a prefix of the key", []plan.Span{{Start: v[:1], End: v[:1], EndInclusive: true}}, point, 2, false},
		{"a range", []plan.Span{{Start: v, End: w, EndInclusive: true}}, wide, 2, false},
		{"exclusive end", []plan.Span{{Start: v, End: v}}, point, 2, false},
		{"exclusive start", []plan.Span{{Start: v, End: v, StartExclusive: true, EndInclusive: true}}, point, 2, false},
		{"two spans", []plan.Span{{Start: v, End: v, EndInclusive: true}, {Start: w, End: w, EndInclusive: true}}, append(point, point...), 2, false},
		{"whole index", nil, wide, 2, false},
	} {
		if got := oneRow(tc.spans, tc.keys, tc.n); got != tc.want {
			t.Errorf("%s: oneRow = %v, want %v", tc.name, got, tc.want)
		}
	}
}
