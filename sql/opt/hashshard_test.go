package opt

import (
	"math"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// TestEnumerate: the small ranges hash-sharded scans prune buckets with
// (maxPruneValues), including the bounds' edges and overflow.
func TestEnumerate(t *testing.T) {
	iv := func(lo, hi types.Datum, loIncl, hiIncl bool) interval {
		return interval{lo: lo, hi: hi, loIncl: loIncl, hiIncl: hiIncl}
	}
	for _, tc := range []struct {
		name string
		c    constraint
		want []int64 // nil: not enumerated
	}{
		{"closed", constraint{ivs: []interval{iv(types.DInt(10), types.DInt(12), true, true)}}, []int64{10, 11, 12}},
		{"open", constraint{ivs: []interval{iv(types.DInt(10), types.DInt(12), false, false)}}, []int64{11}},
		{"empty", constraint{ivs: []interval{iv(types.DInt(10), types.DInt(11), false, false)}}, []int64{}},
		{"two", constraint{ivs: []interval{iv(types.DInt(1), types.DInt(2), true, true), iv(types.DInt(5), types.DInt(5), true, true)}}, []int64{1, 2, 5}},
		{"dates", constraint{ivs: []interval{iv(types.DDate(100), types.DDate(101), true, true)}}, []int64{100, 101}},
		{"at cap", constraint{ivs: []interval{iv(types.DInt(0), types.DInt(9), true, true)}}, nil},
		{"unbounded", constraint{ivs: []interval{iv(types.DInt(0), nil, true, false)}}, nil},
		{"whole int8", constraint{ivs: []interval{iv(types.DInt(math.MinInt64), types.DInt(math.MaxInt64), true, true)}}, nil},
		{"top edge", constraint{ivs: []interval{iv(types.DInt(math.MaxInt64-1), types.DInt(math.MaxInt64), true, true)}}, []int64{math.MaxInt64 - 1, math.MaxInt64}},
		{"null", constraint{ivs: []interval{iv(types.DInt(1), types.DInt(2), true, true)}, null: true}, nil},
		{"text", constraint{ivs: []interval{iv(types.DString("a"), types.DString("b"), true, true)}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := enumerate(tc.c, 5)
			if tc.want == nil {
				if ok {
					t.Fatalf("enumerated %v, want refusal", got.ivs)
				}
				return
			}
			if !ok {
				t.Fatal("refused")
			}
			if len(got.ivs) != len(tc.want) {
				t.Fatalf("got %d values, want %v", len(got.ivs), tc.want)
			}
			for i, w := range tc.want {
				var v int64
				switch d := got.ivs[i].lo.(type) {
				case types.DInt:
					v = int64(d)
				case types.DDate:
					v = int64(d)
				}
				if v != w || !got.ivs[i].isPoint() {
					t.Errorf("value %d = %v, want point %d", i, got.ivs[i], w)
				}
			}
		})
	}
}
