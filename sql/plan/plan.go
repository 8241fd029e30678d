package plan

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// This file is the contract between the binder (this package), the
// optimizer (sql/opt) and the executor (sql/exec). Changes are additive:
// a field may be added with a zero value meaning "as before"; nothing is
// renamed or removed without changing every user in the same commit.
//
// Column identity: every column a node produces has a query-wide
// sem.ColumnID, allocated by the binder and never reused within one Plan
// (including its subqueries). Expressions (sem.Expr) reference columns by
// ID only, so a rewrite that moves a filter or reorders a join never
// renames anything. A node's Columns() order is the physical order of the
// rows the executor produces for it.
//
// Outer references: an expression inside a correlated subquery, or inside
// the right side of a LATERAL join, may reference a column of an enclosing
// scope by its ID. The executor binds those IDs to the current outer row's
// values (Subquery.Outer and Join.Lateral say which are needed).

// Node is one relational operator of a logical plan.
type Node interface {
	// Columns are the node's output columns in row order.
	Columns() []Column
	planNode()
}

// Column is one output column of a node.
type Column struct {
	ID   sem.ColumnID
	Name string
	T    *types.T
	// Hidden columns (rowid, a shard column, ORDER BY-only columns) are
	// not expanded by * and not returned to the client.
	Hidden bool
	// Table and TableCol say which table column this column passes
	// through unchanged (RowDescription's table OID and attribute
	// number); zero when it is computed.
	Table    catalog.ID
	TableCol rowenc.ColumnID
}

// Ordering is one key of a sort order over a node's columns.
type Ordering struct {
	Col        sem.ColumnID
	Desc       bool
	NullsFirst bool
}

// SortExpr is one key of an ORDER BY inside an aggregate or a window
// definition: an expression over the input row.
type SortExpr struct {
	Expr       sem.Expr
	Desc       bool
	NullsFirst bool
}

// LockStrength is a row-locking clause (SELECT ... FOR UPDATE).
type LockStrength uint8

const (
	LockNone LockStrength = iota
	LockForKeyShare
	LockForShare
	LockForNoKeyUpdate
	LockForUpdate
)

// LockWaitPolicy is what a locking read does with a row another
// transaction has locked. Of several clauses naming a table the
// greatest applies (NOWAIT over SKIP LOCKED over waiting), as in
// PostgreSQL.
type LockWaitPolicy uint8

const (
	// LockWaitBlock waits for the other transaction to finish.
	LockWaitBlock LockWaitPolicy = iota
	// LockWaitSkip leaves the row out (SKIP LOCKED).
	LockWaitSkip
	// LockWaitError fails with 55P03 (NOWAIT).
	LockWaitError
)

// Span constrains a scan to part of an index, in the index's own key
// order (the hash bucket, if the index has one, is not part of it: the
// executor scans every bucket unless the bucket is fixed by Bucket).
// Start and End are prefixes of the index's key columns: a row is in the
// span when its key prefix of len(Start) is after Start (at or after it
// unless StartExclusive) and its key prefix of len(End) is before End (at
// or before it when EndInclusive). A nil Start or End is unbounded. A
// point lookup of key k is Start = End = k, EndInclusive.
type Span struct {
	Start, End     []types.Datum
	StartExclusive bool
	EndInclusive   bool
}

// Scan reads a table through one of its indexes.
type Scan struct {
	Table *catalog.Table
	// Index is the index read: nil or Table's primary index reads rows.
	// A secondary index yields its key, stored and primary-key columns
	// only; the optimizer adds an IndexJoin for the rest.
	Index *catalog.Index
	// Cols are the output columns; TableCols[i] is the table column Cols[i]
	// reads.
	Cols      []Column
	TableCols []rowenc.ColumnID
	// Spans restricts the scan (nil: the whole index). Sorted and
	// non-overlapping in index order.
	Spans []Span
	// Buckets restricts a bucketed index to these buckets (nil: all).
	Buckets []uint16
	// Filter is evaluated on each row by the reader (pushed down).
	Filter sem.Expr
	// Ordered asks for rows in index order (merging the streams of the
	// buckets of a bucketed index); Reverse for the reverse order.
	Ordered, Reverse bool
	// ShardMerge (with Ordered, on a hash-sharded index whose every span
	// fixes the shard column) asks for rows in the order of the key
	// columns after the shard: each bucket's spans are read as a stream
	// of their own and the streams merged, so ORDER BY the user's
	// columns needs no sort and a limit reads at most that many rows per
	// bucket.
	ShardMerge bool
	// HardLimit, when > 0, lets the reader stop after this many rows that
	// pass Filter.
	HardLimit int64
	Lock      LockStrength
	// LockWait applies when Lock is set.
	LockWait LockWaitPolicy
	// Inverted, on a GIN index, reads the entries of tokens instead of
	// Spans (see InvertedScan); the scan yields the primary-key columns
	// of the rows that may match, each once, in no particular order.
	Inverted *InvertedScan
}

