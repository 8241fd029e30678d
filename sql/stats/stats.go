package stats

import (
	"math"
	"sort"
	"time"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Table is the statistics of one table, as of one collection.
type Table struct {
	TableID catalog.ID
	// RowCount is the number of live rows; Bytes the size of their primary
	// index entries (keys and values), for pg_class.relpages.
	RowCount float64
	Bytes    int64
	// DiskBytes is what the primary index takes on disk, compressed (the
	// store's estimate for its span, which sees flushed files only), at
	// most Bytes; set by ANALYZE where the node's tablet directory can
	// estimate it; 0: unknown. The planner prices an object store's
	// chunks and a read's transfer by it (sql/opt's tableSize).
	DiskBytes int64
	// CollectedAt is when the collection read the table.
	CollectedAt time.Time
	Columns     []*Column
}

// Column is the statistics of one column (PostgreSQL's pg_statistic row).
type Column struct {
	ID rowenc.ColumnID
	// Type is the column's type at collection (invariant 2).
	Type *types.T
	// NullFrac is the fraction of rows whose value is NULL.
	NullFrac float64
	// Distinct estimates how many distinct non-NULL values the column holds.
	Distinct float64
	// AvgWidth is the average width in bytes of the non-NULL values.
	AvgWidth int
	// MCV are the most common values, most common first; MCVFreq[i] is the
	// fraction of all rows (NULLs included) holding MCV[i].
	MCV     []types.Datum
	MCVFreq []float64
	// Correlation is between the rows' physical (primary key) order and
	// their values' order, -1 to 1 (pg_stats.correlation).
	Correlation float64
	// Histogram holds the bounds of equi-depth buckets over the non-NULL
	// values that are not MCVs, ascending (nil: fewer than two such values).
	Histogram []types.Datum
}

// Column returns the statistics of column id, or nil.
func (t *Table) Column(id rowenc.ColumnID) *Column {
	if t == nil {
		return nil
	}
	for _, c := range t.Columns {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Range is a set of non-NULL values between Lo and Hi (nil: unbounded).
type Range struct {
	Lo, Hi         types.Datum
	LoIncl, HiIncl bool
}

func (r Range) isPoint() bool {
	return r.Lo != nil && r.Hi != nil && r.LoIncl && r.HiIncl && types.Compare(r.Lo, r.Hi) == 0
}

func (r Range) contains(d types.Datum) bool {
	if r.Lo != nil {
		c := types.Compare(d, r.Lo)
		if c < 0 || (c == 0 && !r.LoIncl) {
			return false
		}
	}
	if r.Hi != nil {
		c := types.Compare(d, r.Hi)
		if c > 0 || (c == 0 && !r.HiIncl) {
			return false
		}
	}
	return true
}

// DefaultRangeSel is the part of the non-MCV values a range keeps when
// there is no histogram to say (PostgreSQL's DEFAULT_INEQ_SEL).
const DefaultRangeSel = 1.0 / 3

// mcvSum is the fraction of rows the MCVs hold.
func (c *Column) mcvSum() float64 {
	s := 0.0
	for _, f := range c.MCVFreq {
		s += f
	}
	return s
}

// rest is the fraction of rows that are neither NULL nor an MCV.
func (c *Column) rest() float64 {
	return math.Max(0, 1-c.NullFrac-c.mcvSum())
}

// EqSel estimates the fraction of rows whose value equals d (non-NULL),
// as PostgreSQL's var_eq_const does: an MCV's own frequency, else the
// non-MCV rows spread evenly over the non-MCV distinct values.
func (c *Column) EqSel(d types.Datum) float64 {
	for i, v := range c.MCV {
		if comparable(v, d) && types.Compare(v, d) == 0 {
			return c.MCVFreq[i]
		}
	}
	return c.OtherEqSel()
}

// OtherEqSel is the fraction of rows equal to one value that is not an
// MCV (or an unknown value: a parameter, a join key).
func (c *Column) OtherEqSel() float64 {
	others := c.Distinct - float64(len(c.MCV))
	if others < 1 {
		// Every value is an MCV: a value that is not one is (almost) absent.
		if c.rest() == 0 {
			return 0
		}
		others = 1
	}
	return c.rest() / others
}

// AvgEqSel is the fraction of rows equal to a value picked from the
// column's own rows (an equality with an unknown value, PostgreSQL's
// 1/ndistinct).
func (c *Column) AvgEqSel() float64 {
	if c.Distinct < 1 {
		return 1
	}
	return (1 - c.NullFrac) / c.Distinct
}

// Selectivity estimates the fraction of rows whose value lies in one of
// ranges (sorted, disjoint), or is NULL when null is set.
func (c *Column) Selectivity(ranges []Range, null bool) float64 {
	sel := 0.0
	if null {
		sel += c.NullFrac
	}
	for _, r := range ranges {
		if r.isPoint() {
			sel += c.EqSel(r.Lo)
			continue
		}
		sel += c.rangeSel(r)
	}
	return clamp(sel)
}

// rangeSel is PostgreSQL's scalarineqsel in outline: the MCVs in the range
// count exactly, the histogram says which part of the other values it
// holds.
func (c *Column) rangeSel(r Range) float64 {
	sel := 0.0
	for i, v := range c.MCV {
		if comparable(v, bound(r)) && r.contains(v) {
			sel += c.MCVFreq[i]
		}
	}
	rest := c.rest()
	if rest == 0 {
		return sel
	}
	if len(c.Histogram) < 2 || (bound(r) != nil && !comparable(c.Histogram[0], bound(r))) {
		if r.Lo == nil && r.Hi == nil {
			return sel + rest
		}
		return sel + rest*DefaultRangeSel
	}
	lo, hi := 0.0, 1.0
	if r.Lo != nil {
		lo = c.histPos(r.Lo)
	}
	if r.Hi != nil {
		hi = c.histPos(r.Hi)
	}
	frac := hi - lo
	// A range inside one bucket still holds some values: at least one
	// distinct value's share, as PostgreSQL clamps its estimates.
	if min := 1 / math.Max(c.Distinct, 1); frac < min {
		frac = min
	}
	return sel + rest*math.Min(frac, 1)
}

// histPos is the fraction of the histogram's values below d: whole
// buckets below it plus, inside its bucket, a linear interpolation for
// numbers (half a bucket otherwise).
func (c *Column) histPos(d types.Datum) float64 {
	h := c.Histogram
	n := len(h) - 1
	if types.Compare(d, h[0]) <= 0 {
		return 0
	}
	if types.Compare(d, h[n]) >= 0 {
		return 1
	}
	// First bound above d.
	i := sort.Search(len(h), func(i int) bool { return types.Compare(h[i], d) > 0 })
	lo, hi := h[i-1], h[i]
	frac := 0.5
	if a, ok := toFloat(lo); ok {
		if b, ok := toFloat(hi); ok {
			if x, ok := toFloat(d); ok && b > a {
				frac = (x - a) / (b - a)
			}
		}
	}
	return (float64(i-1) + frac) / float64(n)
}

func toFloat(d types.Datum) (float64, bool) {
	switch v := d.(type) {
	case types.DInt:
		return float64(v), true
	case types.DFloat:
		f := float64(v)
		return f, !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

func bound(r Range) types.Datum {
	if r.Lo != nil {
		return r.Lo
	}
	return r.Hi
}

// comparable reports whether types.Compare may be called on a and b (it
// panics across families without a common comparison, and a constant of
// another family can reach here only through a cast the binder made).
func comparable(a, b types.Datum) bool {
	if a == nil || b == nil {
		return true
	}
	fa, fb := a.Family(), b.Family()
	if fa == fb {
		return true
	}
	num := func(f types.Family) bool {
		return f == types.IntFamily || f == types.FloatFamily || f == types.NumericFamily
	}
	return num(fa) && num(fb)
}

func clamp(x float64) float64 {
	return math.Min(1, math.Max(0, x))
}
