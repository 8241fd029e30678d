package ddl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/bulkclean"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// backfillPage is how many KVs one scan of a backfill reads at a time, and
// about how many index entries one write batch carries.
const backfillPage = 1000

// bulkBackfillBatch is how many entries one bulk write of a backfill into
// fresh storage carries: each is one synced write per tablet.
const bulkBackfillBatch = 10000

func (e *executor) createIndex(ctx context.Context, n *pg_query.IndexStmt) error {
	d, schema, err := e.lookupRelation(ctx, n.Relation)
	if err != nil {
		return err
	}
	table, ok := d.(*catalog.Table)
	if !ok {
		return pgerror.New(pgerrcode.WrongObjectType, "cannot create index on relation %q", d.DescName()).
			WithDetail("This operation is not supported for %ss.", d.DescKind())
	}
	if err := e.checkOwner(ctx, table); err != nil {
		return err
	}
	gin := false
	switch am := strings.ToLower(n.AccessMethod); am {
	case "", "btree":
	case "gin":
		// PostgreSQL's DefineIndex checks these before the columns.
		if n.Unique {
			return notSupported("access method \"gin\" does not support unique indexes")
		}
		if len(n.IndexIncludingParams) > 0 {
			return notSupported("access method \"gin\" does not support included columns")
		}
		if len(n.IndexParams) > 1 {
			return notSupported("multicolumn gin indexes are not supported yet")
		}
		gin = true
	case "hash", "gist", "spgist", "brin":
		return notSupported("access method %q is not supported yet", am)
	default:
		return pgerror.New(pgerrcode.UndefinedObject, "access method %q does not exist", am)
	}
	if n.NullsNotDistinct {
		return notSupported("NULLS NOT DISTINCT is not supported yet")
	}
	if n.Concurrent && e.x.InBlock {
		return pgerror.New(pgerrcode.ActiveSQLTransaction, "CREATE INDEX CONCURRENTLY cannot run inside a transaction block")
	}
	buckets, opts, err := e.takeHashBuckets(n.Options, optHashBuckets)
	if err != nil {
		return err
	}
	if err := checkStorageParams(opts, true); err != nil {
		return err
	}
	relNames, err := e.loadRelNames(ctx, schema.ID)
	if err != nil {
		return err
	}
	b := &tableBuilder{e: e, schema: schema, relNames: relNames, t: cloneTable(table), hasPK: true}
	t := b.t
	idx := catalog.Index{ID: t.NextIndexID, Unique: n.Unique, Kind: catalog.IndexBTree, State: catalog.IndexPublic}
	var colNames []string
	// exprCols are the hidden columns holding the index's expressions,
	// added to the table for this index (exprindex.go).
	var exprCols []rowenc.ColumnID
	for _, p := range n.IndexParams {
		el := p.GetIndexElem()
		if el == nil {
			return notSupported("index element %s is not supported yet", stmtName(p))
		}
		if gin {
			if el.Expr != nil || el.Name == "" {
				return notSupported("gin indexes on expressions are not supported yet")
			}
			c := t.ColumnByName(el.Name)
			if c == nil {
				return pgerror.New(pgerrcode.UndefinedColumn, "column %q does not exist", el.Name)
			}
			oc, err := ginOpclass(el, c)
			if err != nil {
				return err
			}
			idx.Kind, idx.Opclass = catalog.IndexGIN, oc
			idx.KeyColumnIDs = append(idx.KeyColumnIDs, c.ID)
			idx.KeyDirections = append(idx.KeyDirections, rowenc.Asc)
			colNames = append(colNames, c.Name)
			continue
		}
		if el.Expr != nil || el.Name == "" {
			id, name, err := e.addExprColumn(t, el.Expr)
			if err != nil {
				return err
			}
			exprCols = append(exprCols, id)
			el = &pg_query.IndexElem{Name: t.ColumnByID(id).Name, Opclass: el.Opclass, Collation: el.Collation,
				Ordering: el.Ordering, NullsOrdering: el.NullsOrdering}
			order, err := keyOrder(el)
			if err != nil {
				return err
			}
			idx.KeyColumnIDs = append(idx.KeyColumnIDs, id)
			idx.KeyDirections = append(idx.KeyDirections, order)
			colNames = append(colNames, name)
			continue
		}
		c := t.ColumnByName(el.Name)
		if c == nil {
			return pgerror.New(pgerrcode.UndefinedColumn, "column %q does not exist", el.Name)
		}
		if err := indexableType(c); err != nil {
			return err
		}
		if err := checkOpclass(el, c); err != nil {
			return err
		}
		if len(el.Collation) > 0 {
			if coll := nameList(el.Collation); coll[len(coll)-1] != "C" && coll[len(coll)-1] != "POSIX" && coll[len(coll)-1] != "default" {
				return notSupported("collation %q is not supported yet", coll[len(coll)-1])
			}
		}
		order, err := keyOrder(el)
		if err != nil {
			return err
		}
		// PostgreSQL allows a column twice in one index; Cairn's index
		// key cannot hold it twice.
		if slices.Contains(idx.KeyColumnIDs, c.ID) {
			return notSupported("column %q appears twice in the index", c.Name)
		}
		idx.KeyColumnIDs = append(idx.KeyColumnIDs, c.ID)
		idx.KeyDirections = append(idx.KeyDirections, order)
		colNames = append(colNames, c.Name)
	}
	for _, p := range n.IndexIncludingParams {
		el := p.GetIndexElem()
		if el == nil || el.Expr != nil {
			return pgerror.New(pgerrcode.FeatureNotSupported, "expressions are not supported in included columns")
		}
		c := t.ColumnByName(el.Name)
		if c == nil {
			return pgerror.New(pgerrcode.UndefinedColumn, "column %q does not exist", el.Name)
		}
		if !slices.Contains(idx.KeyColumnIDs, c.ID) && !slices.Contains(idx.StoreColumnIDs, c.ID) {
			idx.StoreColumnIDs = append(idx.StoreColumnIDs, c.ID)
		}
		colNames = append(colNames, c.Name)
	}
	var pred sem.Expr
	if n.WhereClause != nil {
		scope := &colScope{table: t.Name, cols: t.Columns}
		bc := sem.BuildContext{Scope: scope, Types: e.types(), Clause: "index predicate", Position: e.stmt.Position}
		pred, err = sem.Build(bc, n.WhereClause, types.Bool)
		if err != nil {
			return err
		}
		if len(sem.Aggregates(pred)) > 0 {
			return pgerror.New(pgerrcode.GroupingError, "aggregate functions are not allowed in index predicates")
		}
		if volatile(pred) {
			return pgerror.New(pgerrcode.InvalidObjectDefinition, "functions in index predicate must be marked IMMUTABLE")
		}
		if idx.Predicate, err = exprText(pred, n.WhereClause); err != nil {
			return err
		}
	}
	name := truncateIdent(n.Idxname)
	if name == "" {
		name = chooseName(t.Name, nameAddition(indexColumnNames(colNames)), "idx", b.nameTaken)
	} else if b.nameTaken(name) {
		if n.IfNotExists {
			e.notice(pgerrcode.DuplicateTable, fmt.Sprintf("relation %q already exists, skipping", name))
			return nil
		}
		return pgerror.New(pgerrcode.DuplicateTable, "relation %q already exists", name)
	}
	idx.Name = name
	// fill are the new stored generated columns whose values existing
	// rows need: expression columns, a new shard column.
	fill := exprCols
	if buckets > 0 {
		shard, fresh, err := e.shardIndex(t, &idx, buckets)
		if err != nil {
			return err
		}
		if fresh {
			fill = append(slices.Clone(fill), shard)
		}
	}
	if len(fill) == 0 && e.onlineIndexOK() {
		// Online, as a job (index_job.go); it places the index and gives
		// it storage in its own first transaction.
		if err := b.relNames.err; err != nil {
			return err
		}
		if table.Move != nil {
			return catalog.ErrMoving(table)
		}
		return e.createIndexOnline(ctx, t.ID, idx, n.Concurrent)
	}
	if err := e.placeIndex(ctx, t, &idx); err != nil {
		return err
	}
	// Fresh storage, so the backfill can write committed entries: the index
	// is reachable only through the descriptor version this transaction
	// writes (see backfill).
	if idx.StorageID, err = catalog.AllocateStorageID(ctx, e.x.Txn.DB()); err != nil {
		return err
	}
	t.NextIndexID++
	if len(fill) > 0 {
		// Store the expression and shard columns' values in every row
		// first; the index backfill then reads them as any column.
		if err := e.fillExprColumns(ctx, table, t, fill); err != nil {
			return err
		}
		fresh, err := e.reread(ctx, t.ID)
		if err != nil {
			return err
		}
		t = fresh
	}
	t.Indexes = append(t.Indexes, idx)
	if err := b.relNames.err; err != nil {
		return err
	}
	if err := e.x.Writer.Update(ctx, t); err != nil {
		return err
	}
	if err := e.refreshBlocksZone(ctx, t, &idx); err != nil {
		return err
	}
	if err := e.splitShards(ctx, t, idx.ID); err != nil {
		return err
	}
	return e.backfill(ctx, t, []catalog.IndexID{idx.ID}, true)
}