// InvertedScan is what a scan of a GIN index looks up: the rows holding,
// for every group, at least one of the group's tokens (an AND of ORs;
// rowenc/gin.go makes the tokens). The rows are a superset of those
// satisfying Cond, which stays in the filter above (the recheck).
type InvertedScan struct {
	Groups [][][]byte
	// Cond is the predicate the tokens come from (EXPLAIN's Index Cond).
	Cond sem.Expr
}

// IndexJoin looks up the primary-index rows of the rows Input (a Scan of
// a secondary index, possibly filtered) produced, in batches of many keys
// per request and requests to several tablets in parallel.
type IndexJoin struct {
	Input Node
	Table *catalog.Table
	// KeyCols are Input's columns holding the primary key, in key order.
	KeyCols []sem.ColumnID
	// Cols are the output columns (read from the primary index);
	// TableCols[i] is the table column Cols[i] reads.
	Cols      []Column
	TableCols []rowenc.ColumnID
	Filter    sem.Expr
	Lock      LockStrength
	LockWait  LockWaitPolicy
}

// JoinKind is the kind of a join.
type JoinKind uint8

const (
	InnerJoin JoinKind = iota
	LeftJoin
	RightJoin
	FullJoin
	// SemiJoin and AntiJoin output the left side only (EXISTS, IN, NOT
	// EXISTS and NOT IN decorrelated).
	SemiJoin
	AntiJoin
)

// Join joins two inputs. Its columns are Left's then Right's (Left's only
// for semi and anti joins).
type Join struct {
	Kind        JoinKind
	Left, Right Node
	// On is the join condition over both sides' columns (nil: true).
	On sem.Expr
	// LeftEq[i] = RightEq[i] are the equality conjuncts of On usable as
	// hash or merge keys (they stay in On as well).
	LeftEq, RightEq []sem.ColumnID
	// Lateral: Right references Left's columns and is re-run per left row.
	Lateral bool
	// Explicit: written with JOIN syntax (join_collapse_limit bounds how
	// far the optimizer flattens it into one join search); false for the
	// joins the binder makes of a FROM list's commas.
	Explicit bool
	// Merge: a merge join (sql/exec's mergeJoinOp) rather than a hash
	// join. sql/opt sets it only on an inner, left, semi or anti join
	// both of whose sides yield rows sorted ascending by LeftEq and
	// RightEq (scans that read an index in that order).
	Merge bool
	// LeftRows, RightRows and Rows are the optimizer's row estimates of
	// the inputs and of the join's output (0: not estimated). The cost
	// model of distributed joins (sql/exec, distsql_join.go) reads them.
	LeftRows, RightRows, Rows float64
}

// LookupJoin joins Input with a table by looking up, for each batch of
// input rows, the index entries whose leading key columns equal the
// input's KeyCols (many keys per request, requests in parallel).
type LookupJoin struct {
	Kind  JoinKind // InnerJoin, LeftJoin, SemiJoin or AntiJoin
	Input Node
	Table *catalog.Table
	Index *catalog.Index // nil: primary
	// KeyCols[i] supplies the i-th key column of Index.
	KeyCols []sem.ColumnID
	// Cols are the looked-up side's output columns; TableCols[i] is the
	// table column Cols[i] reads. The join's columns are Input's then Cols
	// (Input's only for semi and anti joins).
	Cols      []Column
	TableCols []rowenc.ColumnID
	// On is the residual condition over both sides.
	On sem.Expr
	// Lock applies to the looked-up rows.
	Lock     LockStrength
	LockWait LockWaitPolicy
}

