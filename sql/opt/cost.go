package opt

import (
	"math"
	"time"
)

// Costs is the cost model: explicit heuristics standing in for the
// statistics Cairn does not collect yet, and the storage profile that
// prices sequential reads, random reads and round trips (DESIGN §8: the
// planner knows whether storage is a local SSD, an HDD or an object
// store, and chooses lookups or full reads accordingly). Costs are in
// abstract units; only their ratios matter.
type Costs struct {
	Name string
	// TableRows is the size assumed of every table.
	TableRows float64
	// EqRows is how many rows one value of a non-unique key prefix
	// matches; a unique index's full key matches one row.
	EqRows float64
	// RangeFraction is the part of its input a range predicate keeps.
	RangeFraction float64
	// SeqRow is reading one row of a scan (rows arrive in key order).
	SeqRow float64
	// LookupRow is reading one row by key in a batched lookup (index join,
	// lookup join): sql/exec sorts a batch's keys before it reads them
	// (lookup.go), so a batch reads each tablet front to back, but keys
	// far apart still cost a seek each.
	LookupRow float64
	// RoundTrip is one request/response between the SQL layer and the
	// tablets; LookupBatch keys share one. LookupBatch is also how many
	// input rows sql/exec puts in one batch on this profile
	// (exec.Context.LookupBatch): more where a seek or a request costs
	// more, so that a batch's sorted keys lie closer together.
	RoundTrip   float64
	LookupBatch float64
	// SortRow is sorting one row (a Sort the index order would avoid).
	SortRow float64
	// UnitTime is about what one unit costs on this profile (SeqRow's
	// time): WithRoundTrip turns a network round trip into units by it.
	UnitTime time.Duration
	// SeqScanOff and IndexScanOff are PostgreSQL's enable_seqscan and
	// enable_indexscan turned off: the plan avoids that kind of scan
	// wherever another way exists (disableCost), as in PostgreSQL.
	SeqScanOff, IndexScanOff bool
	// MergeJoinOff is PostgreSQL's enable_mergejoin turned off: no merge
	// join (merge.go), a hash join where one would have been.
	MergeJoinOff bool
}

// disableCost is what a disabled kind of scan costs on top of its own
// price: enough that any other plan wins (PostgreSQL's disable_cost).
const disableCost = 1e10

// WithRoundTrip adds a network round trip of rtt (the node's measured
// round-trip time to the other nodes, whose leaseholders a batch reaches)
// to every RoundTrip: in a cluster spread over regions, a lookup join
// that needs many batches costs that many network round trips, while a
// full read needs one per page.
func (c Costs) WithRoundTrip(rtt time.Duration) Costs {
	if rtt > 0 && c.UnitTime > 0 {
		c.RoundTrip += float64(rtt) / float64(c.UnitTime)
	}
	return c
}

// DefaultCosts is a local SSD: random reads cost about two sequential
// ones.
var DefaultCosts = Costs{
	Name: "ssd", TableRows: 1000, EqRows: 10, RangeFraction: 1.0 / 3,
	SeqRow: 1, LookupRow: 2, RoundTrip: 20, LookupBatch: 1000, SortRow: 0.5,
	UnitTime: 50 * time.Microsecond,
}

// HDDCosts is a spinning disk: every lookup may pay a seek (~10 ms
// against ~0.2 ms for a sequential read, read-planning.txt).
var HDDCosts = Costs{
	Name: "hdd", TableRows: 1000, EqRows: 10, RangeFraction: 1.0 / 3,
	SeqRow: 1, LookupRow: 50, RoundTrip: 20, LookupBatch: 10000, SortRow: 0.5,
	UnitTime: 200 * time.Microsecond,
}

// ObjectStoreCosts is a cloud object store: a round trip costs tens of
// milliseconds and blocks are large, so a few lookups cost more than
// reading the table.
var ObjectStoreCosts = Costs{
	Name: "object-store", TableRows: 1000, EqRows: 10, RangeFraction: 1.0 / 3,
	SeqRow: 1, LookupRow: 20, RoundTrip: 2000, LookupBatch: 10000, SortRow: 0.5,
	UnitTime: 10 * time.Microsecond,
}

// ProfileCosts returns the cost model of a storage profile by name (ssd,
// hdd, object-store: storage.Profiles); ok is false for any other name.
// The session plans with its storage.profile setting's costs.
func ProfileCosts(name string) (c Costs, ok bool) {
	for _, c := range []Costs{DefaultCosts, HDDCosts, ObjectStoreCosts} {
		if c.Name == name {
			return c, true
		}
	}
	return DefaultCosts, false
}

// scanPage is how many keys one page of a scan reads per round trip once
// its pages have grown (sql/exec's maxPage).
const scanPage = 8192

// scanCost prices reading rows: one round trip per page (the reader sends
// many spans in one request).
func (c Costs) scanCost(rows float64) float64 {
	pages := max(1, math.Ceil(rows/scanPage))
	return rows*c.SeqRow + pages*c.RoundTrip
}

// lookupCost prices looking up keys rows by key, in batches.
func (c Costs) lookupCost(keys float64) float64 {
	batches := float64(int((keys + c.LookupBatch - 1) / c.LookupBatch))
	return keys*c.LookupRow + max(batches, 1)*c.RoundTrip
}
