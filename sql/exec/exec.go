package exec

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// CatalogWriterMaker makes Context.CatalogWriter's catalog writer.
type CatalogWriterMaker interface {
	CatalogWriter() *catalog.Writer
}

// Context is what running a plan needs of the session.
type Context struct {
	Txn *kv.Txn
	// Eval is the evaluation context: the session as builtins see it and
	// the statement's parameter values.
	Eval *sem.EvalContext
	// Catalog reads descriptors in Txn (foreign-key targets).
	Catalog *catalog.Reader
	// Virtual is what virtual tables read.
	Virtual *plan.VirtualEnv
	// PackedRows and PackedSizeLimit are the storage.packed_rows settings.
	PackedRows      bool
	PackedSizeLimit int
	// Stats, when non-nil, collects EXPLAIN ANALYZE figures per node.
	Stats *Stats
	// CatalogWriter, when non-nil, returns a writer of descriptors in
	// Txn that the node's catalog cache knows about, and tells the
	// session its transaction wrote the catalog: COPY's bulk path into a
	// table that existed before the transaction writes its descriptor
	// (bulk.go), which is DDL as far as the catalog is concerned. Without
	// it that path is not taken. (An interface, not a func: the session's
	// closure over its transaction was one allocation per statement, for
	// the few COPYs that use it.)
	CatalogWriter CatalogWriterMaker
	// Memory is the node's SQL memory budget (--max-sql-memory) and
	// WorkMem the bytes each operator that holds rows may use before it
	// spills (work_mem; 0: no limit). With neither, nothing is
	// accounted. See spill.go.
	Memory  *mon.Budget
	WorkMem int64
	// TempStorage is where operators spill past WorkMem; nil: they hold
	// everything in memory, bounded only by Memory.
	TempStorage *rowcontainer.TempStorage
	// LookupBatch is how many input rows an index or lookup join looks
	// up per kv.Batch (the session's storage profile sizes it: larger on
	// HDD and object storage, where a batch's sorted keys share seeks and
	// requests); 0: lookupBatch.
	LookupBatch int
	// LookupInputOrder sends a batch's lookups in input order, unsorted
	// and with repeated keys read again, as Cairn did before reads in
	// storage order (lookup.go): the baseline of bench/readplan, and a
	// test's proof that sorting is what orders the keys. Never in
	// production.
	LookupInputOrder bool
	// ReadInOrder says the node's disk pays a seek for a read away from
	// the last one (the storage profile's Seek: hdd). A count whose page
	// read blocks from the disk then reads the rest of its span front to
	// back, one page after another, instead of cutting it into pieces
	// counted concurrently (count.go), which read several places of the
	// table at once: bench/readplan's count on a disk playing an HDD took
	// 29 seeks and 29.8 MiB with the pieces, 7 and 16.8 MiB front to back
	// (bench/README.md, issue 19). Pages the block cache holds are cut
	// into pieces all the same: they read no disk.
	ReadInOrder bool
	// Point, when not nil, keeps the shape of a point read between the
	// Starts of plans instantiated from one cached plan (point.go).
	Point *PointCache
	// Implicit, when Txn is nil, reads the statement's one batch without
	// a transaction (an implicit point SELECT, point.go): Start then runs
	// only a plan the point operator takes, reads its row before it
	// returns, and returns ErrImplicitRetry for anything it cannot read
	// in that one batch.
	Implicit ImplicitReader
}

// ImplicitReader reads one batch of plain reads with no transaction, at
// a timestamp of its choosing (kv.DB.RunImplicitRead), and checks that
// the plan is still the one to run at that timestamp (the session: the
// catalog generation the plan was made under). It returns
// ErrImplicitRetry when the statement must run again in a transaction.
type ImplicitReader interface {
	ReadImplicit(ctx context.Context, b *kv.Batch) error
}

// ErrImplicitRetry says that a statement started without a transaction
// (Context.Implicit) was not run, and nothing of it was returned: the
// caller runs it again with one.
var ErrImplicitRetry = errors.New("exec: the implicit read must run in a transaction")

// Rows is a running plan. Next returns the next row (owned by the caller
// until the next call) or nil at the end. Close releases the plan; it may
// be called before the end (a portal closed early).
type Rows interface {
	Next(ctx context.Context) ([]types.Datum, error)
	Close()
	// RowsAffected is the count for the command tag (rows inserted,
	// updated, deleted or returned so far).
	RowsAffected() int64
}