// VirtualScan reads a virtual table (pg_catalog, information_schema,
// cairn_catalog): its rows are generated at execution time.
type VirtualScan struct {
	Table VirtualTable
	Cols  []Column
	// ColIdx[i] is the virtual table column Cols[i] reads.
	ColIdx []int
	Filter sem.Expr
}

// Values is a literal table (VALUES, or the single empty row of a SELECT
// without FROM when Rows holds one empty row).
type Values struct {
	Cols []Column
	Rows [][]sem.Expr
}

// Filter keeps the rows for which Pred is true.
type Filter struct {
	Input Node
	Pred  sem.Expr
}

// Project computes Exprs over each input row; Cols[i] is Exprs[i]'s output.
// A pass-through column is a *sem.ColRef keeping its ID.
type Project struct {
	Input Node
	Exprs []sem.Expr
	Cols  []Column
}

// Aggregate is one aggregate call of a GroupBy.
type Aggregate struct {
	Fn       *builtins.Resolved
	Name     string
	Args     []sem.Expr // over the input row; empty for count(*)
	Star     bool
	Distinct bool
	Filter   sem.Expr // FILTER (WHERE ...), nil when absent
	OrderBy  []SortExpr
}

// GroupBy groups Input by GroupCols and computes Aggs per group. Its
// columns are the group columns (same IDs) followed by one column per
// aggregate. With no GroupCols it yields exactly one row, even for an
// empty input (SELECT count(*) FROM empty).
type GroupBy struct {
	Input     Node
	GroupCols []sem.ColumnID
	Aggs      []Aggregate
	Cols      []Column
	// Ordered: Input arrives sorted by GroupCols (streaming aggregation).
	Ordered bool
}

// WindowFunc is one window function call of a Window node.
type WindowFunc struct {
	Fn          *builtins.Resolved
	Name        string
	Args        []sem.Expr
	Filter      sem.Expr
	PartitionBy []sem.Expr
	OrderBy     []SortExpr
	Frame       builtins.Frame
	// FrameOffsets hold the ROWS/RANGE n PRECEDING/FOLLOWING values when
	// they are expressions (nil: none or constant in Frame).
	FrameStartOffset, FrameEndOffset sem.Expr
}

// Window computes window functions. Its columns are Input's followed by
// one per function.
type Window struct {
	Input Node
	Funcs []WindowFunc
	Cols  []Column
}

// Sort orders its input. With Limit set (the optimizer copies it from a
// Limit right above, sql/opt), only the first Limit+Offset rows are ever
// read, so the sort keeps just those (a top-k sort: a bounded heap).
// Limit and Offset are that Limit's int8 expressions (Offset may be nil);
// a NULL Limit means no bound.
type Sort struct {
	Input         Node
	Order         []Ordering
	Limit, Offset sem.Expr
}

// Limit skips Offset rows then passes at most Limit (nil: no limit). Both
// are int8 expressions without column references (constants or $n).
type Limit struct {
	Input         Node
	Limit, Offset sem.Expr
	// WithTies (FETCH FIRST n ROWS WITH TIES) needs Order.
	WithTies bool
	Order    []Ordering
}

// Distinct removes duplicate rows; with On, it keeps the first row of
// each group of equal On values, in input order (DISTINCT ON).
type Distinct struct {
	Input Node
	On    []sem.ColumnID
}

// SetOpKind is UNION, INTERSECT or EXCEPT.
type SetOpKind uint8

const (
	Union SetOpKind = iota
	Intersect
	Except
)

// SetOp combines two inputs of equal width column by column (the binder
// has already cast both sides to the result types).
type SetOp struct {
	Kind        SetOpKind
	All         bool
	Left, Right Node
	Cols        []Column
}

// RecursiveCTE evaluates WITH RECURSIVE: Init once, then Recursive
// repeatedly over the rows the previous iteration produced (read by
// WorkTable nodes with the same ID) until an iteration yields none.
type RecursiveCTE struct {
	ID              int
	Init, Recursive Node
	UnionAll        bool
	Cols            []Column
}

