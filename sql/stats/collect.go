package stats

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// SampleSize is how many rows the reservoir keeps: PostgreSQL's
// 300 × default_statistics_target (100).
const SampleSize = 30000

// Target is how many MCVs and histogram buckets a column gets at most
// (default_statistics_target).
const Target = 100

// tooWide is the width above which a value is left out of the MCVs and
// the histogram (PostgreSQL's WIDTH_THRESHOLD): such values are almost
// never repeated and would bloat the statistics.
const tooWide = 1024

// pageRows is how many KVs one scan request of a collection reads.
const pageRows = 10000

// Options tune a collection; the zero value is PostgreSQL's defaults.
type Options struct {
	// SampleSize overrides SampleSize (tests).
	SampleSize int
	// Rand picks the sample (nil: a fresh seeded generator).
	Rand *rand.Rand
	// Now stamps the result (nil: time.Now).
	Now func() time.Time
}

// Collect reads every row of t in txn and returns its statistics for the
// columns cols (nil: every stored column; virtual generated columns have
// no stored value and are skipped).
func Collect(ctx context.Context, txn *kv.Txn, t *catalog.Table, cols []rowenc.ColumnID, opts Options) (*Table, error) {
	layout, err := t.Layout()
	if err != nil {
		return nil, fmt.Errorf("stats: layout of %q: %w", t.Name, err)
	}
	if cols == nil {
		for _, c := range t.Columns {
			cols = append(cols, c.ID)
		}
	}
	var accs []*colAcc
	for _, id := range cols {
		c := t.ColumnByID(id)
		if c == nil || (c.ComputedExpr != "" && !c.Stored) {
			continue
		}
		accs = append(accs, &colAcc{id: id, pos: layout.ColumnPos(id), t: c.Type, hll: newHLL()})
	}
	size := opts.SampleSize
	if size <= 0 {
		size = SampleSize
	}
	rng := opts.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	f, err := rowenc.NewRowFetcher(layout, &layout.Primary, nil)
	if err != nil {
		return nil, fmt.Errorf("stats: fetcher of %q: %w", t.Name, err)
	}
	var rows int64
	var sample [][]types.Datum
	var ords []int64 // ords[i]: which row sample[i] was, in key order
	emit := func(row []types.Datum) error {
		rows++
		for _, a := range accs {
			a.add(row[a.pos])
		}
		// Reservoir sampling (Vitter's algorithm R): every row ends up in
		// the sample with probability size/rows.
		keep := func() []types.Datum {
			s := make([]types.Datum, len(accs))
			for i, a := range accs {
				s[i] = row[a.pos]
			}
			return s
		}
		if len(sample) < size {
			sample = append(sample, keep())
			ords = append(ords, rows)
		} else if j := rng.Int64N(rows); j < int64(size) {
			sample[j] = keep()
			ords[j] = rows
		}
		return nil
	}
	var bytesRead int64
	span := layout.IndexSpan(&layout.Primary)
	start := span.Key
	for start != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := &kv.Batch{}
		b.Scan(start, span.EndKey, pageRows)
		if err := txn.Run(ctx, b); err != nil {
			return nil, fmt.Errorf("stats: reading %q: %w", t.Name, err)
		}
		res := &b.Results[0]
		for _, kvp := range res.Rows {
			bytesRead += int64(len(kvp.Key) + len(kvp.Value))
		}
		if err := f.Add(res.Rows, emit); err != nil {
			return nil, fmt.Errorf("stats: decoding %q: %w", t.Name, err)
		}
		start = nil
		if res.ResumeSpan != nil {
			start = res.ResumeSpan.Key
		}
	}
	if err := f.Finish(emit); err != nil {
		return nil, fmt.Errorf("stats: decoding %q: %w", t.Name, err)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	// The sample in the table's physical (primary key) order, which
	// pg_stats.correlation compares the values' order with.
	idx := make([]int, len(sample))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(x, y int) bool { return ords[idx[x]] < ords[idx[y]] })
	ordered := make([][]types.Datum, len(sample))
	for i, j := range idx {
		ordered[i] = sample[j]
	}
	sample = ordered
	out := &Table{TableID: t.ID, RowCount: float64(rows), Bytes: bytesRead, CollectedAt: now().UTC()}
	if rows == 0 {
		// Nothing to describe: PostgreSQL stores no column statistics
		// for an empty table either.
		return out, nil
	}
	for i, a := range accs {
		out.Columns = append(out.Columns, a.finish(rows, sample, i))
	}
	return out, nil
}

