package opt

import (
	"context"
	"math"
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/stats"
)

// TestLookupCost: how cost.go prices a join's lookups against reading the
// table (Costs' doc comment).
func TestLookupCost(t *testing.T) {
	ssd, hdd, obj := DefaultCosts, HDDCosts, ObjectStoreCosts
	small := tableSize{rows: 1000, bytes: 64000} // the heuristics' table: 16 blocks, one chunk
	big := tableSize{rows: 1e6, bytes: 1e8}      // 100 MB: more than the block cache
	fits := tableSize{rows: 2e5, bytes: 1.4e7}   // 14 MB: less
	huge := tableSize{rows: 1e8, bytes: 1e10}    // 10 GB
	packed := tableSize{rows: 1e6, bytes: 1e8, disk: 3e7}
	cached := func(c Costs) Costs { c.CacheBytes = 1 << 30; return c }
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		// An equality on an indexed column of a table without statistics
		// (EqRows keys) stays an index lookup: a few keys, a few reads.
		{"ssd: 10 keys of the heuristics' table cost less than reading it", ssd.lookupCost(10, small)+10*ssd.SeqRow < ssd.scanCost(small.rows, small)},
		{"hdd: the same", hdd.lookupCost(10, small)+10*hdd.SeqRow < hdd.scanCost(small.rows, small)},
		{"object store: the same (one chunk either way)", obj.lookupCost(10, small)+10*obj.SeqRow < obj.scanCost(small.rows, small)},
		// A few keys cost a read each (a seek each on an HDD), however
		// large the table.
		{"ssd: 10 keys into 10 GB are ten reads", within1pct(ssd.lookupCost(10, huge), 10*ssd.LookupRow+ssd.RoundTrip+10*ssd.BlockRead)},
		{"hdd: ten reads and ten seeks", within1pct(hdd.lookupCost(10, huge), 10*hdd.LookupRow+hdd.RoundTrip+10*(hdd.BlockRead+hdd.Seek))},
		{"object store: ten requests", within1pct(obj.lookupCost(10, huge), 10*obj.LookupRow+obj.RoundTrip+10*obj.BlockRead)},
		// A batch touching every block costs about reading the table in
		// order; a sparse one a read per block it touches, never more
		// than a read of every block.
		{"hdd: a dense batch's reads are about the table's", hdd.batchIO(1e6, 1e8/4096, 1e8, 1e8) < 1.5*hdd.tableIO(1e8)},
		{"ssd: a sparse batch reads block by block", within1pct(ssd.batchIO(10, 1e10/4096, 1e10, 1e10), 10*ssd.BlockRead)},
		{"ssd: never more than every block by itself", ssd.batchIO(1e5, 1e8/4096, 1e8, 1e8) <= 1e8/4096*ssd.BlockRead},
		// A table larger than the block cache is read by every batch; one
		// that fits, once by all of them.
		{"hdd, 100 MB: five batches pass over it five times", near(hdd.lookupCost(5e4, big)-5e4*hdd.LookupRow-5*hdd.RoundTrip, 5*hdd.batchIO(1e4, math.Ceil(1e8/4096), 1e8, 1e8))},
		{"hdd, 100 MB cached: each block read once, by whichever batch comes first", cached(hdd).lookupCost(5e4, big) < hdd.lookupCost(5e4, big)},
		{"object store, 14 MB: once", near(obj.lookupCost(5e4, fits)-5e4*obj.LookupRow-5*obj.RoundTrip, obj.tableIO(1.4e7))},
		{"object store, 100 MB: five times, each batch fetching its chunks again", near(obj.lookupCost(5e4, big)-5e4*obj.LookupRow-5*obj.RoundTrip, 5*obj.batchIO(1e4, math.Ceil(1e8/(1<<20)), 1e8, 1e8))},
		// An object store's read in order is a request per chunk,
		// whatever the read-ahead window.
		{"object store: 100 MB in order is a request per chunk", near(obj.tableIO(1e8), math.Ceil(1e8/(1<<20))*obj.BlockRead)},
		// Statistics that know the table's size on disk (DiskBytes): an
		// object store's chunks and a read in order are what the disk
		// holds, a disk's 4 KiB blocks and the block cache what the
		// keys and values take.
		{"object store, 100 MB in 30 MB of SSTs: a batch fetches 29 chunks, not 96", near(obj.lookupCost(1e4, packed)-1e4*obj.LookupRow-obj.RoundTrip, 29*obj.BlockRead)},
		{"object store, the same read in order: 29 requests", near(obj.scanCost(1e6, packed)-1e6*obj.SeqRow-math.Ceil(1e6/scanPage)*obj.RoundTrip, 29*obj.BlockRead)},
		{"ssd: the blocks are 4 KiB of keys and values, however compressed", within1pct(ssd.lookupCost(10, packed), ssd.lookupCost(10, big))},
		{"hdd: a read in order transfers the compressed bytes", hdd.scanCost(1e6, packed) < hdd.scanCost(1e6, big)},
		// A hash join's build is CPU by the row.
		{"hash build", hdd.hashBuildCost(1e6) == 1e6*hdd.HashRow},
	} {
		if !tc.ok {
			t.Errorf("%s: does not hold", tc.name)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(math.Abs(a), math.Abs(b)) }

// within1pct allows for ten keys sharing a block now and then.
func within1pct(a, b float64) bool { return math.Abs(a-b) <= 0.01*math.Max(math.Abs(a), math.Abs(b)) }

// TestJoinMethodByProfile: bench/joinchoice's join with the statistics of
// its tables (t: -lookups rows, u: -rows rows of 64 bytes, what ANALYZE
// finds there) planned on each profile with the bench's block cache, and
// the costs EXPLAIN (VERBOSE) prints; bench/README.md has the times
// both plans took. 10,000 keys into 200,000 rows with a 1 MiB cache (the
// bench's default): the plan flips. On ssd each of ten batches of 1,000
// keys reads a block for nearly every key again, and the hash join wins;
// hdd and object-store take them in one batch, which reads (fetches) the
// blocks (chunks) its keys fall in once, in order, about what the hash
// join's read costs, without the CPU of its 200,000 rows. With 20,000
// keys and the table in a 64 MiB cache the same. 100,000 keys into
// 1,000,000 rows with a cache a quarter of the table: a hash join on
// both, since each of the object store's ten batches fetches every chunk
// again. 20,000 keys into 1,000,000 rows on object-store: what ANALYZE
// records of the table's size on disk decides. Its 61 MiB of keys and
// values are 19 MiB of SSTs (disk 0.31: the bench's pad compresses), so
// each of two batches fetches 19 chunks, not 61, and the lookups win;
// priced by the 61 MiB they would lose.
func TestJoinMethodByProfile(t *testing.T) {
	for _, tc := range []struct {
		lookups, rows float64
		cacheMiB      float64
		profile       Costs
		want          string
		disk          float64 // the table's bytes on disk over its keys and values (0: unknown)
	}{
		{1e4, 2e5, 1, DefaultCosts, "Join Method Cost: hash join 267400 (rejected: lookup join 924499)", 0},
		{1e4, 2e5, 1, HDDCosts, "Join Method Cost: lookup join 159508 (rejected: hash join 345280)", 0},
		{1e4, 2e5, 1, ObjectStoreCosts, "Join Method Cost: lookup join 470100 (rejected: hash join 652500)", 0},
		{2e4, 2e5, 64, DefaultCosts, "Join Method Cost: hash join 267400 (rejected: lookup join 469461)", 0},
		{2e4, 2e5, 64, HDDCosts, "Join Method Cost: lookup join 242843 (rejected: hash join 345280)", 0},
		{2e4, 2e5, 64, ObjectStoreCosts, "Join Method Cost: lookup join 550200 (rejected: hash join 652500)", 0},
		{1e5, 1e6, 16, DefaultCosts, "Join Method Cost: hash join 1336800 (rejected: lookup join 10496897)", 0},
		{1e5, 1e6, 16, ObjectStoreCosts, "Join Method Cost: hash join 3172300 (rejected: lookup join 19401000)", 0},
		{2e4, 1e6, 16, ObjectStoreCosts, "Join Method Cost: lookup join 1300200 (rejected: hash join 1882300)", 0.31},
		{2e4, 1e6, 16, ObjectStoreCosts, "Join Method Cost: hash join 3172300 (rejected: lookup join 3880200)", 0},
	} {
		st := func(tbl *catalog.Table) *stats.Table {
			switch tbl.Name {
			case "t":
				return &stats.Table{TableID: tbl.ID, RowCount: tc.lookups, Bytes: int64(tc.lookups * 30)}
			case "u":
				return &stats.Table{TableID: tbl.ID, RowCount: tc.rows, Bytes: int64(tc.rows * 64), DiskBytes: int64(tc.rows * 64 * tc.disk)}
			}
			return nil
		}
		b := newBuilder(t)
		p := &plan.Plan{Root: b.join(plan.InnerJoin, b.scan("t", "a", "b"), b.scan("u", "x", "y"), "t.b = u.x")}
		costs := tc.profile
		costs.CacheBytes = tc.cacheMiB * (1 << 20)
		_, choices, err := OptimizeExplained(context.Background(), p, costs, st, DefaultJoinLimits)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, c := range choices {
			got = c.String()
		}
		if got != tc.want {
			t.Errorf("%v keys into %v rows on %s, %v MiB of cache:\n got %s\nwant %s\n%s", tc.lookups, tc.rows, tc.profile.Name, tc.cacheMiB, got, tc.want, format(p.Root))
		}
	}
}