// WorkTable reads the current iteration's rows of RecursiveCTE ID.
type WorkTable struct {
	ID   int
	Cols []Column
	// Name is the CTE's name, for EXPLAIN ("" when unknown).
	Name string
}

// CTEScan reads a materialized CTE (one used more than once, or marked
// MATERIALIZED): the executor runs Plans[ID] once per statement.
type CTEScan struct {
	ID   int
	Cols []Column
	// Name is the CTE's name, for EXPLAIN ("" when unknown).
	Name string
}

// SetFunc is one set-returning function call of a ProjectSet.
type SetFunc struct {
	Call *sem.FuncCall // Fn.Overload.Class is builtins.Generator
	Cols []Column      // one per column the function returns
}

// ProjectSet evaluates set-returning functions per input row and zips
// their outputs as PostgreSQL does (the shorter ones padded with NULLs).
// Its columns are Input's followed by every function's columns.
// FROM generate_series(...) is a ProjectSet over a one-row Values.
type ProjectSet struct {
	Input Node
	Funcs []SetFunc
	Cols  []Column
}

// Max1Row fails with 21000 when Input yields more than one row.
type Max1Row struct{ Input Node }

// Returning is the RETURNING clause of a DML statement: Exprs over the
// table's columns as the statement's Cols give them.
type Returning struct {
	Exprs []sem.Expr
	Cols  []Column
}

// Insert inserts Input's rows. Input's columns supply the table columns
// InsertCols, in order; the executor fills the others with their defaults
// (DefaultExprs, built by the binder over no columns) and computes
// generated columns, then checks NOT NULL, CHECK and foreign keys.
type Insert struct {
	Table      *catalog.Table
	Input      Node
	InsertCols []rowenc.ColumnID
	// TableCols are, per table column (Table.Columns order), the
	// ColumnIDs the inserted row's values are known by in Defaults,
	// Computed, Checks and Returning.
	TableCols []sem.ColumnID
	// Defaults[i] is table column i's default (nil: NULL) when it is not
	// in InsertCols; Computed[i] a generated column's expression.
	Defaults, Computed []sem.Expr
	// Checks are the CHECK constraints, over TableCols.
	Checks     []Check
	OnConflict *OnConflict
	Returning  *Returning
}

// Check is one CHECK constraint, compiled.
type Check struct {
	Name string
	Expr sem.Expr
	// View, when set, makes this the WITH CHECK OPTION condition of the
	// view named (a write through an updatable view): it is checked after
	// the table's own constraints and fails with 44000.
	View string
}

// OnConflict is INSERT ... ON CONFLICT.
type OnConflict struct {
	// Arbiter is the unique index (primary or secondary) whose conflict
	// is handled; nil with DoNothing means any unique index.
	Arbiter   *catalog.Index
	DoNothing bool
	// For DO UPDATE: ExistingCols are the ColumnIDs of the conflicting
	// row's columns (Table.Columns order), ExcludedCols those of the row
	// proposed for insertion (EXCLUDED), Set[i] assigns table column
	// SetCols[i] from an expression over both, Where filters.
	ExistingCols, ExcludedCols []sem.ColumnID
	SetCols                    []rowenc.ColumnID
	Set                        []sem.Expr
	Where                      sem.Expr
}

// Update updates the rows Input produced. Input's columns include every
// table column (FetchCols, Table.Columns order, the old row) followed by
// the new values of SetCols (SetExprs already evaluated by a Project into
// NewCols).
type Update struct {
	Table     *catalog.Table
	Input     Node
	FetchCols []sem.ColumnID
	SetCols   []rowenc.ColumnID
	NewCols   []sem.ColumnID
	// TableCols are the ColumnIDs the new row's values are known by in
	// Computed, Checks and Returning (Table.Columns order).
	TableCols []sem.ColumnID
	Computed  []sem.Expr
	Checks    []Check
	Returning *Returning
}

// Delete deletes the rows Input produced; FetchCols hold every table
// column of each (Table.Columns order).
type Delete struct {
	Table     *catalog.Table
	Input     Node
	FetchCols []sem.ColumnID
	Returning *Returning
}