// colAcc accumulates one column's figures over every row.
type colAcc struct {
	id     rowenc.ColumnID
	pos    int
	t      *types.T
	nulls  int64
	width  int64
	values int64
	hll    *hll
}

func (a *colAcc) add(d types.Datum) {
	if d == nil || types.IsNull(d) {
		a.nulls++
		return
	}
	a.values++
	a.width += int64(width(a.t, d))
	a.hll.add(types.Hash(d))
}

// width is d's stored width in bytes as pg_stats.avg_width reports it:
// the type's fixed size, else the text form's length plus a varlena
// header.
func width(t *types.T, d types.Datum) int {
	if t != nil {
		if s := t.Size(); s > 0 {
			return int(s)
		}
	}
	n := len(d.String())
	if n < 127 {
		return n + 1
	}
	return n + 4
}

// sampleValue is one distinct non-NULL value of the sample.
type sampleValue struct {
	d     types.Datum
	key   string
	count int
}

func (a *colAcc) finish(rows int64, sample [][]types.Datum, i int) *Column {
	c := &Column{ID: a.id, Type: a.t}
	if rows == 0 {
		return c
	}
	c.NullFrac = float64(a.nulls) / float64(rows)
	if a.values > 0 {
		c.AvgWidth = int(math.Round(float64(a.width) / float64(a.values)))
		c.Distinct = math.Max(1, math.Min(a.hll.estimate(), float64(a.values)))
	}
	// Group the sample's values: by key encoding, which is equal exactly
	// when Compare is (rowenc invariant 1); a type without one (jsonb) has
	// no MCVs or histogram.
	byKey := map[string]*sampleValue{}
	var vals []*sampleValue
	var nonNull []*sampleValue // one entry per sampled row, for the histogram
	sampled := len(sample)
	all := map[string]bool{} // every distinct value, wide ones included
	for _, row := range sample {
		d := row[i]
		if d == nil || types.IsNull(d) {
			continue
		}
		k, err := rowenc.EncodeKey(nil, d, rowenc.Asc)
		if err != nil {
			return c
		}
		all[string(k)] = true
		if width(a.t, d) > tooWide {
			continue
		}
		v := byKey[string(k)]
		if v == nil {
			v = &sampleValue{d: d, key: string(k)}
			byKey[string(k)] = v
			vals = append(vals, v)
		}
		v.count++
		nonNull = append(nonNull, v)
	}
	if int64(sampled) == rows {
		// The sample is the whole table: its count is exact.
		c.Distinct = float64(len(all))
	}
	if len(vals) == 0 {
		return c
	}
	singles := 0
	for _, v := range vals {
		if v.count == 1 {
			singles++
		}
	}
	if singles == 0 && len(vals) == len(all) {
		// Every sampled value appears more than once: the sample has
		// seen them all (PostgreSQL's rule), which the sketch can only
		// approximate.
		c.Distinct = float64(len(vals))
	}
	if len(vals) == len(nonNull) && c.Distinct >= 0.95*float64(a.values) {
		// No value repeats in the sample and the sketch agrees: unique
		// (the sketch's error would otherwise show as 0.99 × rows).
		c.Distinct = float64(a.values)
	}
	sort.SliceStable(vals, func(x, y int) bool {
		if vals[x].count != vals[y].count {
			return vals[x].count > vals[y].count
		}
		return vals[x].key < vals[y].key
	})
	// Every distinct value seen, few of them, and the sketch agrees there
	// are no others: all of them are MCVs and there is no histogram
	// (PostgreSQL keeps the complete list then).
	var mcv []*sampleValue
	// The count must also not grow with the table (at most a tenth of the
	// rows, where pg_stats.n_distinct stays positive).
	if len(vals) <= Target && c.Distinct <= float64(len(vals))*1.05+1 && c.Distinct <= 0.1*float64(rows) {
		mcv = vals
	} else {
		// Otherwise a value is common when it appears clearly more often
		// than the average value (1.25 × the mean count, and at least
		// twice), as in PostgreSQL's compute_scalar_stats.
		avg := float64(len(nonNull)) / math.Max(c.Distinct, 1)
		minCount := math.Max(avg*1.25, 2)
		for _, v := range vals {
			if len(mcv) == Target || float64(v.count) < minCount {
				break
			}
			mcv = append(mcv, v)
		}
	}
	inMCV := map[string]bool{}
	for _, v := range mcv {
		c.MCV = append(c.MCV, v.d)
		c.MCVFreq = append(c.MCVFreq, float64(v.count)/float64(sampled))
		inMCV[v.key] = true
	}
	// The histogram: equi-depth bounds over the sampled rows whose values
	// are not MCVs, in value order.
	var rest []*sampleValue
	for _, v := range nonNull {
		if !inMCV[v.key] {
			rest = append(rest, v)
		}
	}
	c.Correlation = correlation(nonNull)
	sort.SliceStable(rest, func(x, y int) bool { return rest[x].key < rest[y].key })
	distinctRest := 0
	for j := range rest {
		if j == 0 || rest[j].key != rest[j-1].key {
			distinctRest++
		}
	}
	if distinctRest >= 2 {
		buckets := min(Target, distinctRest-1)
		for b := 0; b <= buckets; b++ {
			// PostgreSQL's positions (compute_scalar_stats): bounds may
			// repeat a value that fills more than a bucket.
			c.Histogram = append(c.Histogram, rest[b*(len(rest)-1)/buckets].d)
		}
	}
	return c
}

