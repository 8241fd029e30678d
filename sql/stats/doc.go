// Package stats owns Cairn's table statistics: what ANALYZE (and the
// automatic refresher) collects per table and column, how it is stored in
// KV, the node's cache of it, and the selectivity estimates the optimizer
// derives from it. It must not touch table data beyond reading it, the
// catalog's descriptors, or the plan contract: sql/opt asks it for numbers,
// sql/session runs ANALYZE through Collect/Save, sql/pgcatalog shows what
// Load returns (pg_stats, pg_class.reltuples).
//
//	ANALYZE / Refresher ──Collect──► *Table ──Save──► /sys: st/<table id>
//	Optimizer ──Cache.Get──► *Table ──Column.Selectivity, EqSel──► row estimates
//
// What is collected (collect.go), in PostgreSQL's pg_stats shape: the row
// count and table bytes exactly (the whole table is read); per column the
// null fraction and average width exactly, the distinct count from a
// HyperLogLog sketch over every row, and, from a reservoir sample of
// SampleSize rows (PostgreSQL's 300 × default_statistics_target), the most
// common values with their frequencies and an equi-depth histogram of the
// other values.
//
// Automatic statistics (refresh.go): sessions report the rows their
// committed DML and COPY changed per table (Refresher.NotifyMutations);
// a table changed by more than 20% of its rows plus 500 is collected again
// in the background, a minute after it went stale (DefaultDelay,
// PostgreSQL's autovacuum_naptime; TestRefreshWaitsAndCoalesces), in a
// transaction of the refresher's own, which an online schema change's
// drains leave out (it writes no rows: kv.Txn.ExemptFromDrain;
// TestRefreshHoldsNoDrain). A committed ANALYZE of a whole table takes
// the changes it read past off the count (Refresher.Analyzed, as
// PostgreSQL's ANALYZE resets n_mod_since_analyze;
// TestAnalyzedTakesChangesOff), so a load followed by ANALYZE is not read
// again a minute later. A session
// turns its reports off with SET sql.stats.automatic_collection.enabled =
// off.
//
// Tests: stats_test.go checks the estimators, the collection's shape and
// the stored form; analyze_test.go runs testdata/analyze against a real
// node (ANALYZE, pg_stats, plans changing, restarts, automatic
// collection, EXPLAIN ANALYZE's KV line); test/logic/testdata/statistics
// holds what PostgreSQL 15 answers alike.
//
// Invariants:
//
//  1. Statistics only ever change estimates, never results: everything
//     here is a number the optimizer may be wrong about.
//  2. A stored entry names the column types it was collected under; an
//     entry whose column changed type since is ignored (Load), never
//     misdecoded.
//  3. Collection reads in the transaction it is given and writes nothing
//     but the st/<id> key (Save); the refresher uses transactions of its
//     own, never a user's.
//  4. An automatic collection starts Delay after the change that made its
//     table stale, never on a session's commit path, and counts every
//     change reported until it starts: loads in quick succession make one
//     collection, and the statements right after a load (a CREATE INDEX
//     reading the same rows) do not share the node's CPU with it.
//  5. The planner's cache never waits for or pushes a transaction that
//     is rewriting a statistics record: it reads the value committed
//     before it (kv.DB.GetCommitted), so planning cannot make an ANALYZE
//     lose its commit.
package stats