// Subquery is a subquery a sem.SubqueryRef (by ID) stands for.
type Subquery struct {
	ID   int
	Kind sem.SubqueryKind
	Root Node
	// Outer lists the enclosing scopes' columns the subquery references;
	// empty means uncorrelated (run at most once per statement).
	Outer []sem.ColumnID
}

// Plan is one bound statement.
type Plan struct {
	Root Node
	// Columns are what the client sees (RowDescription), nil for a
	// statement returning no rows. They are Root's columns without the
	// hidden ones, in order.
	Columns    []Column
	Subqueries []*Subquery
	// CTEs are the materialized CTEs CTEScan nodes read, by ID.
	CTEs []Node
	// Params are the types of $1..$n.
	Params []*types.T
	// Tag is the command tag's verb: SELECT, INSERT, UPDATE, DELETE, ...
	Tag string
	// ReadOnly: the statement writes nothing (it may run in a read-only
	// transaction and needs no write intents).
	ReadOnly bool
}

// VirtualColumn is one column of a virtual table.
type VirtualColumn struct {
	Name string
	T    *types.T
}

// VirtualTable is a table whose rows are generated (the system catalogs).
type VirtualTable interface {
	Schema() string
	Name() string
	// OID is the relation's pg_class OID, stable across versions.
	OID() uint32
	Columns() []VirtualColumn
	// Rows generates the rows as of the transaction of env.
	Rows(ctx context.Context, env *VirtualEnv) ([][]types.Datum, error)
}

// VirtualEnv is what virtual tables read.
type VirtualEnv struct {
	Txn      *kv.Txn
	Catalog  *catalog.Reader
	Database *catalog.Database
	User     string
	// Settings lists the session's settings (name, value, description)
	// for pg_settings; nil when not available.
	Settings func() [][3]string
	// Session is the session's identity (pg_stat_activity's pid, the
	// search path); the zero value when not known.
	Session builtins.SessionInfo
	// Tablets lists the cluster's tablets for cairn_catalog.tablets; nil
	// when the session runs without a node behind it.
	Tablets TabletDirectory
	// Activity lists the node's sessions for pg_stat_activity; nil shows
	// the running session alone.
	Activity func() []SessionActivity
	// Cursors lists the session's open SQL cursors for pg_cursors; nil
	// shows none.
	Cursors func() []SessionCursor
	// Statements lists the node's statement statistics for
	// pg_stat_statements; nil shows none.
	Statements func() []StatementStats
}

// StatementStats is one entry of pg_stat_statements: the statements of
// one fingerprint run by one user in one database on this node.
type StatementStats struct {
	User       string
	DatabaseID uint32
	QueryID    int64
	Query      string
	Calls      int64
	// Times are milliseconds, as pg_stat_statements reports them.
	TotalMs, MinMs, MaxMs, MeanMs, StddevMs float64
	Rows                                    int64
}

// SessionCursor is one open cursor as pg_cursors shows it.
type SessionCursor struct {
	Name, Statement              string
	Holdable, Binary, Scrollable bool
	Created                      time.Time
}

// SessionActivity is one session as pg_stat_activity shows it. Zero times
// are NULL; an empty WaitEventType means not waiting.
type SessionActivity struct {
	PID                                              int32
	DatabaseID                                       uint32
	Database, User, ApplicationName                  string
	ClientAddr                                       string
	ClientPort                                       int32
	BackendStart, XactStart, QueryStart, StateChange time.Time
	WaitEventType, WaitEvent                         string
	State, Query                                     string
}

// TabletDirectory is what the SQL layer may know of where data lives: the
// tablets, their spans, replicas and sizes. The server implements it over
// its store; SQL never reaches tablets any other way.
type TabletDirectory interface {
	Tablets(ctx context.Context) ([]TabletState, error)
}

// TabletState is one tablet as TabletDirectory reports it.
type TabletState struct {
	ID               uint64
	StartKey, EndKey []byte
	// Replicas are the node IDs holding a replica; Leader is the one
	// holding the lease (0 when none is known).
	Replicas []int32
	Leader   int32
	// SizeBytes is Pebble's estimate of the tablet's bytes on disk
	// (flushed data only, compressed).
	SizeBytes uint64
	// LiveBytes and TotalBytes count the tablet's keys and values as
	// stored, before compression: the newest version of each key, and
	// every version, tombstone and lock record (SpanSizes). They may be a
	// few seconds old (the directory caches them).
	LiveBytes, TotalBytes int64
}