// placeIndex decides where a new secondary index lives, as Writer.Create
// does for a new table's indexes (catalog.fillTableDefaults): local to the
// table's group when the table is colocated or distributed, else global in
// a group of its own.
func (e *executor) placeIndex(ctx context.Context, t *catalog.Table, idx *catalog.Index) error {
	if idx.Kind == "" {
		idx.Kind = catalog.IndexBTree
	}
	if idx.State == "" {
		idx.State = catalog.IndexPublic
	}
	if t.Colocated || t.Partitioning.Distributed && !idx.Unique {
		// A distributed table's unique index is global: one place
		// enforces its keys across every bucket. A GIN index is local,
		// its entries grouped in blocks of buckets, the table's shards
		// (ginBlocks), so a token's entries are one span per shard.
		idx.Placement = catalog.IndexLocal
		idx.Blocks = ginBlocks(t, idx.Kind)
		return nil
	}
	idx.Placement = catalog.IndexGlobal
	g, err := e.x.Writer.AllocateID(ctx)
	if err != nil {
		return err
	}
	idx.GroupID = uint64(g)
	return nil
}

// ginBlocks is the block count (catalog.Index.Blocks) of a local index
// of kind on t: for a GIN index of a hash-partitioned table, its shard
// count, so each block is a shard as splitTable first cut them (and
// the group's zone keeps later splits between blocks, writeZones); 0
// for every other index.
func ginBlocks(t *catalog.Table, kind catalog.IndexKind) int {
	if kind != catalog.IndexGIN || t.Colocated || t.Partitioning.Kind != catalog.PartitionHash {
		return 0
	}
	return max(1, min(t.Partitioning.InitialTablets, rowenc.NumBuckets))
}

