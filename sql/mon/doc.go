// Package mon accounts the memory (and temporary disk) SQL execution
// holds, so that no statement can take the node down.
//
// Two levels, as in PostgreSQL and CockroachDB:
//
//	node Budget (--max-sql-memory; --max-disk-temp-storage for disk)
//	  └─ Statement (one per running statement; releases everything at Close)
//	       └─ Account (one per operator that holds rows: work_mem each)
//
// An operator reserves what it holds (Account.Grow) before holding it.
// Grow fails in two ways that mean different things: ErrWorkMem (the
// operator is past work_mem: it must spill and carry on) and a 53200
// error from the node Budget (the node is out of SQL memory: the operator
// spills what it can, and if even its minimum is refused, the statement
// fails with 53200). State an operator cannot spill (one group's
// buffered aggregate inputs; one large value; a spilled window
// partition's cache of rows read by position) is reserved with
// Force, which ignores work_mem but not the node budget.
//
// What it owns: the arithmetic of reservations and their SQLSTATEs. What
// it must not touch: it never frees memory itself and knows nothing of
// rows or files (sql/rowcontainer estimates sizes and spills).
//
// Invariants:
//
//  1. A Budget's Used never exceeds its Limit: Reserve either grants all
//     of n or nothing.
//  2. An Account's used bytes are always also reserved in its Budget;
//     Shrink and Close give back exactly what was granted, never more.
//  3. Grow past the Account's limit reserves nothing and returns
//     ErrWorkMem; the node Budget is only asked for bytes within the limit
//     (or for Force).
//  4. Statement.Close closes every Account opened through it, so a
//     statement that ends, fails or is cancelled returns all its memory to
//     the node Budget, whatever its operators did. (An account holding
//     nothing may leave the statement's list, so the list does not grow
//     with every operator a correlated subquery opens per outer row; it
//     rejoins the list when it reserves again.)
//  5. Accounts and Statements are used by one goroutine (the statement's);
//     Budgets are safe for concurrent use.
package mon