// SpanSizes is what a TabletDirectory may also offer: the bytes a key span
// holds (the size functions, docs/sql.md "Sizes"). keep, when not nil,
// selects the keys counted (entries of one relation among others in the
// same span); it sees a key only for the length of the call. The answer is
// counted by a scan of this node's replicas, now.
type SpanSizes interface {
	SpanSizes(ctx context.Context, key, endKey []byte, keep func(key []byte) bool) (SpanSize, error)
}

// SpanSize is a key span's bytes as SpanSizes counts them: keys and values
// as stored, before compression. Live is the newest version of each key
// (tombstones excluded); Total adds older versions, tombstones and lock
// records, the garbage GC reclaims.
type SpanSize struct {
	LiveBytes, TotalBytes int64
}

// SpanDiskUsage is what a TabletDirectory may also offer: the bytes of
// this node's disk holding a key span (the store's estimate: flushed
// files only, every version, compressed). ANALYZE records it for the
// planner (stats.Table.DiskBytes).
type SpanDiskUsage interface {
	SpanDiskBytes(ctx context.Context, key, endKey []byte) (int64, error)
}

func (n *Scan) Columns() []Column         { return n.Cols }
func (n *IndexJoin) Columns() []Column    { return n.Cols }
func (n *LookupJoin) Columns() []Column   { return joinCols(n.Kind, n.Input.Columns(), n.Cols) }
func (n *VirtualScan) Columns() []Column  { return n.Cols }
func (n *Values) Columns() []Column       { return n.Cols }
func (n *Filter) Columns() []Column       { return n.Input.Columns() }
func (n *Project) Columns() []Column      { return n.Cols }
func (n *Join) Columns() []Column         { return joinCols(n.Kind, n.Left.Columns(), n.Right.Columns()) }
func (n *GroupBy) Columns() []Column      { return n.Cols }
func (n *Window) Columns() []Column       { return n.Cols }
func (n *Sort) Columns() []Column         { return n.Input.Columns() }
func (n *Limit) Columns() []Column        { return n.Input.Columns() }
func (n *Distinct) Columns() []Column     { return n.Input.Columns() }
func (n *SetOp) Columns() []Column        { return n.Cols }
func (n *RecursiveCTE) Columns() []Column { return n.Cols }
func (n *WorkTable) Columns() []Column    { return n.Cols }
func (n *CTEScan) Columns() []Column      { return n.Cols }
func (n *ProjectSet) Columns() []Column   { return n.Cols }
func (n *Max1Row) Columns() []Column      { return n.Input.Columns() }
func (n *Insert) Columns() []Column       { return returningCols(n.Returning) }
func (n *Update) Columns() []Column       { return returningCols(n.Returning) }
func (n *Delete) Columns() []Column       { return returningCols(n.Returning) }

func (*Scan) planNode()         {}
func (*IndexJoin) planNode()    {}
func (*LookupJoin) planNode()   {}
func (*VirtualScan) planNode()  {}
func (*Values) planNode()       {}
func (*Filter) planNode()       {}
func (*Project) planNode()      {}
func (*Join) planNode()         {}
func (*GroupBy) planNode()      {}
func (*Window) planNode()       {}
func (*Sort) planNode()         {}
func (*Limit) planNode()        {}
func (*Distinct) planNode()     {}
func (*SetOp) planNode()        {}
func (*RecursiveCTE) planNode() {}
func (*WorkTable) planNode()    {}
func (*CTEScan) planNode()      {}
func (*ProjectSet) planNode()   {}
func (*Max1Row) planNode()      {}
func (*Insert) planNode()       {}
func (*Update) planNode()       {}
func (*Delete) planNode()       {}

func joinCols(k JoinKind, left, right []Column) []Column {
	if k == SemiJoin || k == AntiJoin {
		return left
	}
	out := make([]Column, 0, len(left)+len(right))
	return append(append(out, left...), right...)
}

func returningCols(r *Returning) []Column {
	if r == nil {
		return nil
	}
	return r.Cols
}