// keyOrder maps ASC/DESC and NULLS FIRST/LAST to a key order.
func keyOrder(el *pg_query.IndexElem) (rowenc.Order, error) {
	desc := el.Ordering == pg_query.SortByDir_SORTBY_DESC
	if el.Ordering == pg_query.SortByDir_SORTBY_USING {
		return 0, notSupported("USING in an index column is not supported")
	}
	switch el.NullsOrdering {
	case pg_query.SortByNulls_SORTBY_NULLS_FIRST:
		if desc {
			return rowenc.Desc, nil
		}
		return rowenc.AscNullsFirst, nil
	case pg_query.SortByNulls_SORTBY_NULLS_LAST:
		if desc {
			return rowenc.DescNullsLast, nil
		}
		return rowenc.Asc, nil
	}
	if desc {
		return rowenc.Desc, nil
	}
	return rowenc.Asc, nil
}

// checkOpclass accepts btree operator classes (they change nothing: Cairn
// keys order text bytewise, which is what the pattern_ops classes ask
// for), and refuses YugabyteDB's HASH column marker and unknown names.
func checkOpclass(el *pg_query.IndexElem, c *catalog.Column) error {
	if len(el.Opclass) == 0 {
		return nil
	}
	names := nameList(el.Opclass)
	oc := strings.ToLower(names[len(names)-1])
	switch {
	case oc == "hash":
		return notSupported("hash-partitioned index columns (HASH) are not supported yet")
	case oc == "asc" || oc == "desc":
		return nil
	case strings.HasSuffix(oc, "_ops"):
		return nil
	}
	return pgerror.New(pgerrcode.UndefinedObject, "operator class %q does not exist for access method \"btree\"", oc)
}

