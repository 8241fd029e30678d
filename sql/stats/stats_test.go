package stats

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
)

func ints(vs ...int) []types.Datum {
	out := make([]types.Datum, len(vs))
	for i, v := range vs {
		out[i] = types.DInt(v)
	}
	return out
}

// The selectivities PostgreSQL's estimators would give for the same
// statistics.
func TestSelectivity(t *testing.T) {
	c := &Column{
		Type: types.Int8, NullFrac: 0.1, Distinct: 102,
		MCV: ints(7, 8), MCVFreq: []float64{0.3, 0.2},
		// The other 40% of the rows: 100 values spread evenly over 0..100.
		Histogram: ints(0, 25, 50, 75, 100),
	}
	pt := func(v int) []Range {
		return []Range{{Lo: types.DInt(v), Hi: types.DInt(v), LoIncl: true, HiIncl: true}}
	}
	for _, tc := range []struct {
		name   string
		ranges []Range
		null   bool
		want   float64
	}{
		{"an MCV", pt(7), false, 0.3},
		{"another value: the rest over the other distinct values", pt(30), false, 0.4 / 100},
		{"IS NULL", nil, true, 0.1},
		{"IN (7, 8)", append(pt(7), pt(8)...), false, 0.5},
		{"x < 50: both MCVs and half the histogram", []Range{{Hi: types.DInt(50)}}, false, 0.5 + 0.4*0.5},
		{"x > 50", []Range{{Lo: types.DInt(50)}}, false, 0.4 * 0.5},
		{"x >= 90, interpolated in the last bucket", []Range{{Lo: types.DInt(90), LoIncl: true}}, false, 0.4 * 0.1},
		{"x > 1000: nothing", []Range{{Lo: types.DInt(1000)}}, false, 0.4 / 102},
		{"IS NOT NULL", []Range{{}}, false, 0.9},
	} {
		got := c.Selectivity(tc.ranges, tc.null)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: got %g, want %g", tc.name, got, tc.want)
		}
	}
	// Every value an MCV: a value outside them is absent.
	all := &Column{Type: types.Int8, Distinct: 2, MCV: ints(1, 2), MCVFreq: []float64{0.5, 0.5}}
	if got := all.EqSel(types.DInt(3)); got != 0 {
		t.Errorf("non-MCV of a complete list: %g", got)
	}
	// No histogram: the default third of the rest.
	nohist := &Column{Type: types.Int8, Distinct: 1000}
	if got := nohist.Selectivity([]Range{{Lo: types.DInt(3)}}, false); got != DefaultRangeSel {
		t.Errorf("range without histogram: %g", got)
	}
	// A text constant never meets an int histogram's Compare.
	if got := c.Selectivity([]Range{{Lo: types.DString("x")}}, false); got <= 0 || got > 1 {
		t.Errorf("mismatched family: %g", got)
	}
}

