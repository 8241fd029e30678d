package ddl

import (
	"context"
	"slices"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Changing an index's key in place (issue 16): CockroachDB's ALTER TABLE
// t ALTER PRIMARY KEY USING COLUMNS (cols) [USING HASH ...], which the
// parser's dialect turns into ADD PRIMARY KEY (cols) WITH
// (cairn_alter_primary_key = true[, cairn_pk_hash_buckets = n]), and ALTER
// INDEX i SET (bucket_count = n) on a hash-sharded index (primary or
// secondary).
//
// Both build the new descriptor (the new key, a new shard column and its
// check, the old shard column dropped once no index uses it). When only
// the hashing changes and the statement is alone, a job makes the change
// online (rekey.go). Otherwise they write
// every row and index entry under it into fresh storage with committed
// values, in the statement's transaction (rewrite, as ALTER COLUMN TYPE
// and ADD PRIMARY KEY do). The old storage is unreachable once the new
// descriptor commits. Concurrent transactions are ordered against the
// change by the KV layer (the rewrite reads every row and writes the
// descriptor, so a writer either commits before and its row is copied, or
// conflicts and restarts against the new descriptor): nothing is lost,
// but writes to the table wait for the change rather than run beside it.
// A failure or ROLLBACK leaves the table as it was.
//
// Refused with 0A000, nothing changed: ALTER PRIMARY KEY of a table other
// tables' foreign keys reference (their references name its key), and SET
// (bucket_count) on an index that is not hash-sharded.

// optAlterPK marks an ADD PRIMARY KEY written as ALTER PRIMARY KEY (the
// parser's dialect contract, sql/parser/dialect_alterpk.go).
const optAlterPK = "cairn_alter_primary_key"

// isAlterPK reports whether an ADD PRIMARY KEY constraint is an ALTER
// PRIMARY KEY, and returns its options without the marker.
func isAlterPK(con *pg_query.Constraint) (bool, []*pg_query.Node) {
	var rest []*pg_query.Node
	found := false
	for _, o := range con.Options {
		if d := o.GetDefElem(); d != nil && d.Defnamespace == "" && d.Defname == optAlterPK {
			found = true
			continue
		}
		rest = append(rest, o)
	}
	return found, rest
}

// alterPrimaryKey replaces cur's primary key by con's columns, hash-sharded
// when the options say so. The old key's columns keep a UNIQUE index
// (CockroachDB's behaviour: what was unique stays enforced), hash-sharded
// like the old key, unless they are the new key's columns or the old key
// was the hidden rowid, which is dropped.
func (e *executor) alterPrimaryKey(ctx context.Context, cur *catalog.Table, con *pg_query.Constraint, opts []*pg_query.Node, schema *catalog.Schema, relNames *relNameSet) error {
	if len(cur.ReferencedBy) > 0 {
		return pgerror.New(pgerrcode.FeatureNotSupported, "cannot change the primary key of %q: foreign keys of other tables reference it", cur.Name).
			WithHint("Drop the foreign keys, change the primary key, then add them again.")
	}
	if len(con.Including) > 0 {
		return notSupported("INCLUDE on a primary key is not supported yet")
	}
	buckets, opts, err := e.takeHashBuckets(opts, optPKHashBuckets)
	if err != nil {
		return err
	}
	if err := checkConstraintParams(opts); err != nil {
		return err
	}
	b := &tableBuilder{e: e, schema: schema, relNames: relNames, t: cloneTable(cur), hasPK: true}
	t := b.t
	ids, err := b.columnIDs(nameList(con.Keys))
	if err != nil {
		return err
	}
	var keyPos []int
	for _, id := range ids {
		c := t.ColumnByID(id)
		if c.Hidden {
			return pgerror.New(pgerrcode.InvalidColumnReference, "column %q cannot be part of a primary key: it is hidden", c.Name)
		}
		if err := indexableType(c); err != nil {
			return err
		}
		c.Nullable = false
		keyPos = append(keyPos, slices.IndexFunc(cur.Columns, func(x catalog.Column) bool { return x.ID == id }))
	}
	old := cur.PrimaryIndex
	oldUser := slices.Clone(old.UserKeyColumnIDs())
	name := old.Name
	if con.Conname != "" {
		name = truncateIdent(con.Conname)
	}
	if slices.Equal(oldUser, ids) && e.onlineRekeyOK(cur) {
		// Only the hashing changes: rows and uniqueness stay as they are,
		// so the change runs online (rekey.go).
		build := func(cur *catalog.Table) (*catalog.Table, error) {
			return e.rehashPrimaryKey(cur, name, ids, buckets)
		}
		t, err := build(cur)
		if err != nil || t == nil {
			return err
		}
		return e.rekeyOnline(ctx, cur, build)
	}
	t.PrimaryIndex = catalog.Index{ID: catalog.PrimaryIndexID, Name: name, Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
		KeyColumnIDs: ids, KeyDirections: make([]rowenc.Order, len(ids))}
	if buckets > 0 {
		if _, _, err := e.shardIndex(t, &t.PrimaryIndex, buckets); err != nil {
			return err
		}
	}
	_, implicit := cur.RowIDKey()
	switch {
	case implicit:
		// The hidden rowid key (alone, or after a distributed table's
		// distribution column) was no declared constraint: rowid goes.
		if err := t.DropColumn(RowIDColumn); err != nil {
			return err
		}
	case !slices.Equal(oldUser, ids):
		var names []string
		for _, id := range oldUser {
			names = append(names, t.ColumnByID(id).Name)
		}
		ix := catalog.Index{ID: t.NextIndexID, Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
			Name:         chooseName(t.Name, nameAddition(indexColumnNames(names)), "key", b.nameTaken),
			KeyColumnIDs: oldUser, KeyDirections: slices.Clone(old.KeyDirections[len(old.KeyDirections)-len(oldUser):])}
		b.relNames.claim(ix.Name)
		if old.HashSharding != nil {
			if _, _, err := e.shardIndex(t, &ix, old.HashSharding.Buckets); err != nil {
				return err
			}
		}
		if err := e.placeIndex(ctx, t, &ix); err != nil {
			return err
		}
		t.NextIndexID++
		t.Indexes = append(t.Indexes, ix)
	}
	dropUnusedShardColumns(t)
	if err := b.relNames.err; err != nil {
		return err
	}
	if err := keepDistributionColumn(cur, t); err != nil {
		return err
	}
	return e.rewriteByColumns(ctx, cur, t, func(r []types.Datum) error {
		for i, p := range keyPos {
			if p >= len(r) || r[p] == nil || types.IsNull(r[p]) {
				return pgerror.New(pgerrcode.NotNullViolation, "column %q of relation %q contains null values", t.ColumnByID(ids[i]).Name, t.Name)
			}
		}
		return nil
	})
}

// rebucketIndex is ALTER INDEX name SET (bucket_count = n).
func (e *executor) rebucketIndex(ctx context.Context, cur *catalog.Table, name string, d *pg_query.DefElem) error {
	n, err := e.bucketCount(d)
	if err != nil {
		return err
	}
	build := func(cur *catalog.Table) (*catalog.Table, error) {
		t := cloneTable(cur)
		idx := t.IndexByName(name)
		if idx == nil {
			return nil, pgerror.New(pgerrcode.UndefinedObject, "index %q does not exist", name)
		}
		if idx.HashSharding == nil {
			return nil, pgerror.New(pgerrcode.FeatureNotSupported, "index %q is not hash sharded: its bucket count cannot be set", name).
				WithHint("Create a hash-sharded index (USING HASH WITH (bucket_count = n)) instead.")
		}
		if idx.HashSharding.Buckets == n {
			return nil, nil
		}
		idx.KeyColumnIDs = slices.Clone(idx.KeyColumnIDs[1:])
		idx.KeyDirections = slices.Clone(idx.KeyDirections[1:])
		idx.HashSharding = nil
		if _, _, err := e.shardIndex(t, idx, n); err != nil {
			return nil, err
		}
		dropUnusedShardColumns(t)
		return t, nil
	}
	// Errors (and a count that changes nothing) before any job starts.
	t, err := build(cur)
	if err != nil || t == nil {
		return err
	}
	if e.onlineRekeyOK(cur) {
		return e.rekeyOnline(ctx, cur, build)
	}
	return e.rewriteByColumns(ctx, cur, t, nil)
}

// rewriteByColumns rewrites cur's rows into newT (see rewrite): a column
// newT keeps (by ID) keeps its value; a new stored generated column (a new
// shard column) is computed from the old row. check, if set, sees each
// old row first.
func (e *executor) rewriteByColumns(ctx context.Context, cur, newT *catalog.Table, check func(old []types.Datum) error) error {
	conv, err := e.rowConv(cur, newT)
	if err != nil {
		return err
	}
	return e.rewrite(ctx, cur, newT, func(r []types.Datum) ([]types.Datum, error) {
		if check != nil {
			if err := check(r); err != nil {
				return nil, err
			}
		}
		return conv(r)
	})
}

// rowConv converts rows of cur to rows of newT (catalog.RowConv), new
// generated columns computed from the old row.
func (e *executor) rowConv(cur, newT *catalog.Table) (func([]types.Datum) ([]types.Datum, error), error) {
	ectx := e.newEvalContext()
	return catalog.RowConv(cur, newT, func(c *catalog.Column) (func([]types.Datum) (types.Datum, error), error) {
		ex, err := e.buildOverTable(cur, c.ComputedExpr, nil)
		if err != nil {
			return nil, err
		}
		if ex, err = sem.CoerceToAssign(ex, c.Type, c.Name); err != nil {
			return nil, err
		}
		ev, err := compileRow(cur, ex)
		if err != nil {
			return nil, err
		}
		return func(r []types.Datum) (types.Datum, error) { return ev(ectx, r) }, nil
	})
}

// keepDistributionColumn keeps a distributed table hashed on its
// distribution column across a change of its primary key (t the new
// descriptor of cur): the column must stay in the key (42P16, as Citus
// requires of every unique constraint), and t hashes on it wherever it
// now is (catalog.Partitioning.HashColumn), so rows keep their buckets
// and the table its shards and colocation.
func keepDistributionColumn(cur, t *catalog.Table) error {
	dist := cur.HashColumnIDs()
	if !cur.Partitioning.Distributed || len(dist) != 1 {
		return nil
	}
	keys := t.PrimaryIndex.KeyColumnIDs
	if !slices.Contains(keys, dist[0]) {
		return pgerror.New(pgerrcode.InvalidTableDefinition, "cannot change the primary key of distributed table %q to leave out its distribution column %q",
			cur.Name, cur.ColumnByID(dist[0]).Name)
	}
	t.Partitioning.HashColumn = 0
	if keys[0] != dist[0] {
		t.Partitioning.HashColumn = dist[0]
	}
	return nil
}