// ginOpclass resolves a GIN index column's operator class as PostgreSQL
// does: the type's default when none is named (jsonb_ops for jsonb,
// array_ops for arrays), else the named one if it accepts the type.
func ginOpclass(el *pg_query.IndexElem, c *catalog.Column) (string, error) {
	if el.Ordering != pg_query.SortByDir_SORTBY_DEFAULT {
		return "", notSupported("access method \"gin\" does not support ASC/DESC options")
	}
	if el.NullsOrdering != pg_query.SortByNulls_SORTBY_NULLS_DEFAULT {
		return "", notSupported("access method \"gin\" does not support NULLS FIRST/LAST options")
	}
	if len(el.Collation) > 0 {
		return "", notSupported("collations are not supported by type %s", c.Type.Name())
	}
	var def string
	switch {
	case c.Type.Family == types.JSONBFamily:
		def = rowenc.JSONBOps
	case c.Type.Family == types.ArrayFamily:
		def = rowenc.ArrayOps
	}
	oc := def
	if len(el.Opclass) > 0 {
		names := nameList(el.Opclass)
		oc = strings.ToLower(names[len(names)-1])
		switch oc {
		case rowenc.JSONBOps, rowenc.JSONBPathOps, rowenc.ArrayOps:
		default:
			return "", pgerror.New(pgerrcode.UndefinedObject, "operator class %q does not exist for access method \"gin\"", oc)
		}
		if oc != def && !(oc == rowenc.JSONBPathOps && def == rowenc.JSONBOps) {
			return "", pgerror.New(pgerrcode.DatatypeMismatch, "operator class %q does not accept data type %s", oc, c.Type.Name())
		}
	}
	if oc == "" {
		return "", pgerror.New(pgerrcode.UndefinedObject, "data type %s has no default operator class for access method \"gin\"", c.Type.Name()).
			WithHint("You must specify an operator class for the index or define a default operator class for the data type.")
	}
	if oc == rowenc.ArrayOps {
		if f := c.Type.Elem.Family; f == types.JSONBFamily || f == types.JSONTextFamily {
			return "", notSupported("gin indexes on arrays of %s are not supported yet", c.Type.Elem.Name())
		}
	}
	return oc, nil
}

