// Package exec runs plans: it turns a plan.Plan (bound by sql/plan,
// rewritten by sql/opt) into pull-based operators and hands the rows to
// the session (Start, Rows), collecting EXPLAIN ANALYZE figures on request
// (Stats).
//
// What it owns: every query operator (scan.go: index scans with spans,
// hash buckets and ordered k-way merges; point.go: a read of one row by
// its whole primary key, which Start runs as one operator instead of the
// general scan; gin.go: GIN token lookups
// intersected into primary keys; lookup.go: batched index and
// lookup joins; join.go, mergejoin.go, agg.go, window.go, setop.go,
// basic.go; count.go: count(*) of a table counted at the tablets), subquery
// evaluation (subquery.go: sem.SubqueryValues with per-binding caching),
// outer references (op.go: runner.compile) and the statement's runner
// seam. The DML operators (dml*.go, copy*.go) belong to the DML executor
// and build their inputs through runner.build, runner.compile and
// runner.evalCtx. Three paths run a cached plan's kept shapes without a
// runner: PointCache.ReadPoint (point_fast.go, a point read without a
// kv.Txn), PointCache.UpdatePoint (update_fast.go, an UPDATE of one row
// by its primary key) and PointCache.InsertValues (insert_fast.go, an
// INSERT ... VALUES of kept items), the last two through the DML
// executor's own tableInfo, write and flush.
//
// What it must not touch: plans are read-only (the optimizer's output is
// cached with prepared statements); descriptors come in the plan, never
// from the catalog; KV is reached only through the statement's kv.Txn,
// or, for a statement the session runs without one (Context.Implicit),
// through the session's ImplicitReader, in one batch read at one
// timestamp (point.go, startImplicit).
// One exception each, for bulk loads (bulk.go): a load into a table created
// or truncated in its transaction, or a COPY into an empty existing table,
// writes the table's next descriptor version (fresh storage) through a
// catalog.Writer in the statement's transaction (Context.CatalogWriter,
// the session's, when it gives one), allocates the storage IDs outside it
// (catalog.AllocateStorageID), and a COPY into an existing table first
// reads the table's storage outside it to skip that write when there are
// rows, as a load into a table created or truncated in its transaction
// reads the storage that table names (only that transaction's own writes
// can be there).
//
// Execution model: one goroutine per statement. Operators return fresh row
// slices that later operators may keep (sorts, hash tables). Parallelism
// comes from KV: one kv.Batch of many lookups is split per tablet and the
// parts are sent in parallel, so index and lookup joins batch up to
// lookupBatch input rows per round trip (Context.LookupBatch: the storage
// profile's size), and send a batch's keys sorted, each distinct key once,
// so that every tablet reads its part in storage order (lookup.go). Scans page with a growing limit
// (firstPage to maxPage keys) so LIMIT 1 reads one small page. Context
// cancellation is checked between KV pages and every checkEvery rows of
// CPU-only loops.
//
// Memory (spill.go): every operator that holds rows (sorts, hash
// aggregation, DISTINCT, set operations, hash joins, windows) reserves
// them in its own mon.Account, bounded by work_mem, in the node's SQL
// budget, and spills past it into the statement's rowcontainer.Scope;
// rows held outside operators (subquery values, CTEs) are reserved past
// work_mem; values a statement returns are reserved from 1 MB (over 1 GB:
// 54000). Start opens the statement's accounts and Rows.Close (or the
// first error) releases them and removes its temporary files.
//
// Outer references: an expression may name a column that is not in its
// input: a column of the row a correlated subquery or a LATERAL join runs
// for. runner.outer holds those values by ColumnID (unique per plan, so
// nesting never clashes); compile reads them at evaluation time and binds
// the columns a correlated subquery needs from the current row before
// evaluating it.
//
// Known limits: FOR UPDATE/SHARE lock nothing (KV has no locking read;
// see scan.go); an ordered scan of every bucket of a hash-partitioned
// index reads the whole index and sorts it, since merging 65536 bucket
// streams would cost a request each (a scan restricted to Scan.Buckets
// merges the buckets' streams); a lookup join into a hash-partitioned
// index must supply the hash columns (0A000 otherwise).
package exec
