// Package parser turns a query string into PostgreSQL parse trees.
//
// It owns the SQL grammar boundary: the dialect rewriter (CockroachDB and
// YugabyteDB syntax the seeds use, DESIGN §8) and the wrapper around
// libpg_query (pg_query_go), the real PostgreSQL 17 parser. The session
// calls Parse once per query string (simple protocol) or Parse message
// (extended protocol); the binder reads the resulting ASTs. The package
// knows nothing about catalogs, names or types: it must not resolve or
// normalize identifiers, and it must not give meaning to the storage
// parameters it writes; that is the binder's job, which rejects what is
// not supported yet with a clear error.
//
//	query text ─ Scan ─ tokens ─ rules (dialect.go) ─ edits ─ render ─ Postgres text ─ pg_query.Parse ─ []Statement
//	                                                             └─ offset map: positions back into the query text
//
// # The dialect, and the contract with the binder
//
// Each construct is rewritten into plain PostgreSQL, with what Postgres
// cannot say carried as storage parameters in WITH (...) of the statement
// (merged into a WITH the user wrote). These parameter names are reserved
// and are the whole contract:
//
//	cairn_pk_hash_buckets = n | default
//	    CREATE TABLE: the primary key is hash-sharded (CockroachDB
//	    PRIMARY KEY ... USING HASH [WITH BUCKET_COUNT = n], table- or
//	    column-level). default: the user gave no bucket count.
//	cairn_hash_buckets = n | default
//	    CREATE INDEX: the index is hash-sharded (... (cols) USING HASH ...).
//	cairn_alter_primary_key = true
//	    ALTER TABLE t ADD PRIMARY KEY (cols): CockroachDB's ALTER TABLE t
//	    ALTER PRIMARY KEY USING COLUMNS (cols) [USING HASH ...], which
//	    replaces the key (with cairn_pk_hash_buckets when hashed;
//	    dialect_alterpk.go).
//	cairn_pk_order = 'o1,o2,...'
//	    CREATE TABLE: one entry per primary-key column, in key order, each
//	    hash, asc, desc or default (not written). Written only when the
//	    user wrote an order (YugabyteDB PRIMARY KEY ((a, b) HASH, c ASC),
//	    or CockroachDB PRIMARY KEY (a DESC)); hash entries always lead.
//	cairn_split_tablets = n
//	    CREATE TABLE or CREATE INDEX: YugabyteDB SPLIT INTO n TABLETS.
//	cairn_zone_<option> = value, cairn_zone_discard = true
//	    ALTER TABLE t SET (...) / ALTER DATABASE d WITH ...: CockroachDB's
//	    ALTER TABLE|DATABASE ... CONFIGURE ZONE USING option = value, ...
//	    | DISCARD (dialect_zone.go; the DDL judges names and values).
//
// CockroachDB's AS OF SYSTEM TIME e travels as a first CTE of a SELECT,
// cairn_as_of_system_time AS (SELECT e), which Parse moves out of the tree
// into Statement.AsOf, and as SET LOCAL cairn_as_of_system_time = 'e' for
// BEGIN (a derived statement) and SET TRANSACTION (dialect_aost.go).
//
// SHOW ZONE CONFIGURATION FOR|FROM DATABASE d | TABLE t and SHOW [ALL]
// ZONE CONFIGURATIONS become a SELECT of cairn_catalog.zones; SHOW JOBS and
// SHOW JOB n one of cairn_catalog.jobs (dialect_jobs.go).
//
// A user who writes these parameters directly means the same thing, which
// is what lets SHOW CREATE TABLE print plain Postgres that round-trips.
//
// Constructs that need no parameter: CockroachDB's AS (expr) STORED
// becomes GENERATED ALWAYS AS (expr) STORED; STRING, STRING(n) and BYTES as
// type names become text, varchar(n) and bytea; an inline [UNIQUE] INDEX
// of CREATE TABLE becomes a CREATE [UNIQUE] INDEX statement right after it
// (Statement.Derived). CREATE DATABASE d WITH colocated = true and
// CREATE TABLE ... WITH (colocated = false) are already valid Postgres and
// pass through. YugabyteDB's CREATE INDEX ... ((a) HASH, b) is also valid
// Postgres (an operator class named hash) and passes through for the binder
// to read. The rules table in dialect.go lists every construct.
//
// # Invariants
//
//  1. Text without any dialect construct is passed to Postgres byte for
//     byte (FuzzRewrite checks it for inputs free of the dialect's words).
//  2. The rewriter works on Postgres's own token stream, never on raw
//     text: strings, quoted identifiers, dollar quotes and comments are
//     never rewritten.
//  3. Edits never overlap: a token is covered by at most one edit.
//  4. Every error is a *SyntaxError whose Position is a 1-based character
//     offset into the text the user sent, including errors Postgres finds
//     in rewritten text. A malformed dialect construct is an error, never
//     passed through with a changed meaning.
//  5. Statement boundaries are the grammar's (RawStmt locations), not
//     semicolons found by hand.
package parser