// backfill writes the entries of the given (new) indexes of t for every
// row t holds, as the statement's transaction reads them: the index is
// complete when the transaction commits. A duplicate in a unique index
// fails the statement with 23505, as PostgreSQL's index build does.
//
// fresh says the indexes have storage of their own that this statement
// allocated (catalog.AllocateStorageID) and that only the descriptor
// version this transaction wrote names. Their entries are then written as
// committed values (kv.Txn.RunBulk), not intents: nobody else can read
// them before the transaction commits, a rolled-back CREATE INDEX leaves
// them unreachable (and sql/bulkclean clears them), and there is nothing to resolve at commit (the
// uniqueness check is the BulkPut's MustNotExist). Otherwise they are
// transactional writes, as ALTER TABLE's new constraints' indexes are.
//
// Concurrent writers are ordered against the build exactly as on the
// transactional path: the build's scan reads the table in the
// transaction, and a writer sees the new index only once it committed.
func (e *executor) backfill(ctx context.Context, t *catalog.Table, ids []catalog.IndexID, fresh bool) error {
	if len(ids) == 0 {
		return nil
	}
	layout, err := t.Layout()
	if err != nil {
		return err
	}
	type target struct {
		idx  *rowenc.IndexLayout
		pred sem.Evaluator
	}
	var targets []target
	for _, id := range ids {
		il := layout.Index(uint32(id))
		if il == nil {
			return fmt.Errorf("ddl: index %d of table %q missing from its layout", id, t.Name)
		}
		tg := target{idx: il}
		if p := t.IndexByID(id).Predicate; p != "" {
			if tg.pred, err = e.compileOverTable(t, p); err != nil {
				return err
			}
		}
		targets = append(targets, tg)
	}
	ectx := &sem.EvalContext{}
	var batch *kv.Batch
	var ents []rowenc.IndexEntry
	run, limit := e.x.Txn.Run, backfillPage
	if fresh {
		run, limit = e.x.Txn.RunBulk, bulkBackfillBatch
		// A failed build's storage is cleared (sql/bulkclean).
		var storage []uint32
		for _, id := range ids {
			sid := t.IndexByID(id).StorageID
			if sid == 0 {
				sid = uint32(id)
			}
			storage = append(storage, sid)
		}
		if err := bulkclean.Record(ctx, e.x.Txn, t, storage); err != nil {
			return err
		}
	}
	flush := func() error {
		if batch == nil || batch.Len() == 0 {
			return nil
		}
		err := run(ctx, batch)
		batch = nil
		if err != nil {
			return uniqueBuildError(layout.ConvertWriteError(err))
		}
		return nil
	}
	err = e.scanRows(ctx, t, layout, func(row []types.Datum) error {
		for _, tg := range targets {
			if tg.pred != nil {
				v, err := tg.pred(ectx, row)
				if err != nil {
					return err
				}
				if b, ok := v.(types.DBool); !ok || !bool(b) {
					continue
				}
			}
			var err error
			if ents, err = layout.EncodeIndexEntries(ents[:0], tg.idx, row); err != nil {
				return err
			}
			if batch == nil {
				batch = &kv.Batch{}
			}
			for _, ent := range ents {
				switch {
				case fresh:
					batch.BulkPut(ent.Key, ent.Value, ent.Unique)
				case ent.Unique:
					batch.CPut(ent.Key, ent.Value, nil, false)
				default:
					batch.Put(ent.Key, ent.Value)
				}
			}
		}
		if batch != nil && batch.Len() >= limit {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// uniqueBuildError rewords a duplicate found while building a unique
// index as PostgreSQL's index build reports it.
func uniqueBuildError(err error) error {
	pe := pgerror.Flatten(err)
	if pe == nil || pe.Code != pgerrcode.UniqueViolation {
		return err
	}
	name := pe.Message
	if i := strings.Index(name, "\""); i >= 0 {
		name = strings.TrimSuffix(name[i+1:], "\"")
	}
	out := pgerror.New(pgerrcode.UniqueViolation, "could not create unique index %q", name)
	if pe.Detail != "" {
		out = out.WithDetail("%s", strings.Replace(pe.Detail, "already exists.", "is duplicated.", 1))
	}
	return out
}

// scanRows reads every row of t (all columns, t.Columns order) in the
// statement's transaction, a page at a time.
//
// It reads at or above every write the transaction made so far
// (kv.Txn.ReadAtWriteTimestamp), in particular above its write of t's
// descriptor when that came first (CREATE INDEX, ALTER TABLE's rewrites):
// a concurrent writer that shaped its rows by the old descriptor and
// passed its commit-time validation (kv/txn_validate.go) did so before
// that descriptor write, which its validation pushed above its own
// commit timestamp, so the scan sees its rows.
func (e *executor) scanRows(ctx context.Context, t *catalog.Table, layout *rowenc.TableLayout, emit func(row []types.Datum) error) error {
	if err := e.x.Txn.ReadAtWriteTimestamp(ctx); err != nil {
		return fmt.Errorf("scanning table %q: %w", t.Name, err)
	}
	f, err := rowenc.NewRowFetcher(layout, &layout.Primary, nil)
	if err != nil {
		return err
	}
	span := layout.IndexSpan(&layout.Primary)
	start := span.Key
	for {
		kvs, err := e.x.Txn.Scan(ctx, start, span.EndKey, backfillPage)
		if err != nil {
			return fmt.Errorf("scanning table %q: %w", t.Name, err)
		}
		if err := f.Add(kvs, emit); err != nil {
			return err
		}
		if len(kvs) < backfillPage {
			break
		}
		start = keys.Next(kvs[len(kvs)-1].Key)
	}
	return f.Finish(emit)
}

// compileOverTable builds a boolean expression stored as text (a CHECK or
// an index predicate) over t's columns and compiles it for rows in
// t.Columns order.
func (e *executor) compileOverTable(t *catalog.Table, text string) (sem.Evaluator, error) {
	ex, err := e.buildOverTable(t, text, types.Bool)
	if err != nil {
		return nil, err
	}
	return compileRow(t, ex)
}

func compileRow(t *catalog.Table, ex sem.Expr) (sem.Evaluator, error) {
	cols := make(map[sem.ColumnID]int, len(t.Columns))
	for i, c := range t.Columns {
		cols[sem.ColumnID(c.ID)] = i
	}
	return sem.Compile(ex, cols)
}

// buildOverTable parses and builds stored expression text over t's
// columns (want nil: any type).
func (e *executor) buildOverTable(t *catalog.Table, text string, want *types.T) (sem.Expr, error) {
	node, err := parseExpr(text)
	if err != nil {
		return nil, err
	}
	scope := &colScope{table: t.Name, cols: t.Columns}
	return sem.Build(sem.BuildContext{Scope: scope, Types: e.types()}, node, want)
}

// parseExpr parses one stored expression.
func parseExpr(text string) (*pg_query.Node, error) {
	res, err := pg_query.Parse("SELECT " + text)
	if err != nil {
		return nil, fmt.Errorf("ddl: parsing stored expression %q: %w", text, err)
	}
	sel := res.Stmts[0].Stmt.GetSelectStmt()
	return sel.TargetList[0].GetResTarget().Val, nil
}

// deleteIndexData clears an index's entries (DROP INDEX, the indexes of a
// dropped column). A local index of a hash-partitioned table spreads over
// every bucket of the table's group, next to the rows: its entries are
// left in place, unreachable since index IDs are never reused.
func (e *executor) deleteIndexData(ctx context.Context, layout *rowenc.TableLayout, id catalog.IndexID) error {
	il := layout.Index(uint32(id))
	if il == nil {
		return nil
	}
	if il.Local && layout.HashColumns > 0 {
		return nil
	}
	span := layout.IndexSpan(il)
	if _, err := e.x.Txn.DelRange(ctx, span.Key, span.EndKey); err != nil {
		return fmt.Errorf("clearing index %q: %w", il.Name, err)
	}
	return nil
}
