// Package ddl executes PostgreSQL's data definition statements: CREATE,
// ALTER and DROP of databases, schemas, tables, indexes, views, sequences
// and roles, TRUNCATE, COMMENT, GRANT/REVOKE and LOCK. The session calls
// Exec with the statement's transaction; everything Exec changes (catalog
// descriptors through catalog.Writer, index backfills, row rewrites, data
// deletion) happens in that transaction, so a ROLLBACK undoes a DDL
// statement as in PostgreSQL. The exceptions: sequence positions
// (ALTER SEQUENCE RESTART, TRUNCATE ... RESTART IDENTITY), which live
// outside transactions like every sequence value (sql/sequence), and the
// jobs a statement of its own runs in transactions of their own: the
// online move of a table (colocation_job.go) and the online CREATE INDEX
// (index_job.go, index_backfill.go).
//
// It owns: the translation of DDL parse trees into descriptor changes with
// PostgreSQL 15's checks, messages, SQLSTATEs, command tags and generated
// names (names.go: t_pkey, t_a_key, t_a_fkey, t_a_check, t_a_idx, t_c_seq);
// stored expression text (DEFAULT, CHECK, generated columns, index
// predicates) in the form pg_get_expr prints; the data work DDL implies
// (index backfill, rewrites, validation, clearing dropped data). It must
// not touch the binder, optimizer or executor: a view's columns come from
// Context.Describe, and constraints are only recorded here (enforcing
// CHECK, NOT NULL, foreign keys and defaults on DML is sql/exec's, from the
// descriptor).
//
// Files: ddl.go (Exec, name resolution), table.go (CREATE TABLE and the
// constraint builder ALTER reuses), index.go (CREATE INDEX, the
// transactional backfill), index_job.go and index_backfill.go (online
// CREATE INDEX: states, drains, sorted parallel backfill, validation),
// index_backfill_dist.go (the backfill's readers on the tablets'
// leaseholders, through sql/distsql),
// drop.go (DROP, dependencies and CASCADE, databases and schemas),
// alter.go (ALTER TABLE, RENAME, rewrites and validation), seqddl.go
// (sequences, storage parameters), misc.go (views, TRUNCATE, COMMENT,
// roles), privileges.go (GRANT, REVOKE, ownership checks), exprindex.go
// (indexes on expressions), hashshard.go and alterpk.go (hash-sharded
// indexes, changing a key in place), rekey.go (the online key change),
// enum.go (CREATE/ALTER/DROP TYPE of enums, and the copies of a type's
// members in the descriptors of the tables using it), domain.go (CREATE
// DOMAIN), function.go (CREATE/DROP/ALTER FUNCTION of SQL functions, the
// body checked through Context.Describe), names.go. Temporary tables are ordinary tables in the
// session's own schema, which Context.TempSchema supplies.
//
// Decisions:
//
//   - A table without a PRIMARY KEY gets a hidden int8 column rowid with
//     DEFAULT unique_rowid() as its key (every Cairn row needs a key);
//     ALTER TABLE ADD PRIMARY KEY later rewrites the rows under the real
//     key and drops rowid.
//   - Privileges are PostgreSQL's (privileges.go over sql/catalog's
//     privilege.go): owners, ACLs edited by GRANT and REVOKE on tables,
//     views, sequences, schemas and databases, role membership (GRANT
//     role TO role), DROP OWNED and REASSIGN OWNED. DDL checks ownership
//     ("must be owner of table t") and CREATE on the schema or database;
//     the session checks the table privileges of queries and DML
//     (sql/session/privileges.go). Role management takes a superuser
//     (there is no CREATEROLE), column privileges and ALTER DEFAULT
//     PRIVILEGES are refused with 0A000. Roles themselves are real
//     (LOGIN, SUPERUSER and the SCRAM verifier of PASSWORD are stored and
//     used by authentication); their other options are accepted and not
//     recorded.
//   - An index on an expression keys a hidden stored generated column
//     holding the expression (exprindex.go).
//   - LOCK TABLE is accepted and does nothing beyond checking the tables
//     exist: the KV layer already orders conflicting transactions (first
//     committer wins, serializable refresh), so an explicit lock adds no
//     guarantee; tools take it to protect what they read and write.
//   - Colocation (colocation.go, docs/colocation.md): CREATE DATABASE ...
//     WITH colocated = true gives the database a group split off as one
//     tablet; its tables and their indexes live there unless a table says
//     WITH (colocated = false), which gives it a hash-partitioned group of
//     its own split into cairn_split_tablets (SPLIT INTO n TABLETS) tablets.
//   - Hash-sharded indexes (hashshard.go): cairn_pk_hash_buckets and
//     cairn_hash_buckets give an index a hidden shard column leading its
//     key, a CHECK on it, and a tablet per bucket (split in parallel);
//     ALTER INDEX ... SET (bucket_count) and ALTER PRIMARY KEY
//     (cairn_alter_primary_key) rewrite the table under the new key
//     (alterpk.go): online as a job when only the hashing changes and
//     the statement is alone (rekey.go), else in the statement's
//     transaction.
//   - Name choice (t_pkey, t_v_idx, ...) and DROP/ALTER INDEX look each
//     name up (catalog.Reader.IndexTable) rather than reading every
//     relation of the schema, so DDL does not slow down as tables
//     accumulate (table.go, relNameSet).
//   - The other Cairn storage parameters (cairn_pk_order, and
//     cairn_split_tablets on an index) are refused with 0A000 until their
//     layouts are built, never ignored;
//     PostgreSQL's reloptions (fillfactor, autovacuum_*, ...) are accepted
//     and unused, since they tune storage Cairn does not have.
//   - CREATE INDEX gives the new index fresh storage
//     (catalog.AllocateStorageID) and backfills it with committed values
//     (kv.Txn.RunBulk), not intents: only the descriptor version the
//     transaction writes names that storage (index.go, backfill). The
//     indexes of ALTER TABLE's new constraints are still written as
//     intents.
//   - ALTER TABLE's rewrites (ADD PRIMARY KEY, ALTER COLUMN TYPE, a
//     volatile ADD COLUMN default, expression columns, a colocation move)
//     likewise write every index of the table into fresh storage with
//     committed values, streaming the old rows read above the new
//     descriptor write (alter.go, rewrite); the old storage is left as
//     unreachable garbage (a later DROP clears the primary and local
//     indexes' old keys with the table's keyspace, not a global index's;
//     the colocation move deletes its old keys itself).
//   - TRUNCATE moves the table to fresh storage in a new descriptor
//     version instead of deleting its rows, marks it for the bulk path
//     (catalog.TruncatedTableMark), and frees the storage the old version
//     named with range deletions after the transaction commits
//     (misc.go, truncateStorage).
//   - Dependencies are tracked at the relation level: a view records the
//     relations its query names (View.DependsOn), so DROP TABLE refuses or
//     cascades; DROP COLUMN does not check views.
package ddl