// hll is a HyperLogLog sketch (Flajolet et al.) with 2^14 registers:
// about 0.8% standard error on the distinct count, in 16 KiB per column.
type hll struct{ reg []uint8 }

const hllBits = 14

func newHLL() *hll { return &hll{reg: make([]uint8, 1<<hllBits)} }

func (h *hll) add(x uint64) {
	// types.Hash is stable, not necessarily well mixed: finish it with
	// a 64-bit mixer (splitmix64's) before splitting it.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	idx := x >> (64 - hllBits)
	rank := uint8(bits.LeadingZeros64(x<<hllBits|1<<(hllBits-1))) + 1
	if rank > h.reg[idx] {
		h.reg[idx] = rank
	}
}

func (h *hll) estimate() float64 {
	m := float64(len(h.reg))
	sum, zeros := 0.0, 0
	for _, r := range h.reg {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		// Small cardinalities: linear counting is exact enough.
		e = m * math.Log(m/float64(zeros))
	}
	return e
}

// correlation is the statistical correlation between the physical order
// of the sampled non-NULL values (vals, in that order) and their value
// order, as PostgreSQL computes pg_stats.correlation: -1 to 1, near 1 or
// -1 when an index range reads rows stored together.
func correlation(vals []*sampleValue) float64 {
	n := len(vals)
	if n < 2 {
		return 0
	}
	pos := make([]int, n)
	for i := range pos {
		pos[i] = i
	}
	// Ties keep their physical order, as PostgreSQL's sort does.
	sort.SliceStable(pos, func(x, y int) bool { return vals[pos[x]].key < vals[pos[y]].key })
	var xy float64
	for rank, p := range pos {
		xy += float64(rank) * float64(p)
	}
	fn := float64(n)
	xsum := (fn - 1) * fn / 2
	x2sum := (fn - 1) * fn * (2*fn - 1) / 6
	return (fn*xy - xsum*xsum) / (fn*x2sum - xsum*xsum)
}
