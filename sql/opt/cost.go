package opt

import (
	"math"
	"time"
)

// Costs is the cost model: explicit heuristics standing in for the
// statistics a table may not have, and the storage profile that prices
// reads (DESIGN §8: the planner knows whether storage is a local SSD, an
// HDD or an object store, and chooses lookups or full reads accordingly).
//
// Costs are in units of SeqRow, reading one row of a scan in order (about
// UnitTime of CPU on the machines measured, bench/README.md "bench/readplan
// and bench/joinchoice"); the storage's reads are priced in the same unit
// from their latencies, so CPU and I/O add up. The storage is read in
// blocks (BlockBytes: a 4 KiB block of an SST on a disk, a 1 MiB chunk of
// an object store, storage/simfs's profiles):
//
//   - a scan reads its blocks in order, ReadAhead bytes per read
//     (storage/readahead.go's window): tableIO;
//   - a batch of lookups reads only the blocks its sorted keys fall in
//     (at most the table's), each a read of its own (BlockRead, plus a
//     Seek when far from the last: an HDD's head; a short way ahead the
//     head passes over the gap, BlockTransfer a block), except the blocks
//     read-ahead serves once a batch touches most of the blocks it
//     passes, so a batch dense enough to touch every block costs about
//     what reading the table does (batchIO);
//   - a table that fits in the node's block cache (CacheBytes) is read at
//     most once by all the batches of a join together; a larger one is
//     read again by every batch (the later batches find the early blocks
//     evicted), as PostgreSQL's index_pages_fetched assumes of
//     effective_cache_size. On an object store too: the chunks a batch
//     fetched are not there for the next one (bench/joinchoice counted
//     174 requests for ten batches over a table of about 18 chunks; each
//     batch's iterators read through file handles of their own, Pebble's
//     and read-ahead's, and simfs remembers a handle's chunks, not a
//     file's).
//
// An object store pays a request for every chunk a read spans
// (ChunkedReads): a scan's 8 MiB read-ahead window is eight requests,
// not one (bench/joinchoice: the hash join's scan of 21 MiB took 31).
//
// A hash join reads its right side whole and puts every row in its table
// (HashRow, CPU); a lookup join pays LookupRow of CPU per key besides the
// blocks and round trips of its batches.
type Costs struct {
	Name string
	// TableRows is the size assumed of a table without statistics, and
	// RowBytes the size of one of its rows (primary index key and value;
	// statistics say a table's own, stats.Table.Bytes).
	TableRows float64
	RowBytes  float64
	// EqRows is how many rows one value of a non-unique key prefix
	// matches; a unique index's full key matches one row.
	EqRows float64
	// RangeFraction is the part of its input a range predicate keeps.
	RangeFraction float64
	// SeqRow is reading one row of a scan (rows arrive in key order): the
	// unit.
	SeqRow float64
	// LookupRow is the CPU of looking up one key in a sorted batch (the
	// key's encoding, its seek in the tablet's iterator, the row's return
	// in input order), besides the blocks it reads (batchIO) and the
	// rows it finds (SeqRow each). From bench/joinchoice's lookup joins,
	// their wall time less the disk's charge, per key, in the same run's
	// unit, less the row found and the input row: 4.3 to 12 in six
	// measurements at loads 4-6, median 7.3 (3.2 to 6.7 at loads 8-10).
	LookupRow float64
	// HashRow is putting one row in a hash join's table (the executor
	// builds on the join's right side).
	HashRow float64
	// BlockBytes is the unit the storage is read in; BlockRead one read
	// of a block by itself (the read call, or an object store's request
	// with the chunk's transfer); Seek what reaching a block far from the
	// last read adds (a spinning disk's head; 0 where nothing moves);
	// BlockTransfer passing one block in order (a disk's bandwidth),
	// which is what a gap a sorted batch skips costs at most.
	BlockBytes    float64
	BlockRead     float64
	Seek          float64
	BlockTransfer float64
	// ReadAhead is how many bytes one read of a scan in order fetches
	// (the read-ahead window the profile grows to).
	ReadAhead float64
	// ChunkedReads says a read pays BlockRead for every block it spans
	// (an object store's request per chunk, storage/simfs's
	// Profile.Chunk), however large; otherwise a read pays BlockRead once
	// and BlockTransfer per block.
	ChunkedReads bool
	// CacheBytes is the node's block cache: a table that fits is read
	// from the storage at most once by a join's lookups.
	CacheBytes float64
	// RoundTrip is one request/response between the SQL layer and the
	// tablets; LookupBatch keys share one. LookupBatch is also how many
	// input rows sql/exec puts in one batch on this profile
	// (exec.Context.LookupBatch): more where a read costs more, so that
	// a batch's sorted keys lie closer together.
	RoundTrip   float64
	LookupBatch float64
	// SortRow is sorting one row (a Sort the index order would avoid).
	SortRow float64
	// UnitTime is about what one unit costs (SeqRow's time): the
	// profiles' latencies are priced by it, and WithRoundTrip turns a
	// network round trip into units by it.
	UnitTime time.Duration
	// SeqScanOff and IndexScanOff are PostgreSQL's enable_seqscan and
	// enable_indexscan turned off: the plan avoids that kind of scan
	// wherever another way exists (disableCost), as in PostgreSQL.
	SeqScanOff, IndexScanOff bool
	// MergeJoinOff is PostgreSQL's enable_mergejoin turned off: no merge
	// join (merge.go), a hash join where one would have been.
	MergeJoinOff bool
	// HashJoinOff and NestLoopOff are PostgreSQL's enable_hashjoin and
	// enable_nestloop turned off: a hash join (NestLoopOff: a lookup
	// join, Cairn's index nested loop) costs disableCost more, so the
	// other method is taken wherever it applies.
	HashJoinOff, NestLoopOff bool
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

// unitTime is the time of one unit on every profile: reading one row of
// a join's scan in order, decoded. From bench/joinchoice's hash joins on
// ssd (whose disk charged 3-12 ms), their wall time over the units of
// their scan and build (SeqRow and HashRow), at the lowest loads of the
// session (2026-11-30, loads 4-6): 0.62, 0.85 and 1.04 µs. The same joins
// took 1.6-3.2 µs a unit at loads 8-10, where other engineers' builds
// take the CPU; the disk's latencies do not change with the load, so a
// unit of the loaded machine would make every read look 3x cheaper than
// it is on a machine of its own.
const unitTime = time.Microsecond

// units prices a latency.
func units(d time.Duration) float64 { return float64(d) / float64(unitTime) }

// base is what the profiles share: the heuristics for tables without
// statistics, the CPU of rows and keys, the round trip to the tablets of
// the node (in process), the block cache of storage's default.
var base = Costs{
	TableRows: 1000, RowBytes: 64, EqRows: 10, RangeFraction: 1.0 / 3,
	SeqRow: 1, LookupRow: 7, HashRow: 0.3, SortRow: 0.5, RoundTrip: units(100 * time.Microsecond),
	CacheBytes: 64 << 20, UnitTime: unitTime,
}

// DefaultCosts is a local SSD (storage/simfs.SSD): 0.1 ms a read wherever
// it is, read ahead 256 KiB at a time in order.
var DefaultCosts = func() Costs {
	c := base
	c.Name, c.LookupBatch = "ssd", 1000
	c.BlockBytes, c.BlockRead, c.ReadAhead = 4096, units(100*time.Microsecond), 256<<10
	return c
}()

// HDDCosts is a spinning disk (storage/simfs.HDD, read-planning.txt):
// 0.2 ms a read, 10 ms more to seek, 150 MiB/s, read ahead 2 MiB at a
// time in order.
var HDDCosts = func() Costs {
	c := base
	c.Name, c.LookupBatch = "hdd", 10000
	c.BlockBytes, c.BlockRead, c.ReadAhead = 4096, units(200*time.Microsecond), 2<<20
	c.Seek = units(10 * time.Millisecond)
	c.BlockTransfer = units(time.Second) * 4096 / (150 << 20)
	return c
}()

// ObjectStoreCosts is a cloud object store (storage/simfs.ObjectStore):
// read in 1 MiB chunks, each a request of 20 ms plus its transfer at
// 100 MiB/s, in order or not; read ahead 8 MiB at a time in order
// (storage.ReadAheadFor), a request per chunk of it.
var ObjectStoreCosts = func() Costs {
	c := base
	c.Name, c.LookupBatch = "object-store", 10000
	c.BlockBytes, c.BlockRead, c.ReadAhead = 1<<20, units(30*time.Millisecond), 8<<20
	c.ChunkedReads = true
	return c
}()

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

// tableSize is what the cost model knows of a table's size: its rows and
// the bytes of its primary index (statistics', or the heuristics'), as
// keys and values (bytes: what the block cache holds and a 4 KiB block
// is cut from) and on disk, compressed (disk: what a read transfers and
// an object store's chunks hold; bytes when statistics do not say).
type tableSize struct {
	rows, bytes, disk float64
}

// diskBytes is t's size on disk.
func (t tableSize) diskBytes() float64 {
	if t.disk > 0 {
		return t.disk
	}
	return t.bytes
}

// scanCost prices reading rows of t in order: the rows, one round trip
// per page (the reader sends many spans in one request), and the storage
// reads of their bytes on disk.
func (c Costs) scanCost(rows float64, t tableSize) float64 {
	pages := max(1, math.Ceil(rows/scanPage))
	return rows*c.SeqRow + pages*c.RoundTrip + c.tableIO(rows*t.diskBytes()/math.Max(t.rows, 1))
}

// tableIO prices reading bytes of storage in order: one read per
// read-ahead window, and the blocks passed; on an object store, a
// request per chunk the windows span.
func (c Costs) tableIO(bytes float64) float64 {
	reads := max(1, math.Ceil(bytes/c.ReadAhead))
	blocks := max(1, math.Ceil(bytes/c.BlockBytes))
	if c.ChunkedReads {
		return blocks * c.BlockRead
	}
	return reads*c.BlockRead + blocks*c.BlockTransfer
}

// blocksTouched is how many of n blocks k keys spread at random over them
// fall in (Cardenas' formula): k when k is much smaller than n, all n when
// k is much larger.
func blocksTouched(k, n float64) float64 {
	if k <= 0 || n <= 0 {
		return 0
	}
	if n <= 1 {
		return 1
	}
	return n * -math.Expm1(k*math.Log1p(-1/n))
}

// batchIO prices the storage reads of one batch of k sorted keys into a
// table of n blocks (bytes of keys and values in all, disk on disk: the
// transfers are of those). The batch reads the blocks its keys
// fall in (blocksTouched), front to back. Once a batch touches most of
// the blocks it passes, read-ahead (storage/readahead.go: a window
// after reads that continue each other, the next read in the background)
// serves its touched blocks as a scan would; a sparser batch gets next to
// nothing from it. Measured (the disk's counters; d the share of blocks
// a batch touches): on ssd, 1,000 keys a batch read 0.72 blocks per
// block touched at d = 0.06 (a 16 MiB cache holding some) and 1.19 at
// d = 0.28 (a 1 MiB cache re-reading index blocks); on hdd one batch of
// 5,000 keys read 1.14 at d = 0.32, while batches of 10,000 at d = 0.46
// read 0.13. So the share read ahead is a logistic step in d
// (aheadShare), not the w·d/(1+w·d) of a window opened by any two
// neighbouring keys that an earlier model assumed (it said 0.5 at
// d = 0.06). Every other touched block is a read of its own, with a seek
// on a disk whose head moves, at most what passing over the untouched
// blocks in between costs (BlockTransfer a block): a batch spans at most
// the table's blocks, and one that touches all of them costs about
// reading the table (its few reads not read ahead on top).
func (c Costs) batchIO(k, n, bytes, disk float64) float64 {
	touched := blocksTouched(k, n)
	ahead := aheadShare(touched / n)
	reads := touched * (1 - ahead)
	inOrder := c.tableIO(disk) / n // a block's share of reading the table
	gaps := n - touched            // the blocks passed between touched ones
	passed := gaps * c.BlockTransfer * disk / bytes
	return reads*c.BlockRead + min(reads*c.Seek, passed) + touched*ahead*inOrder
}

// aheadShare is the share of a sorted batch's touched blocks read ahead
// when it touches a share d of the blocks it passes: none below about
// d = 0.35, nearly all above 0.45 (batchIO's measurements).
func aheadShare(d float64) float64 { return 1 / (1 + math.Exp(-(d-0.4)/0.03)) }

// lookupCost prices looking up keys keys in t in batches of LookupBatch
// sorted keys (sql/exec sorts each batch before reading it): each key's
// CPU, each batch's round trip, and the blocks the batches read (batchIO):
// once in all when t fits in the block cache, else once per batch. A
// lookup of a few keys costs a few reads however large t is; many keys
// cost at most a read of t per batch. The rows found are the caller's to
// price (SeqRow each).
func (c Costs) lookupCost(keys float64, t tableSize) float64 {
	if keys <= 0 {
		return c.RoundTrip
	}
	batches := max(1, math.Ceil(keys/c.LookupBatch))
	perBatch := keys / batches
	// A disk's blocks are 4 KiB of keys and values, compressed on their
	// own; an object store's chunks are 1 MiB of the file.
	disk := t.diskBytes()
	n := max(1, math.Ceil(t.bytes/c.BlockBytes))
	if c.ChunkedReads {
		n = max(1, math.Ceil(disk/c.BlockBytes))
	}
	var io float64
	if t.bytes <= c.CacheBytes {
		// What a block costs in one batch, for every block the batches
		// touch together (a block read by an earlier batch is cached).
		one := blocksTouched(perBatch, n)
		all := blocksTouched(keys, n)
		io = c.batchIO(perBatch, n, t.bytes, disk) / one * all
	} else {
		io = batches * c.batchIO(perBatch, n, t.bytes, disk)
	}
	return keys*c.LookupRow + batches*c.RoundTrip + io
}

// hashBuildCost prices putting rows in a hash join's table.
func (c Costs) hashBuildCost(rows float64) float64 { return rows * c.HashRow }
