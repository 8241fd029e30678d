package exec

import (
	"context"
	"hash/maphash"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// Memory accounting and spilling (docs/architecture.md, "Memory
// accounting and spilling").
//
// Every operator that holds rows opens its own mon.Account (account()),
// bounded by work_mem, as PostgreSQL applies work_mem per operator. Past
// it the operator spills into the statement's rowcontainer.Scope:
//
//   - Sort: rowcontainer.Sorter (sorted runs, k-way merge); ORDER BY ...
//     LIMIT k: rowcontainer.TopK (a heap of k rows, else a Sorter).
//   - Hash aggregation (agg.go), DISTINCT and UNION (dedup below),
//     INTERSECT/EXCEPT (setop.go) and hash joins (join.go): once the hash
//     table is full, rows whose key is not in it go to hash partitions on
//     disk, each processed afterwards the same way (recursively, with a
//     new hash seed per level, up to maxSpillLevel).
//   - Nested-loop joins (join.go): the inner side goes to a Buffer and
//     is joined with blocks of outer rows.
//   - [NOT] IN (subquery) in a WHERE (inset.go): the value set's keys go
//     to a Sorter and are merged with the sorted input rows; elsewhere
//     (subset.go), the sorted keys go to a Buffer that rows look x up in.
//   - Windows (window.go): rows are sorted per function with a Sorter;
//     one partition at a time is in memory, or, past work_mem, read from
//     a Buffer front to back for functions that stream (window_spill.go).
//
// State that cannot be split (a window partition of a function that
// does not stream, one group's buffered aggregate inputs, a large
// value) is reserved with Account.Force: past work_mem, bounded by the
// node budget, whose refusal is 53200.

// account opens an operator's account in the statement.
func (r *runner) account() *mon.Account { return r.memStmt().NewAccount() }

// memStmt is the statement's memory accounting, made on first use: nil,
// accounting nothing, without a budget or work_mem.
func (r *runner) memStmt() *mon.Statement {
	if r.mem == nil && (r.x.Memory != nil || r.x.WorkMem > 0) {
		r.mem = r.x.Memory.NewStatement(r.x.WorkMem)
	}
	return r.mem
}

// tempScope is the statement's temporary files' scope, made on first use.
func (r *runner) tempScope() *rowcontainer.Scope {
	if r.scope == nil {
		r.scope = r.x.TempStorage.NewScope()
	}
	return r.scope
}

// heldAccount is the account of rows the statement holds outside any
// operator (subquery results, materialized CTEs, recursive CTEs' sets):
// they cannot spill and are reserved with Force.
func (r *runner) heldAccount() *mon.Account {
	if r.held == nil {
		r.held = r.account()
	}
	return r.held
}

// release gives back the statement's memory and removes its temporary
// files (exec's side of rowcontainer invariant 4 and mon invariant 4).
func (r *runner) release() {
	r.closeSets()
	r.mem.Close()
	if r.scope != nil {
		_ = r.scope.Close()
	}
	if r.largePeak >= freeOSThreshold {
		// A statement that held a value of hundreds of megabytes would
		// leave the process that much larger until the runtime's
		// scavenger got round to it (minutes on an idle node): give it
		// back soon, once the session has written the value out and
		// dropped its copies too.
		r.largePeak = 0
		freeOSMemorySoon()
	}
}

// freeOSMemorySoon returns the heap's free memory to the OS after each
// of freeOSDelays; calls while one is pending share it.
func freeOSMemorySoon() {
	freeOS.Lock()
	defer freeOS.Unlock()
	if freeOS.pending {
		return
	}
	freeOS.pending = true
	go func() {
		for _, d := range freeOSDelays {
			time.Sleep(d)
			debug.FreeOSMemory()
		}
		freeOS.Lock()
		freeOS.pending = false
		freeOS.Unlock()
	}()
}

var freeOS struct {
	sync.Mutex
	pending bool
}

// freeOSDelays are when, after a statement with a large value ends, its
// memory is returned: once the session has written the value out, and
// again once the connection's buffers holding a copy are likely gone
// too (the wire layer sizes its buffer to the largest row it sent).
var freeOSDelays = []time.Duration{time.Second, 10 * time.Second}

// Large values. maxValueSize is PostgreSQL's limit on one value (1 GB,
// MaxAllocSize); largeValue is the size from which a value the statement
// returns is reserved while it is being returned.
const (
	maxValueSize    = 1<<30 - 1
	largeValue      = 1 << 20
	freeOSThreshold = 64 << 20
)

// accountLarge reserves the large values of a row the statement returns,
// replacing the previous row's reservation: the client holds one row at
// a time.
// A value above 1 GB is 54000, as in PostgreSQL.
func (r *runner) accountLarge(row []types.Datum) error {
	var n int64
	for _, d := range row {
		if s := largeSize(d); s >= largeValue {
			if s > maxValueSize {
				return pgerror.New(pgerrcode.ProgramLimitExceeded, "invalid memory alloc request size %d", s)
			}
			n += s
		}
	}
	if r.large == nil {
		if n == 0 {
			return nil
		}
		r.large = r.account()
	}
	r.large.Clear()
	if err := r.large.Force(n); err != nil {
		return err
	}
	r.largePeak = max(r.largePeak, n)
	return nil
}

// largeSize is a value's size where that is cheap to know (strings,
// bytes, json text, arrays); other values count as small.
func largeSize(d types.Datum) int64 {
	switch v := d.(type) {
	case types.DString:
		return int64(len(v))
	case types.DBytes:
		return int64(len(v))
	case types.DJSONText:
		return int64(len(v))
	case *types.DArray:
		return rowcontainer.DatumSize(v)
	}
	return 0
}

// maxSpillLevel bounds recursive repartitioning: a partition still too
// large after this many levels has keys that are almost surely equal (no
// further split can help). Hash aggregation, DISTINCT and set operations
// then hold it in memory (Force: one group, one key); a hash join joins
// it as a block nested loop over its files (join.go).
const maxSpillLevel = 6

// spillFanout is the number of hash partitions a spilling operator makes
// per level; hash aggregation sizes its own (hashAggFanout).
const spillFanout = 16

// partitioner hashes encoded keys into partitions, with a seed per level
// so a partition re-split at the next level spreads out.
type partitioner struct {
	seeds [maxSpillLevel + 1]maphash.Seed
}

func newPartitioner() *partitioner {
	p := &partitioner{}
	for i := range p.seeds {
		p.seeds[i] = maphash.MakeSeed()
	}
	return p
}

func (p *partitioner) of(level int, key []byte) int {
	return p.ofN(level, key, spillFanout)
}

// ofN is of for a level split n ways.
func (p *partitioner) ofN(level int, key []byte, n int) int {
	return int(maphash.Bytes(p.seeds[level], key) % uint64(n))
}

// partitions is one level's spill files, made on their first row.
type partitions struct {
	r     *runner
	files []*rowcontainer.File
	level int
	wbuf  int // each file's write buffer
}

// partitionBuffers bounds the write buffers of one split's files
// together: a 16-way split gives each its 16 KiB, a 256-way one 4 KiB.
const (
	partitionBuffers = 1 << 20
	minPartitionBuf  = 4 << 10
	maxPartitionBuf  = 16 << 10
)

func (r *runner) newPartitions(level int) (*partitions, error) {
	return r.newPartitionsN(level, spillFanout)
}

// newPartitionsBuf is newPartitionsN with each file's write buffer wbuf
// bytes (a hash join sizes them to its budget).
func (r *runner) newPartitionsBuf(level, n, wbuf int) *partitions {
	return &partitions{r: r, level: level, files: make([]*rowcontainer.File, n), wbuf: wbuf}
}

// newPartitionsN is newPartitions split n ways (hash aggregation sizes
// its splits: hashAggFanout).
func (r *runner) newPartitionsN(level, n int) (*partitions, error) {
	wbuf := min(max(partitionBuffers/n, minPartitionBuf), maxPartitionBuf)
	return &partitions{r: r, level: level, files: make([]*rowcontainer.File, n), wbuf: wbuf}, nil
}

// add appends row to partition i.
func (ps *partitions) add(i int, row []types.Datum) error {
	if ps.files[i] == nil {
		f, err := ps.r.tempScope().NewFileBuffered(ps.wbuf)
		if err != nil {
			return err
		}
		ps.files[i] = f
	}
	return ps.files[i].Append(row)
}

func (ps *partitions) close() {
	for i, f := range ps.files {
		if f != nil {
			f.Close()
			ps.files[i] = nil
		}
	}
}

// canSpill reports whether an operator holding held rows (or keys) may
// spill at level: temporary storage exists, the recursion has room, and
// it holds at least minSpillRows (under a tinier budget each partition
// would cost a file per row; the few rows are reserved past work_mem).
func (r *runner) canSpill(level, held int) bool {
	return r.tempScope().Spillable() && level < maxSpillLevel && held >= minSpillRows
}

// minSpillRows is the fewest rows or keys a hash table holds before it
// spills, as rowcontainer.MinRunRows is for sorted runs.
const minSpillRows = rowcontainer.MinRunRows

// fileSource reads a spill file as an operator.
type fileSource struct {
	r *rowcontainer.Reader
	n int
}

func (s *fileSource) Next(ctx context.Context) ([]types.Datum, error) {
	s.n++
	if s.n%checkEvery == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return s.r.Next()
}

func (s *fileSource) Close() {}

func openSource(f *rowcontainer.File) (*fileSource, error) {
	rd, err := f.Reader(32 << 10)
	if err != nil {
		return nil, err
	}
	return &fileSource{r: rd}, nil
}

// iterOp adapts a rowcontainer.Iterator to an op.
type iterOp struct{ it rowcontainer.Iterator }

func (o *iterOp) Next(ctx context.Context) ([]types.Datum, error) { return o.it.Next(ctx) }
func (o *iterOp) Close()                                          { o.it.Close() }
