package ddl

import (
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// TestHashShardedRefusedWherePlacedByHash: colocated and hash-partitioned
// tables place rows by a hash of their own, so hash-sharded indexes on
// them are refused (0A000) and the table is left as it was.
func TestHashShardedRefusedWherePlacedByHash(t *testing.T) {
	e := newTestEnv(t)
	e.mustExec(`CREATE TABLE split (a int PRIMARY KEY, b int) WITH (cairn_split_tablets = 3)`)
	_, err := e.exec(`CREATE INDEX ON split (b) WITH (cairn_hash_buckets = 4)`)
	wantErr(t, err, "0A000", `hash-sharded indexes on hash-partitioned table "split" are not supported: its rows are spread by hash already`)
	_, err = e.exec(`CREATE TABLE split2 (a int PRIMARY KEY) WITH (cairn_split_tablets = 3, cairn_pk_hash_buckets = 4)`)
	wantErr(t, err, "0A000", `hash-sharded indexes on hash-partitioned table "split2" are not supported: its rows are spread by hash already`)
	if s := e.table("split"); len(s.Indexes) != 0 || len(s.Columns) != 2 {
		t.Fatalf("refused index changed the table: %d indexes, %d columns", len(s.Indexes), len(s.Columns))
	}
	e.mustExec(`CREATE DATABASE co WITH colocated = true`)
	e.dbName = "co"
	_, err = e.exec(`CREATE TABLE c (a int PRIMARY KEY) WITH (cairn_pk_hash_buckets = 4)`)
	wantErr(t, err, "0A000", `hash-sharded indexes on colocated table "c" are not supported: it shares its database's tablet`)
	// Opted out of the database's tablet, a table is hash partitioned.
	e.mustExec(`CREATE TABLE o (a int PRIMARY KEY, b int) WITH (colocated = false)`)
	_, err = e.exec(`CREATE INDEX ON o (b) WITH (cairn_hash_buckets = 4)`)
	wantErr(t, err, "0A000", `hash-sharded indexes on hash-partitioned table "o" are not supported: its rows are spread by hash already`)
}

// TestShardIndexDescriptor: the descriptor USING HASH makes (the parser's
// storage parameter): the shard column leads the key, hidden, int8,
// generated, with its check; a second index on the same columns and count
// shares it.
func TestShardIndexDescriptor(t *testing.T) {
	e := newTestEnv(t)
	e.mustExec(`CREATE TABLE kv (k int8 PRIMARY KEY, v text) WITH (cairn_pk_hash_buckets = 8)`)
	e.mustExec(`CREATE INDEX kv_k ON kv (k) WITH (cairn_hash_buckets = 8)`)
	kv := e.table("kv")
	hs := kv.PrimaryIndex.HashSharding
	if hs == nil || hs.Buckets != 8 {
		t.Fatalf("primary index sharding: %+v", hs)
	}
	c := kv.ColumnByID(hs.ShardColumnID)
	if c == nil || c.Name != "crdb_internal_k_shard_8" || !c.Hidden || !c.Stored || c.Type.Oid != types.Int8.Oid ||
		c.ComputedExpr != "mod(fnv32(crdb_internal.datums_to_bytes(k)), 8)" {
		t.Fatalf("shard column: %+v", c)
	}
	if kv.PrimaryIndex.KeyColumnIDs[0] != c.ID || len(kv.PrimaryIndex.UserKeyColumnIDs()) != 1 {
		t.Fatalf("primary key columns: %v", kv.PrimaryIndex.KeyColumnIDs)
	}
	if ix := kv.IndexByName("kv_k"); ix == nil || ix.HashSharding == nil || ix.HashSharding.ShardColumnID != c.ID {
		t.Fatalf("second index must share the shard column: %+v", ix)
	}
	if len(kv.Checks) != 1 || kv.Checks[0].Name != "check_crdb_internal_k_shard_8" {
		t.Fatalf("checks: %+v", kv.Checks)
	}
}