// finish turns accumulated values into PostgreSQL's pg_stats shape.
func TestFinish(t *testing.T) {
	run := func(vals []types.Datum, sampleSize int) *Column {
		a := &colAcc{id: 1, pos: 0, t: types.Int8, hll: newHLL()}
		var sample [][]types.Datum
		rng := rand.New(rand.NewPCG(1, 2))
		for i, v := range vals {
			a.add(v)
			if len(sample) < sampleSize {
				sample = append(sample, []types.Datum{v})
			} else if j := rng.IntN(i + 1); j < sampleSize {
				sample[j] = []types.Datum{v}
			}
		}
		return a.finish(int64(len(vals)), sample, 0)
	}
	// Few values: all of them MCVs, no histogram.
	var few []types.Datum
	for i := range 1000 {
		if i%10 == 0 {
			few = append(few, types.DNull)
		} else {
			few = append(few, types.DInt(i%3))
		}
	}
	c := run(few, 30000)
	if c.NullFrac != 0.1 || c.Distinct != 3 || len(c.MCV) != 3 || c.Histogram != nil || c.AvgWidth != 8 {
		t.Errorf("few values: %+v", c)
	}
	if s := c.MCVFreq[0] + c.MCVFreq[1] + c.MCVFreq[2]; math.Abs(s-0.9) > 1e-9 {
		t.Errorf("MCV frequencies sum to %g, want 0.9", s)
	}
	// Unique values: no MCVs, a 101-bound histogram from min to max.
	var uniq []types.Datum
	for i := range 5000 {
		uniq = append(uniq, types.DInt(i))
	}
	c = run(uniq, 30000)
	if c.Distinct != 5000 || len(c.MCV) != 0 || len(c.Histogram) != Target+1 ||
		c.Histogram[0] != types.DInt(0) || c.Histogram[Target] != types.DInt(4999) {
		t.Errorf("unique values: distinct %g, %d MCVs, histogram %v", c.Distinct, len(c.MCV), c.Histogram)
	}
	// A sampled column whose every value repeats: the sample saw them all.
	var rep []types.Datum
	for i := range 50000 {
		rep = append(rep, types.DInt(i%100))
	}
	if c = run(rep, 3000); c.Distinct != 100 || len(c.MCV) != 100 {
		t.Errorf("repeated values: distinct %g, %d MCVs", c.Distinct, len(c.MCV))
	}
	// A skewed column sampled: the frequent value is an MCV, the rest a
	// histogram; the distinct count comes from the sketch.
	var skew []types.Datum
	for i := range 100000 {
		if i%2 == 0 {
			skew = append(skew, types.DInt(-1))
		} else {
			skew = append(skew, types.DInt(i))
		}
	}
	c = run(skew, 3000)
	if len(c.MCV) != 1 || c.MCV[0] != types.DInt(-1) || math.Abs(c.MCVFreq[0]-0.5) > 0.05 || len(c.Histogram) != Target+1 {
		t.Errorf("skewed: MCVs %v %v, %d bounds", c.MCV, c.MCVFreq, len(c.Histogram))
	}
	if math.Abs(c.Distinct-50001)/50001 > 0.03 {
		t.Errorf("skewed: distinct %g, want about 50001", c.Distinct)
	}
}

func TestHLL(t *testing.T) {
	for _, n := range []int{1, 10, 1000, 100000, 1000000} {
		h := newHLL()
		for i := range n {
			h.add(types.Hash(types.DInt(i)))
			h.add(types.Hash(types.DInt(i))) // duplicates change nothing
		}
		if got := h.estimate(); math.Abs(got-float64(n))/float64(n) > 0.03 {
			t.Errorf("%d distinct: estimated %g", n, got)
		}
	}
}

// Stored statistics decode as collected, and only for the column types
// they were collected under (invariant 2).
func TestEncodeDecode(t *testing.T) {
	tbl := &catalog.Table{ID: 52, Name: "t", Columns: []catalog.Column{
		{ID: 1, Name: "a", Type: types.Int8}, {ID: 2, Name: "s", Type: types.Text},
	}}
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	in := &Table{TableID: 52, RowCount: 1000, Bytes: 12345, DiskBytes: 4321, CollectedAt: at, Columns: []*Column{
		{ID: 1, Type: types.Int8, Distinct: 1000, AvgWidth: 8, Histogram: ints(1, 500, 1000)},
		{ID: 2, Type: types.Text, NullFrac: 0.25, Distinct: 2, AvgWidth: 4,
			MCV: []types.Datum{types.DString("x"), types.DString("y")}, MCVFreq: []float64{0.5, 0.25}},
	}}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(b, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if out.RowCount != 1000 || out.Bytes != 12345 || out.DiskBytes != 4321 || !out.CollectedAt.Equal(at) || len(out.Columns) != 2 {
		t.Fatalf("decoded %+v", out)
	}
	a, s := out.Column(1), out.Column(2)
	if len(a.Histogram) != 3 || a.Histogram[1] != types.DInt(500) || a.Distinct != 1000 {
		t.Errorf("a: %+v", a)
	}
	if s.NullFrac != 0.25 || len(s.MCV) != 2 || s.MCV[1] != types.DString("y") || s.MCVFreq[1] != 0.25 {
		t.Errorf("s: %+v", s)
	}
	// ALTER COLUMN s TYPE int8 since: s's statistics are ignored; a
	// dropped column's too.
	retyped := &catalog.Table{ID: 52, Name: "t", Columns: []catalog.Column{{ID: 2, Name: "s", Type: types.Int8}}}
	if out, err := Decode(b, retyped); err != nil || len(out.Columns) != 0 {
		t.Errorf("after retype and drop: %+v, %v", out, err)
	}
	if _, err := Decode([]byte("{bad"), tbl); err == nil {
		t.Error("corrupt value decoded")
	}
	if out, err := Decode([]byte(`{"v":99}`), tbl); err != nil || out != nil {
		t.Errorf("another format version: %+v, %v", out, err)
	}
}
