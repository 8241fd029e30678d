// Package catalog owns the SQL catalog: descriptors of databases, schemas,
// tables, views and sequences (descriptor.go, table.go), their validation
// and stored form (validate.go, encoding.go), their place in the KV layer
// with the namespace and ID counter (keys.go, reader.go, writer.go), roles
// (roles.go), the privilege model (privilege.go: ACLs, Authorizer), a fresh cluster's catalog (bootstrap.go) and a node's
// descriptor cache (cache.go). It also turns a table descriptor into the
// layout rowenc encodes rows with (layout.go: Table.RowSchema, Table.Layout).
//
// Who calls it: the binder resolves names through a Reader; DDL runs
// through a Writer inside the statement's kv.Txn; the executor gets
// rowenc.TableLayouts from tables; pgwire auth reads Roles; pg_catalog is
// generated from Reader listings. It calls kv (Txn reads and writes),
// keys (keys.System), rowenc (key encodings for the namespace, Schema,
// TableLayout), types and pgerror. It never touches table data: dropping a
// table removes its descriptor; clearing its spans is the caller's (or a
// GC job's).
//
//	binder/DDL ──> Reader / Writer ──> kv.Txn ──> /sys: d/<id>, v/<id>, n/<db><schema><name>, r/<role>, id
//	                 │
//	                 └──> Cache (by ID, checked against the v/<id> stamp in the same txn)
//
// Invariants:
//
//  1. Every stored descriptor is valid: Encode validates before writing,
//     Decode after reading (TestValidate, FuzzDecode).
//  2. A Reader sees the catalog as of its transaction's snapshot,
//     including that transaction's own changes; a Cache hit returns exactly
//     what reading the descriptor in that transaction would
//     (TestCacheFollowsSnapshot).
//  3. A descriptor's version increments by one on every change, and every
//     write stores a fresh stamp, so (ID, stamp) names one content forever
//     (TestCacheVersions).
//  4. DDL is transactional: a rolled-back transaction leaves no name, no
//     descriptor and no consumed ID (TestRollbackLeavesNothing).
//  5. A name is held by at most one descriptor in its namespace (databases;
//     schemas of a database; relations, types and functions of a schema,
//     a function under its name and input types: funcdesc.go), enforced by a
//     ConditionalPut on the namespace key, with Postgres's SQLSTATEs
//     (TestNameCollisions).
package catalog
