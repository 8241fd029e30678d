package ddl

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Hash-sharded indexes (CockroachDB's USING HASH; docs/architecture.md,
// "Hash-sharded indexes"). The parser turns every spelling into a storage
// parameter: cairn_pk_hash_buckets on CREATE TABLE for the primary key,
// cairn_hash_buckets on CREATE INDEX (inline INDEX and UNIQUE INDEX
// elements become CREATE INDEX statements), with a count or "default".
// Here an index gets:
//
//   - a hidden stored generated int8 column crdb_internal_<cols>_shard_<n>
//     = mod(fnv32(crdb_internal.datums_to_bytes(cols...)), n), which
//     builtins.ShardBucket computes in Go for the planner; a column of
//     that name already there (the same columns and count) is shared;
//   - that column in front of its key, and HashSharding on the index;
//   - a CHECK that the shard lies in [0, n-1], named
//     check_crdb_internal_<cols>_shard_<n>;
//   - tablets split at every bucket boundary before any row is written
//     (splitShards), so each bucket is its own tablet from the start.
//
// Uniqueness. A UNIQUE hash-sharded index is unique on (shard, cols...)
// in storage: rowenc writes its entries with a conditional put on that
// key. That is the same as being unique on the user's cols: the shard is a
// deterministic function of cols (an immutable expression of their key
// encodings), so two rows with equal cols have equal shards and collide
// on the same key in the same bucket, and two rows with different cols
// differ in the key whatever their shards. No cross-bucket check is
// needed. The catalogs, 23505's detail, ON CONFLICT arbiters and foreign
// keys therefore see the index's key as the user's columns alone
// (catalog.Index.UserKeyColumnIDs).

// DefaultHashBuckets is the bucket count of USING HASH without a count
// while the cluster setting
// sql.defaults.default_hash_sharded_index_bucket_count is not set
// (CockroachDB's default).
const DefaultHashBuckets = 16

// Storage parameters of the dialect (sql/parser/doc.go).
const (
	optPKHashBuckets = "cairn_pk_hash_buckets"
	optHashBuckets   = "cairn_hash_buckets"
)

// takeHashBuckets removes option name from opts and returns its bucket
// count (0 when absent). "default" reads the cluster's default.
func (e *executor) takeHashBuckets(opts []*pg_query.Node, name string) (int32, []*pg_query.Node, error) {
	var buckets int32
	var rest []*pg_query.Node
	for _, o := range opts {
		d := o.GetDefElem()
		if d == nil || d.Defnamespace != "" || d.Defname != name {
			if d != nil && d.Defnamespace == "" && d.Defname == "bucket_count" {
				return 0, nil, pgerror.New(pgerrcode.SyntaxError, "bucket_count is only allowed after USING HASH").
					WithHint("Write USING HASH WITH (bucket_count = n), or USING HASH WITH BUCKET_COUNT = n, once.")
			}
			rest = append(rest, o)
			continue
		}
		if buckets != 0 {
			return 0, nil, pgerror.New(pgerrcode.SyntaxError, "the bucket count is given twice").
				WithHint("Write USING HASH WITH (bucket_count = n), or USING HASH WITH BUCKET_COUNT = n, once.")
		}
		n, err := e.bucketCount(d)
		if err != nil {
			return 0, nil, err
		}
		buckets = n
	}
	return buckets, rest, nil
}

// checkConstraintParams checks a PRIMARY KEY or UNIQUE constraint's WITH
// (...) index parameters: PostgreSQL's are accepted; bucket_count there
// means the hash clause was written twice (USING HASH WITH BUCKET_COUNT =
// n WITH (bucket_count = n)) or without USING HASH.
func checkConstraintParams(opts []*pg_query.Node) error {
	for _, d := range defElems(opts) {
		if d.Defname == "bucket_count" {
			return pgerror.New(pgerrcode.SyntaxError, "bucket_count is only allowed after USING HASH").
				WithHint("Write USING HASH WITH (bucket_count = n), or USING HASH WITH BUCKET_COUNT = n, once.")
		}
	}
	return checkStorageParams(opts, true)
}

func (e *executor) bucketCount(d *pg_query.DefElem) (int32, error) {
	s := defString(d)
	if strings.EqualFold(s, "default") {
		return e.defaultHashBuckets()
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < catalog.MinShardBuckets || n > catalog.MaxShardBuckets {
		return 0, pgerror.New(pgerrcode.InvalidParameterValue, "hash sharded index bucket count must be between %d and %d, not %s",
			catalog.MinShardBuckets, catalog.MaxShardBuckets, s)
	}
	return int32(n), nil
}

// defaultHashBuckets is the bucket count of USING HASH alone: the
// cluster setting's (checked when it was set), else DefaultHashBuckets.
func (e *executor) defaultHashBuckets() (int32, error) {
	if e.x.HashBuckets == nil {
		return DefaultHashBuckets, nil
	}
	v, err := e.x.HashBuckets(e.ctx)
	if err != nil {
		return 0, fmt.Errorf("ddl: reading the default bucket count: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < catalog.MinShardBuckets || n > catalog.MaxShardBuckets {
		return DefaultHashBuckets, nil
	}
	return int32(n), nil
}

// checkShardable refuses hash sharding where Cairn already places rows by
// a hash of its own (a colocated table shares one tablet; a
// hash-partitioned table spreads its rows over buckets already).
func checkShardable(t *catalog.Table) error {
	if t.Colocated {
		return notSupported("hash-sharded indexes on colocated table %q are not supported: it shares its database's tablet", t.Name)
	}
	if t.Partitioning.Kind == catalog.PartitionHash {
		return notSupported("hash-sharded indexes on hash-partitioned table %q are not supported: its rows are spread by hash already", t.Name)
	}
	return nil
}

// shardIndex makes idx (its KeyColumnIDs the user's columns) hash-sharded
// into buckets buckets on t, adding the shard column and its check unless
// t has them already. It returns the shard column's ID and whether it is
// new (its values must then be filled in existing rows).
func (e *executor) shardIndex(t *catalog.Table, idx *catalog.Index, buckets int32) (rowenc.ColumnID, bool, error) {
	if err := checkShardable(t); err != nil {
		return 0, false, err
	}
	if idx.Kind == catalog.IndexGIN {
		return 0, false, pgerror.New(pgerrcode.InvalidParameterValue, "a gin index cannot be hash sharded")
	}
	var names, args []string
	for _, id := range idx.KeyColumnIDs {
		c := t.ColumnByID(id)
		if c == nil {
			return 0, false, fmt.Errorf("ddl: index key column %d not found", id)
		}
		if t.IsShardColumn(id) {
			return 0, false, pgerror.New(pgerrcode.InvalidParameterValue, "cannot hash-shard an index on shard column %q", c.Name)
		}
		if err := indexableType(c); err != nil {
			return 0, false, err
		}
		if c.IsIndexExpr() {
			// Hash the expression itself: a generated column may not
			// read another one.
			names = append(names, strings.TrimPrefix(c.Name, "cairn_idx_"))
			args = append(args, "("+c.ComputedExpr+")")
			continue
		}
		names = append(names, c.Name)
		args = append(args, quoteIdentIfNeeded(c.Name))
	}
	colName := truncateIdent(fmt.Sprintf("%s%s%s%d", catalog.ShardColumnPrefix, strings.Join(names, "_"), catalog.ShardColumnInfix, buckets))
	expr := builtins.ShardExpr(args, buckets)
	if c := t.ColumnByName(colName); c != nil {
		if !c.Hidden || c.ComputedExpr != expr {
			return 0, false, pgerror.New(pgerrcode.DuplicateColumn, "column %q already exists", colName).
				WithHint("The shard column of a hash-sharded index is named crdb_internal_<columns>_shard_<buckets>.")
		}
		e.prependShard(idx, c.ID, buckets)
		return c.ID, false, nil
	}
	// Type-check the expression over the table (a column whose key
	// encoding cannot be hashed fails here).
	if _, err := e.buildOverTable(t, expr, types.Int8); err != nil {
		return 0, false, pgerror.Wrapf(err, pgerrcode.InvalidParameterValue, "cannot hash-shard index on (%s)", strings.Join(names, ", "))
	}
	id, err := t.AddColumn(catalog.Column{Name: colName, Type: types.Int8, ComputedExpr: expr, Stored: true, Hidden: true})
	if err != nil {
		return 0, false, err
	}
	t.Checks = append(t.Checks, catalog.Check{
		Name: truncateIdent("check_" + colName),
		Expr: fmt.Sprintf("%s BETWEEN 0 AND %d", quoteIdentIfNeeded(colName), buckets-1),
	})
	e.prependShard(idx, id, buckets)
	return id, true, nil
}

func (e *executor) prependShard(idx *catalog.Index, shard rowenc.ColumnID, buckets int32) {
	idx.KeyColumnIDs = append([]rowenc.ColumnID{shard}, idx.KeyColumnIDs...)
	idx.KeyDirections = append([]rowenc.Order{rowenc.Asc}, idx.KeyDirections...)
	idx.StoreColumnIDs = slices.DeleteFunc(idx.StoreColumnIDs, func(id rowenc.ColumnID) bool { return id == shard })
	idx.HashSharding = &catalog.HashSharding{Buckets: buckets, ShardColumnID: shard}
}

// dropUnusedShardColumns removes the shard columns no index uses any more
// (after DROP INDEX, DROP COLUMN ... CASCADE), with their checks, and the
// checks of shard columns already dropped.
func dropUnusedShardColumns(t *catalog.Table) {
	defer func() {
		t.Checks = slices.DeleteFunc(t.Checks, func(k catalog.Check) bool {
			col, ok := strings.CutPrefix(k.Name, "check_")
			return ok && strings.HasPrefix(col, catalog.ShardColumnPrefix) && strings.Contains(col, catalog.ShardColumnInfix) &&
				t.ColumnByName(col) == nil
		})
	}()
	used := map[rowenc.ColumnID]bool{}
	for _, ix := range append([]catalog.Index{t.PrimaryIndex}, t.Indexes...) {
		if ix.HashSharding != nil {
			used[ix.HashSharding.ShardColumnID] = true
		}
	}
	for _, c := range slices.Clone(t.Columns) {
		if c.Hidden && c.ComputedExpr != "" && strings.HasPrefix(c.Name, catalog.ShardColumnPrefix) &&
			strings.Contains(c.Name, catalog.ShardColumnInfix) && !used[c.ID] {
			check := truncateIdent("check_" + c.Name)
			t.Checks = slices.DeleteFunc(t.Checks, func(k catalog.Check) bool { return k.Name == check })
			_ = t.DropColumn(c.Name)
		}
	}
}

// splitShards splits the tablets of a new hash-sharded index at the
// bounds of its group and at each bucket's first key, so that every
// bucket is a tablet of its own before the index takes writes, then
// hands the buckets' leases round-robin over the tablets' voters
// (spreadLeases) so that every node takes an equal share of the writes
// from the first one. Splits are not transactional (see splitAt). Without a
// kv.DB (unit tests of the descriptor alone) nothing is split.
func (e *executor) splitShards(ctx context.Context, t *catalog.Table, id catalog.IndexID) error {
	if e.x.DB == nil {
		return nil
	}
	idx := t.IndexByID(id)
	if idx == nil || idx.HashSharding == nil {
		return nil
	}
	l, err := t.Layout()
	if err != nil {
		return err
	}
	il := &l.Primary
	g := t.GroupID
	if id != t.PrimaryIndex.ID {
		for i := range l.Secondary {
			if l.Secondary[i].ID == uint32(id) {
				il = &l.Secondary[i]
			}
		}
		if idx.Placement == catalog.IndexGlobal {
			g = idx.GroupID
		}
	}
	group := rowenc.GroupSpan(g)
	keys := [][]byte{group.Key}
	prefix := l.IndexPrefix(nil, il, 0)
	for b := int32(1); b < idx.HashSharding.Buckets; b++ {
		k, err := rowenc.EncodeKey(slices.Clip(prefix), types.DInt(b), rowenc.Asc)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	keys = append(keys, group.EndKey)
	if err := e.splitAt(ctx, keys); err != nil {
		return err
	}
	// Bucket b's tablet starts at keys[b] (bucket 0 at the group's start).
	e.spreadLeases(ctx, keys[:len(keys)-1], int(t.ID)+int(id))
	return nil
}
