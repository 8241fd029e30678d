// Package rowcontainer holds rows that may not fit in memory: an external
// merge sorter (Sorter), a bounded top-k sorter (TopK), a spillable
// append-only row list (Buffer) with a reader by position through a
// bounded cache of row blocks (RowReader) and the temporary files they
// spill to
// (TempStorage, Scope, File). SQL operators
// (sql/exec: sorts, hash aggregation and join partitions, DISTINCT,
// windows, buffered results) use it, and so do online index builds
// (sql/ddl index_backfill.go), which sort their entries with the
// EntrySorter (entries.go): the same external merge sort for rows that
// are (key, value) bytes, ordered bytewise, held in arena chunks rather
// than as datums.
//
// Flow:
//
//	Add ──► rows in memory (reserved in a mon.Account)
//	         │ Grow says ErrWorkMem, or the node budget refuses
//	         ▼
//	        sort them, write a run (File under the statement's Scope)
//	Sort ──► no run: the rows in memory, sorted
//	         runs: k-way merge (a heap over one Reader per run; when there
//	         are more runs than the merge order, only enough consecutive
//	         runs are merged first to leave that many for the last merge)
//
// Temporary files live in one directory per node (TempStorage: under the
// store, wiped when the node starts) and one subdirectory per statement
// (Scope), removed when the statement ends, fails or is cancelled. Rows are
// written self-describing (codec.go: a tag byte per value), so any datum
// round-trips exactly (numeric scale, -0, interval fields, array element
// types); comparisons run on decoded values, so every type orders as
// types.Compare orders it (Cairn's only collation is C). A caller may
// give the Sorter a KeyFunc: an abbreviation of the sort keys to a uint64
// (NormalizedKey: the first 8 bytes of an order-preserving encoding of
// the sort columns one after the other, so small ints leave room for the
// next column), compared first, so most comparisons of the in-memory sort
// and of the merge compare two integers and the comparison runs only on
// ties.
//
// What it must not touch: it knows nothing of plans, KV or sessions; the
// caller supplies the comparison, the account and the scope.
//
// Invariants:
//
//  1. Every row in memory is reserved in the container's mon.Account
//     (RowSize), and released when it leaves memory (spilled or closed).
//  2. Every byte written to a temporary file is reserved in the node's
//     temporary-disk Budget before it is written and released when the
//     file is removed; past that budget the write fails with 53200.
//  3. The Sorter is stable: rows that compare equal come out in the order
//     they were added, spilled or not (runs hold consecutive input and
//     the merge prefers the earlier run on ties).
//  4. Close (of a Sorter, Buffer, File or Scope) removes every file it
//     made; Scope.Close removes the statement's directory whatever its
//     containers did, and is safe to call twice.
//  5. A row returned by a container belongs to the caller; a container
//     never changes a row it was given or returned.
//  6. Used by one goroutine at a time (the statement's), except
//     TempStorage, which statements share, and the iterators an
//     EntrySorter's Range returns, which may be read at once (each reads
//     the sorter's memory, or the runs through readers of its own, and
//     changes neither; Range itself and Close are the owner's). The
//     Scope's descriptor count and reader set are locked for them.
//  7. Temporary files hold at most the node's and the statement's share
//     of descriptors (TempStorage.SetOpenFileLimits: by default half of
//     RLIMIT_NOFILE for the node, 4,096 for a statement). A merge takes
//     no more runs than its share (Scope.FileShare), down to two at a
//     time; a descriptor refused, by these limits or by the operating
//     system, fails the statement with 53000, never the node.
package rowcontainer
