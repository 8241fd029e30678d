package ddl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/bulkclean"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/types"
)

// ALTER TABLE runs its subcommands one after the other, each reading the
// table as the previous one left it and storing it before the next. Data
// changes happen inside the statement's transaction (PostgreSQL's
// migrations tools run ALTER TABLE in a transaction and expect ROLLBACK to
// undo it): a new column with a volatile default, a type change and a new
// primary key rewrite every row; a new index is backfilled; a new CHECK,
// FOREIGN KEY or NOT NULL is validated against the existing rows.
//
// A rewrite writes the rows into fresh storage as committed values and
// moves the table there in its new descriptor version (rewrite): it
// streams the old rows, and only the new descriptor version names the new
// storage, so the statement's transaction stays atomic without an intent
// per row.

func alterTag(t pg_query.ObjectType) string {
	switch t {
	case pg_query.ObjectType_OBJECT_INDEX:
		return "ALTER INDEX"
	case pg_query.ObjectType_OBJECT_SEQUENCE:
		return "ALTER SEQUENCE"
	case pg_query.ObjectType_OBJECT_VIEW:
		return "ALTER VIEW"
	case pg_query.ObjectType_OBJECT_SCHEMA:
		return "ALTER SCHEMA"
	case pg_query.ObjectType_OBJECT_DATABASE:
		return "ALTER DATABASE"
	case pg_query.ObjectType_OBJECT_ROLE:
		return "ALTER ROLE"
	}
	return "ALTER TABLE"
}

func (e *executor) alterTable(ctx context.Context, n *pg_query.AlterTableStmt) (string, error) {
	tag := alterTag(n.Objtype)
	switch n.Objtype {
	case pg_query.ObjectType_OBJECT_TABLE:
	case pg_query.ObjectType_OBJECT_INDEX, pg_query.ObjectType_OBJECT_SEQUENCE, pg_query.ObjectType_OBJECT_VIEW:
		return tag, e.alterOther(ctx, n)
	default:
		return tag, notSupported("%s is not supported yet", tag)
	}
	d, _, err := e.lookupRelation(ctx, n.Relation)
	if err != nil {
		if n.MissingOk && pgerror.Code(err) == pgerrcode.UndefinedTable {
			e.notice("00000", fmt.Sprintf("relation %q does not exist, skipping", n.Relation.Relname))
			return tag, nil
		}
		return tag, err
	}
	if err := e.checkOwner(ctx, d); err != nil {
		return tag, err
	}
	if _, ok := d.(*catalog.Table); !ok {
		// PostgreSQL lets ALTER TABLE change the owner (and options) of
		// any relation: pg_dump writes ALTER TABLE s OWNER TO for
		// sequences and views.
		for _, cn := range n.Cmds {
			switch cn.GetAlterTableCmd().GetSubtype() {
			case pg_query.AlterTableType_AT_SetRelOptions:
				if hasZoneOptions(cn.GetAlterTableCmd().GetDef().GetList().GetItems()) {
					return tag, pgerror.New(pgerrcode.WrongObjectType, "%q is not a table: only databases and tables have zones", d.DescName())
				}
			case pg_query.AlterTableType_AT_ChangeOwner, pg_query.AlterTableType_AT_ResetRelOptions:
			default:
				return tag, pgerror.New(pgerrcode.WrongObjectType, "%q is not a table", d.DescName())
			}
		}
		for _, cn := range n.Cmds {
			if cmd := cn.GetAlterTableCmd(); cmd.GetSubtype() == pg_query.AlterTableType_AT_ChangeOwner {
				fresh, err := e.x.Writer.ByID(ctx, d.DescID())
				if err != nil {
					return tag, err
				}
				if err := e.changeOwner(ctx, fresh, cmd.Newowner); err != nil {
					return tag, err
				}
			}
		}
		return tag, nil
	}
	e.singleAlter = len(n.Cmds) == 1
	for _, cn := range n.Cmds {
		cmd := cn.GetAlterTableCmd()
		if cmd == nil {
			continue
		}
		// Re-read: the previous subcommand may have changed the table.
		cur, err := e.x.Writer.TableByID(ctx, d.DescID())
		if err != nil {
			return tag, err
		}
		if err := e.alterCmd(ctx, cur, cmd); err != nil {
			return tag, err
		}
	}
	return tag, nil
}

// alterOther handles the ALTER INDEX / SEQUENCE / VIEW subcommands that are
// parsed as AlterTableStmt (OWNER TO, SET (...)).
func (e *executor) alterOther(ctx context.Context, n *pg_query.AlterTableStmt) error {
	// ALTER INDEX ... SET (bucket_count = n) alone may run as a job
	// (rekey.go).
	e.singleAlter = len(n.Cmds) == 1
	for _, cn := range n.Cmds {
		cmd := cn.GetAlterTableCmd()
		switch cmd.GetSubtype() {
		case pg_query.AlterTableType_AT_ChangeOwner:
			if n.Objtype == pg_query.ObjectType_OBJECT_INDEX {
				// PostgreSQL: an index's owner is its table's; the
				// command is accepted and changes nothing.
				e.notice("01000", "cannot change owner of index \""+n.Relation.Relname+"\"")
				continue
			}
			d, _, err := e.lookupRelation(ctx, n.Relation)
			if err != nil {
				if n.MissingOk && pgerror.Code(err) == pgerrcode.UndefinedTable {
					e.notice("00000", fmt.Sprintf("relation %q does not exist, skipping", n.Relation.Relname))
					return nil
				}
				return err
			}
			if err := e.changeOwner(ctx, d, cmd.Newowner); err != nil {
				return err
			}
		case pg_query.AlterTableType_AT_SetRelOptions, pg_query.AlterTableType_AT_ResetRelOptions:
			// Storage options are not used, except the bucket count of a
			// hash-sharded index, which rewrites it (alterpk.go).
			for _, d := range defElems(cmd.Def.GetList().GetItems()) {
				if d.Defname != "bucket_count" && d.Defname != optHashBuckets {
					continue
				}
				if n.Objtype != pg_query.ObjectType_OBJECT_INDEX || cmd.Subtype == pg_query.AlterTableType_AT_ResetRelOptions {
					return notSupported("bucket_count can only be set on a hash-sharded index: ALTER INDEX name SET (bucket_count = n)")
				}
				t, idx, err := e.findIndex(ctx, n.Relation)
				if err != nil {
					return err
				}
				if idx == nil {
					if n.MissingOk {
						e.notice("00000", fmt.Sprintf("relation %q does not exist, skipping", n.Relation.Relname))
						return nil
					}
					return pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", n.Relation.Relname)
				}
				if err := e.rebucketIndex(ctx, t, idx.Name, d); err != nil {
					return err
				}
			}
		default:
			return notSupported("%s %s is not supported yet", alterTag(n.Objtype), strings.TrimPrefix(cmd.GetSubtype().String(), "AT_"))
		}
	}
	return nil
}

func (e *executor) alterCmd(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	switch cmd.Subtype {
	case pg_query.AlterTableType_AT_AddColumn:
		return e.addColumn(ctx, cur, cmd)
	case pg_query.AlterTableType_AT_DropColumn:
		return e.dropColumn(ctx, cur, cmd)
	case pg_query.AlterTableType_AT_ColumnDefault:
		return e.setDefault(ctx, cur, cmd)
	case pg_query.AlterTableType_AT_SetNotNull:
		return e.setNotNull(ctx, cur, cmd.Name)
	case pg_query.AlterTableType_AT_DropNotNull:
		return e.dropNotNull(ctx, cur, cmd.Name)
	case pg_query.AlterTableType_AT_AlterColumnType:
		return e.alterColumnType(ctx, cur, cmd)
	case pg_query.AlterTableType_AT_AddConstraint:
		return e.addTableConstraint(ctx, cur, cmd.Def.GetConstraint())
	case pg_query.AlterTableType_AT_DropConstraint:
		return e.dropConstraint(ctx, cur, cmd)
	case pg_query.AlterTableType_AT_ValidateConstraint:
		return e.validateConstraint(ctx, cur, cmd.Name)
	case pg_query.AlterTableType_AT_AddIdentity:
		return e.addIdentity(ctx, cur, cmd)
	case pg_query.AlterTableType_AT_DropIdentity:
		return e.dropIdentity(ctx, cur, cmd)
	case pg_query.AlterTableType_AT_ChangeOwner:
		return e.changeOwner(ctx, cur, cmd.Newowner)
	case pg_query.AlterTableType_AT_SetRelOptions:
		opts := cmd.Def.GetList().GetItems()
		zoned := hasZoneOptions(opts)
		if zoned {
			// The zone is written in the statement's transaction: a
			// move in the same command stays there too.
			e.singleAlter = false
		}
		rest, err := e.alterTableZone(ctx, cur, opts)
		if err != nil {
			return err
		}
		if zoned {
			// Re-read: the table's zone changed.
			if cur, err = e.x.Writer.TableByID(ctx, cur.ID); err != nil {
				return err
			}
		}
		rest, err = e.alterColocation(ctx, cur, rest)
		if err != nil {
			return err
		}
		if err := checkStorageParams(rest, false); err != nil {
			return err
		}
		if e.movedOnline {
			// The job moved the zone with the table; the statement's
			// transaction still sees the table where it was.
			return nil
		}
		// The zone, or the group it applies to, may have changed.
		return e.refreshTableZone(ctx, cur.ID, true)
	case pg_query.AlterTableType_AT_ResetRelOptions:
		return nil
	case pg_query.AlterTableType_AT_SetStatistics, pg_query.AlterTableType_AT_SetStorage, pg_query.AlterTableType_AT_SetCompression,
		pg_query.AlterTableType_AT_ClusterOn, pg_query.AlterTableType_AT_DropCluster, pg_query.AlterTableType_AT_ReplicaIdentity:
		// Planner statistics targets, TOAST storage and compression,
		// CLUSTER order and the replica identity tune machinery Cairn does
		// not have; pg_dump and ORMs emit them, so they are accepted and
		// change nothing (the column or index must still exist).
		if cmd.Name != "" && cmd.Subtype != pg_query.AlterTableType_AT_ClusterOn && cur.ColumnByName(cmd.Name) == nil {
			return pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", cmd.Name, cur.Name)
		}
		return nil
	}
	return notSupported("ALTER TABLE %s is not supported yet", strings.TrimPrefix(cmd.Subtype.String(), "AT_"))
}

// column returns the live column name of t (42703 otherwise).
func column(t *catalog.Table, name string) (*catalog.Column, error) {
	c := t.ColumnByName(name)
	if c == nil {
		return nil, pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", name, t.Name)
	}
	return c, nil
}

// ---- evaluation over rows ----

// evalCtx is the EvalContext of expressions DDL evaluates over rows
// (defaults of a new column, USING, CHECK validation).
type evalCtx struct {
	builtins.FixedContext
	seqs builtins.SequenceOps
}

func (c *evalCtx) Sequences() builtins.SequenceOps { return c.seqs }

func (e *executor) newEvalContext() *sem.EvalContext {
	now := time.Now()
	ec := &evalCtx{FixedContext: builtins.FixedContext{TypesCtx: e.types(), Txn: now, Stmt: now}}
	if e.x.DB != nil {
		ec.seqs = sequence.NewSession(e.x.DB, func(ctx context.Context, oid uint32) (*catalog.Sequence, error) {
			d, err := e.x.Writer.ByID(ctx, catalog.ID(oid))
			if err != nil {
				return nil, err
			}
			s, ok := d.(*catalog.Sequence)
			if !ok {
				return nil, pgerror.New(pgerrcode.WrongObjectType, "%q is not a sequence", d.DescName())
			}
			return s, nil
		})
	}
	return &sem.EvalContext{Fn: ec}
}

// readAll reads every row of t.
func (e *executor) readAll(ctx context.Context, t *catalog.Table) ([][]types.Datum, error) {
	l, err := t.Layout()
	if err != nil {
		return nil, err
	}
	var rows [][]types.Datum
	err = e.scanRows(ctx, t, l, func(r []types.Datum) error {
		rows = append(rows, slices.Clone(r))
		return nil
	})
	return rows, err
}

// rowWriter returns a RowWriter for t whose partial indexes evaluate their
// predicates.
func (e *executor) rowWriter(t *catalog.Table, l *rowenc.TableLayout) (*rowenc.RowWriter, error) {
	w := &rowenc.RowWriter{Table: l, PackedRows: e.x.PackedRows && t.RowFormat.Packed, PackedSizeLimit: e.x.PackedSizeLimit}
	preds := map[uint32]sem.Evaluator{}
	for _, idx := range t.Indexes {
		if idx.Predicate == "" {
			continue
		}
		ev, err := e.compileOverTable(t, idx.Predicate)
		if err != nil {
			return nil, err
		}
		preds[uint32(idx.ID)] = ev
	}
	ectx := &sem.EvalContext{}
	w.InPartialIndex = func(idx *rowenc.IndexLayout, row []types.Datum) (bool, error) {
		ev := preds[idx.ID]
		if ev == nil {
			return true, nil
		}
		v, err := ev(ectx, row)
		if err != nil {
			return false, err
		}
		b, ok := v.(types.DBool)
		return ok && bool(b), nil
	}
	return w, nil
}

// rewrite replaces every row of oldT by conv's row in newT's layout.
//
// The new rows go to fresh storage (catalog.AllocateStorageID for the
// primary index and every secondary index of newT, which is changed in
// place and stored as the next descriptor version) as committed values
// (kv.Txn.RunBulk), not intents: only the descriptor version this
// transaction writes names that storage, so nobody reads it before the
// transaction commits, and a failure or ROLLBACK leaves it unreachable,
// to be cleared once the transaction ended (sql/bulkclean).
// The old storage is left as it is, unreachable garbage once the
// transaction commits (as a failed bulk load's is): deleting it would cost
// an intent per KV, which is what this path avoids.
//
// The rows are read after that descriptor write and at or above it
// (scanRows), so a concurrent writer that used the old descriptor either
// committed below it (its rows are read here) or fails its commit-time
// validation and retries against the new one (kv/txn_validate.go). Old
// and new storage differ, so the scan streams: no row is read twice
// whatever its new key.
//
// Errors come in PostgreSQL's order: a row conv refuses (a NULL in a new
// NOT NULL column, a failed cast) is reported before a duplicate key found
// when the new indexes are written, which PostgreSQL finds only when it
// builds them after the rewrite; after a duplicate the scan goes on
// through conv without writing.
func (e *executor) rewrite(ctx context.Context, oldT, newT *catalog.Table, conv func(old []types.Datum) ([]types.Datum, error)) error {
	db := e.x.Txn.DB()
	for _, idx := range append([]*catalog.Index{&newT.PrimaryIndex}, indexPtrs(newT.Indexes)...) {
		sid, err := catalog.AllocateStorageID(ctx, db)
		if err != nil {
			return err
		}
		idx.StorageID = sid
	}
	if err := e.x.Writer.Update(ctx, newT); err != nil {
		return fmt.Errorf("moving table %q to fresh storage: %w", newT.Name, err)
	}
	// A failed rewrite's new storage is cleared (sql/bulkclean).
	var fresh []uint32
	for _, idx := range append([]*catalog.Index{&newT.PrimaryIndex}, indexPtrs(newT.Indexes)...) {
		fresh = append(fresh, idx.StorageID)
	}
	if err := bulkclean.Record(ctx, e.x.Txn, newT, fresh); err != nil {
		return err
	}
	// Hash-sharded indexes keep a tablet per bucket in their new storage.
	for _, idx := range append([]*catalog.Index{&newT.PrimaryIndex}, indexPtrs(newT.Indexes)...) {
		if err := e.splitShards(ctx, newT, idx.ID); err != nil {
			return err
		}
	}
	oldL, err := oldT.Layout()
	if err != nil {
		return err
	}
	newL, err := newT.Layout()
	if err != nil {
		return err
	}
	nw, err := e.rowWriter(newT, newL)
	if err != nil {
		return err
	}
	var (
		batch   = &kv.Batch{}
		bulkErr error
		dupErr  error
	)
	flush := func() error {
		if batch.Len() == 0 {
			return nil
		}
		err := e.x.Txn.RunBulk(ctx, batch)
		batch = &kv.Batch{}
		if err != nil {
			err = uniqueBuildError(newL.ConvertWriteError(err))
			if pgerror.Code(err) != pgerrcode.UniqueViolation {
				return err
			}
			dupErr = err
		}
		return nil
	}
	err = e.scanRows(ctx, oldT, oldL, func(r []types.Datum) error {
		nr, err := conv(r)
		if err != nil {
			return err
		}
		if dupErr != nil {
			return nil
		}
		if err := nw.Insert(kv.BulkWrites{Batch: batch, Err: &bulkErr}, nr); err != nil {
			return uniqueBuildError(newL.ConvertWriteError(err))
		}
		if bulkErr != nil {
			return bulkErr
		}
		if batch.Len() >= bulkBackfillBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if dupErr == nil {
		if err := flush(); err != nil {
			return err
		}
	}
	return dupErr
}

func indexPtrs(xs []catalog.Index) []*catalog.Index {
	out := make([]*catalog.Index, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

// ---- ADD COLUMN ----

func (e *executor) addColumn(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	cd := cmd.Def.GetColumnDef()
	name := truncateIdent(cd.Colname)
	if cur.ColumnByName(name) != nil {
		if cmd.MissingOk {
			e.notice(pgerrcode.DuplicateColumn, fmt.Sprintf("column %q of relation %q already exists, skipping", name, cur.Name))
			return nil
		}
		return pgerror.New(pgerrcode.DuplicateColumn, "column %q of relation %q already exists", name, cur.Name)
	}
	for _, cn := range cd.Constraints {
		if c := cn.GetConstraint(); c != nil && c.Contype == pg_query.ConstrType_CONSTR_PRIMARY {
			return e.addColumnThenPK(ctx, cur, cmd)
		}
	}
	schema, err := e.x.Writer.ByID(ctx, cur.SchemaID)
	if err != nil {
		return err
	}
	relNames, err := e.loadRelNames(ctx, cur.SchemaID)
	if err != nil {
		return err
	}
	b := &tableBuilder{e: e, schema: schema.(*catalog.Schema), relNames: relNames, t: cloneTable(cur), hasPK: true}
	t := b.t
	if err := b.addColumnDef(ctx, cd); err != nil {
		return err
	}
	// addColumnDef appended the column with the next ID; AddColumn does
	// the same and records the row schema version that added it.
	col := t.Columns[len(t.Columns)-1]
	t.Columns = t.Columns[:len(t.Columns)-1]
	t.NextColumnID--
	if _, err := t.AddColumn(col); err != nil {
		return err
	}
	if err := b.columnConstraints(ctx, cd); err != nil {
		return err
	}
	if err := b.checkGenerated(); err != nil {
		return err
	}
	c := t.ColumnByName(name)
	rows, err := e.readAll(ctx, cur)
	if err != nil {
		return err
	}
	// Store the column (and its sequence) first: its default may name the
	// sequence, which must exist to be resolved.
	if err := b.relNames.err; err != nil {
		return err
	}
	if err := e.x.Writer.Update(ctx, t); err != nil {
		return err
	}
	if err := b.createSequences(ctx); err != nil {
		return err
	}
	if t, err = e.reread(ctx, t.ID); err != nil {
		return err
	}
	c = t.ColumnByName(name)
	// What existing rows hold in the new column: a constant default is
	// stored once as the column's missing value (PostgreSQL's "fast
	// default"); a volatile one, a sequence or a generated expression is
	// computed per row by a rewrite.
	var perRow sem.Evaluator
	switch {
	case c.ComputedExpr != "":
		ex, err := e.buildOverTable(t, c.ComputedExpr, nil)
		if err != nil {
			return err
		}
		if ex, err = sem.CoerceToAssign(ex, c.Type, c.Name); err != nil {
			return err
		}
		if perRow, err = compileRow(cur, ex); err != nil {
			return err
		}
	case c.DefaultExpr != "" || c.Identity != "":
		text := c.DefaultExpr
		if c.Identity != "" {
			seq, err := e.x.Writer.ByID(ctx, c.SequenceID)
			if err != nil {
				return err
			}
			text = "nextval(" + quoteLiteral(quoteIdentIfNeeded(e.schemaName(ctx, t.SchemaID))+"."+quoteIdentIfNeeded(seq.DescName())) + "::regclass)"
		}
		ex, err := e.buildDefault(ctx, text, c)
		if err != nil {
			return err
		}
		if volatile(ex) {
			if perRow, err = compileRow(cur, ex); err != nil {
				return err
			}
		} else if len(rows) > 0 {
			ev, err := compileRow(cur, ex)
			if err != nil {
				return err
			}
			v, err := ev(e.newEvalContext(), nil)
			if err != nil {
				return err
			}
			if !types.IsNull(v) {
				mv := types.Format(nil, c.Type, v)
				c.MissingValue = &mv
				if err := e.x.Writer.Update(ctx, t); err != nil {
					return err
				}
			}
		}
	}
	if !c.Nullable && perRow == nil && c.MissingValue == nil && len(rows) > 0 {
		return pgerror.New(pgerrcode.NotNullViolation, "column %q of relation %q contains null values", c.Name, t.Name)
	}
	if perRow != nil && len(rows) > 0 {
		ectx := e.newEvalContext()
		pos := slices.IndexFunc(t.Columns, func(x catalog.Column) bool { return x.ID == c.ID })
		if err := e.rewrite(ctx, cur, t, func(old []types.Datum) ([]types.Datum, error) {
			v, err := perRow(ectx, old)
			if err != nil {
				return nil, err
			}
			if types.IsNull(v) && !c.Nullable {
				return nil, pgerror.New(pgerrcode.NotNullViolation, "column %q of relation %q contains null values", c.Name, t.Name)
			}
			nr := make([]types.Datum, len(t.Columns))
			copy(nr, old)
			nr[pos] = v
			return nr, nil
		}); err != nil {
			return err
		}
	}
	fresh, err := e.x.Writer.TableByID(ctx, t.ID)
	if err != nil {
		return err
	}
	return e.finishConstraints(ctx, fresh, b)
}

// buildDefault builds a stored default (or nextval of an identity's
// sequence) assigned to column c.
func (e *executor) buildDefault(ctx context.Context, text string, c *catalog.Column) (sem.Expr, error) {
	node, err := parseExpr(text)
	if err != nil {
		return nil, err
	}
	return sem.BuildAssign(sem.BuildContext{Types: e.types()}, node, c.Type, c.Name)
}

// reread returns a fresh copy of table id as stored now.
func (e *executor) reread(ctx context.Context, id catalog.ID) (*catalog.Table, error) {
	t, err := e.x.Writer.TableByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return cloneTable(t), nil
}

// regResolver resolves regclass names in the current database for the
// expressions DDL evaluates itself (nextval('s'::regclass) defaults).
type regResolver struct {
	e   *executor
	ctx context.Context
}

func (r *regResolver) ResolveReg(kind *types.T, name string) (uint32, error) {
	if kind.Oid != types.RegClass.Oid {
		return 0, notSupported("resolving %s names in DDL is not supported", kind.Name())
	}
	rv := &pg_query.RangeVar{Relname: name}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		rv.Schemaname, rv.Relname = strings.Trim(name[:i], `"`), name[i+1:]
	}
	rv.Relname = strings.Trim(rv.Relname, `"`)
	d, _, err := r.e.lookupRelation(r.ctx, rv)
	if err != nil {
		return 0, err
	}
	return uint32(d.DescID()), nil
}

func (r *regResolver) RegName(kind *types.T, oid uint32) (string, bool) {
	d, err := r.e.x.Writer.ByID(r.ctx, catalog.ID(oid))
	if err != nil {
		return "", false
	}
	return d.DescName(), true
}

// finishConstraints backfills the indexes and validates the constraints
// an ALTER TABLE added (b.newIndexes, b.newChecks, b.newFKs).
func (e *executor) finishConstraints(ctx context.Context, t *catalog.Table, b *tableBuilder) error {
	if err := e.backfill(ctx, t, b.newIndexes, false); err != nil {
		return err
	}
	for _, name := range b.newChecks {
		if err := e.validateCheck(ctx, t, name); err != nil {
			return err
		}
	}
	for _, name := range b.newFKs {
		if err := e.validateFK(ctx, t, name); err != nil {
			return err
		}
	}
	return nil
}

// addColumnThenPK: ADD COLUMN ... PRIMARY KEY on a table keyed by its
// hidden rowid adds the column, then replaces the key.
func (e *executor) addColumnThenPK(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	cd := cmd.Def.GetColumnDef()
	var pk *pg_query.Constraint
	rest := proto.Clone(cd).(*pg_query.ColumnDef)
	rest.Constraints = nil
	for _, cn := range cd.Constraints {
		if c := cn.GetConstraint(); c != nil && c.Contype == pg_query.ConstrType_CONSTR_PRIMARY {
			pk = c
			continue
		}
		rest.Constraints = append(rest.Constraints, cn)
	}
	if err := e.addColumn(ctx, cur, &pg_query.AlterTableCmd{Subtype: cmd.Subtype, Def: &pg_query.Node{Node: &pg_query.Node_ColumnDef{ColumnDef: rest}}}); err != nil {
		return err
	}
	t, err := e.x.Writer.TableByID(ctx, cur.ID)
	if err != nil {
		return err
	}
	c := proto.Clone(pk).(*pg_query.Constraint)
	c.Keys = []*pg_query.Node{pg_query.MakeStrNode(truncateIdent(cd.Colname))}
	return e.addTableConstraint(ctx, t, c)
}

// ---- DROP COLUMN ----

func (e *executor) dropColumn(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	c := cur.ColumnByName(cmd.Name)
	if c == nil {
		if cmd.MissingOk {
			e.notice("00000", fmt.Sprintf("column %q of relation %q does not exist, skipping", cmd.Name, cur.Name))
			return nil
		}
		return pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", cmd.Name, cur.Name)
	}
	cascade := cmd.Behavior == pg_query.DropBehavior_DROP_CASCADE
	if c.Hidden {
		return notSupported("cannot drop the hidden column %q", c.Name)
	}
	if slices.Contains(cur.PrimaryIndex.KeyColumnIDs, c.ID) {
		return notSupported("dropping a primary key column is not supported yet")
	}
	if len(cur.Columns) == 1 || (len(cur.Columns) == 2 && cur.ColumnByName(RowIDColumn) != nil && cur.ColumnByName(RowIDColumn).Hidden) {
		return notSupported("dropping the last column of a table is not supported yet")
	}
	t := cloneTable(cur)
	ds := &dropSet{}
	// Other tables' foreign keys referencing the column need CASCADE.
	var deps []dependent
	rels, err := e.allRelations(ctx)
	if err != nil {
		return err
	}
	for _, r := range rels {
		o, ok := r.(*catalog.Table)
		if !ok || o.ID == t.ID {
			continue
		}
		for _, fk := range o.ForeignKeys {
			if fk.ReferencedTableID == t.ID && slices.Contains(fk.ReferencedColumnIDs, c.ID) {
				deps = append(deps, dependent{what: fmt.Sprintf("constraint %s on table %s", fk.Name, o.Name), desc: o, fk: fk.Name})
			}
		}
	}
	// Generated columns computed from it.
	var genDeps []string
	for _, gc := range t.Columns {
		if gc.ComputedExpr == "" || gc.ID == c.ID {
			continue
		}
		if refs, err := e.exprColumns(t, gc.ComputedExpr); err == nil && slices.Contains(refs, c.ID) {
			genDeps = append(genDeps, gc.Name)
			deps = append(deps, dependent{what: fmt.Sprintf("column %s of table %s", gc.Name, t.Name)})
		}
	}
	if len(deps) > 0 && !cascade {
		lines := make([]string, len(deps))
		for i, d := range deps {
			lines[i] = fmt.Sprintf("%s depends on column %s of table %s", d.what, c.Name, t.Name)
		}
		return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop column %s of table %s because other objects depend on it", c.Name, t.Name).
			WithDetail("%s", strings.Join(lines, "\n")).WithHint("Use DROP ... CASCADE to drop the dependent objects too.")
	}
	for _, d := range deps {
		ds.cascaded = append(ds.cascaded, d.what)
		if d.fk == "" {
			continue
		}
		o, err := e.x.Writer.TableByID(ctx, d.desc.DescID())
		if err != nil {
			return err
		}
		oc := cloneTable(o)
		oc.ForeignKeys = slices.DeleteFunc(oc.ForeignKeys, func(fk catalog.ForeignKey) bool { return fk.Name == d.fk })
		if err := e.x.Writer.Update(ctx, oc); err != nil {
			return err
		}
	}
	if len(ds.cascaded) > 0 {
		e.reportCascade(ds)
		// The updates above changed t's back-references.
		fresh, err := e.x.Writer.TableByID(ctx, t.ID)
		if err != nil {
			return err
		}
		t = cloneTable(fresh)
		cur = fresh
	}
	// Indexes, CHECKs and own foreign keys using the column go with it,
	// as PostgreSQL drops them (they depend on the column automatically).
	layout, err := cur.Layout()
	if err != nil {
		return err
	}
	var droppedIdx []catalog.IndexID
	t.Indexes = slices.DeleteFunc(t.Indexes, func(idx catalog.Index) bool {
		uses := slices.Contains(idx.KeyColumnIDs, c.ID) || slices.Contains(idx.StoreColumnIDs, c.ID)
		if !uses && idx.Predicate != "" {
			refs, _ := e.exprColumns(cur, idx.Predicate)
			uses = slices.Contains(refs, c.ID)
		}
		if uses {
			droppedIdx = append(droppedIdx, idx.ID)
		}
		return uses
	})
	t.Uniques = slices.DeleteFunc(t.Uniques, func(u catalog.UniqueConstraint) bool { return slices.Contains(droppedIdx, u.IndexID) })
	t.Checks = slices.DeleteFunc(t.Checks, func(ch catalog.Check) bool {
		refs, _ := e.exprColumns(cur, ch.Expr)
		return slices.Contains(refs, c.ID)
	})
	t.ForeignKeys = slices.DeleteFunc(t.ForeignKeys, func(fk catalog.ForeignKey) bool {
		return slices.Contains(fk.ColumnIDs, c.ID) || (fk.ReferencedTableID == t.ID && slices.Contains(fk.ReferencedColumnIDs, c.ID))
	})
	droppedCols := []rowenc.ColumnID{c.ID}
	for _, name := range genDeps {
		droppedCols = append(droppedCols, t.ColumnByName(name).ID)
	}
	for _, name := range append(genDeps, c.Name) {
		if err := t.DropColumn(name); err != nil {
			return err
		}
	}
	dropUnusedShardColumns(t)
	if err := e.x.Writer.Update(ctx, t); err != nil {
		return err
	}
	for _, id := range droppedIdx {
		if err := e.deleteIndexData(ctx, layout, id); err != nil {
			return err
		}
	}
	// Sequences owned by a dropped column (serial, identity, OWNED BY) go
	// with it.
	rels, err = e.x.Writer.Relations(ctx, t.DatabaseID, t.SchemaID)
	if err != nil {
		return err
	}
	for _, r := range rels {
		if s, ok := r.(*catalog.Sequence); ok && s.OwnedBy != nil && s.OwnedBy.TableID == t.ID && slices.Contains(droppedCols, s.OwnedBy.ColumnID) {
			if err := e.x.Writer.Drop(ctx, s); err != nil {
				return err
			}
			if err := sequence.Clear(ctx, e.x.Txn, s.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// exprColumns lists the columns of t a stored expression references.
func (e *executor) exprColumns(t *catalog.Table, text string) ([]rowenc.ColumnID, error) {
	ex, err := e.buildOverTable(t, text, nil)
	if err != nil {
		return nil, err
	}
	var out []rowenc.ColumnID
	for _, id := range colRefs(ex) {
		out = append(out, rowenc.ColumnID(id))
	}
	return out, nil
}

// ---- defaults and NOT NULL ----

func (e *executor) setDefault(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	t := cloneTable(cur)
	c, err := column(t, cmd.Name)
	if err != nil {
		return err
	}
	if c.Identity != "" {
		return pgerror.New(pgerrcode.SyntaxError, "column %q of relation %q is an identity column", c.Name, t.Name).
			WithHint("Use ALTER TABLE ... ALTER COLUMN ... DROP IDENTITY instead.")
	}
	if c.ComputedExpr != "" {
		return pgerror.New(pgerrcode.SyntaxError, "column %q of relation %q is a generated column", c.Name, t.Name).
			WithHint("Use ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION instead.")
	}
	if cmd.Def == nil {
		c.DefaultExpr = ""
	} else if c.DefaultExpr, err = e.defaultText(cmd.Def, c.Type, c.Name); err != nil {
		return err
	}
	return e.x.Writer.Update(ctx, t)
}

func (e *executor) setNotNull(ctx context.Context, cur *catalog.Table, name string) error {
	t := cloneTable(cur)
	c, err := column(t, name)
	if err != nil {
		return err
	}
	if !c.Nullable {
		return nil
	}
	pos := slices.IndexFunc(t.Columns, func(x catalog.Column) bool { return x.ID == c.ID })
	l, err := cur.Layout()
	if err != nil {
		return err
	}
	err = e.scanRows(ctx, cur, l, func(r []types.Datum) error {
		if r[pos] == nil || types.IsNull(r[pos]) {
			return pgerror.New(pgerrcode.NotNullViolation, "column %q of relation %q contains null values", c.Name, t.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.Nullable = false
	return e.x.Writer.Update(ctx, t)
}

func (e *executor) dropNotNull(ctx context.Context, cur *catalog.Table, name string) error {
	t := cloneTable(cur)
	c, err := column(t, name)
	if err != nil {
		return err
	}
	if slices.Contains(t.PrimaryIndex.KeyColumnIDs, c.ID) {
		return pgerror.New(pgerrcode.InvalidTableDefinition, "column %q is in a primary key", c.Name)
	}
	if c.Identity != "" {
		return pgerror.New(pgerrcode.SyntaxError, "column %q of relation %q is an identity column", c.Name, t.Name)
	}
	c.Nullable = true
	return e.x.Writer.Update(ctx, t)
}

// ---- ALTER COLUMN TYPE ----

func (e *executor) alterColumnType(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	cd := cmd.Def.GetColumnDef()
	t := cloneTable(cur)
	c, err := column(t, cmd.Name)
	if err != nil {
		return err
	}
	typ, serial, err := columnType(e.types(), cd.TypeName)
	if err != nil {
		return err
	}
	if serial {
		return pgerror.New(pgerrcode.UndefinedObject, "type %q does not exist", nameList(cd.TypeName.Names)[0])
	}
	for _, gc := range t.Columns {
		if gc.ComputedExpr == "" || gc.ID == c.ID {
			continue
		}
		if refs, _ := e.exprColumns(cur, gc.ComputedExpr); slices.Contains(refs, c.ID) {
			return pgerror.New(pgerrcode.FeatureNotSupported, "cannot alter type of a column used by a generated column").
				WithDetail("Column %q is used by generated column %q.", c.Name, gc.Name)
		}
	}
	// The conversion: USING expr over the old row, else the column
	// assigned to the new type (42804 when no assignment cast exists).
	scope := &colScope{table: t.Name, cols: cur.Columns}
	bc := sem.BuildContext{Scope: scope, Types: e.types(), Clause: "transform expression", Position: e.stmt.Position}
	var conv sem.Expr
	if cd.RawDefault != nil {
		if conv, err = sem.BuildAssign(bc, cd.RawDefault, typ, c.Name); err != nil {
			return err
		}
	} else {
		ref := &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{Fields: []*pg_query.Node{pg_query.MakeStrNode(c.Name)}}}}
		if conv, err = sem.BuildAssign(bc, ref, typ, c.Name); err != nil {
			if c.Type.Identical(typ) {
				return err
			}
			return pgerror.New(pgerrcode.DatatypeMismatch, "column %q cannot be cast automatically to type %s", c.Name, typ.Name()).
				WithHint("You might need to specify \"USING %s::%s\".", quoteIdentIfNeeded(c.Name), typ.Name())
		}
	}
	ev, err := compileRow(cur, conv)
	if err != nil {
		return err
	}
	oldType := c.Type
	c.Type = typ
	if c.DefaultExpr != "" {
		node, err := parseExpr(c.DefaultExpr)
		if err != nil {
			return err
		}
		text, err := e.defaultText(node, typ, c.Name)
		if err != nil {
			return pgerror.New(pgerrcode.DatatypeMismatch, "default for column %q cannot be cast automatically to type %s", c.Name, typ.Name())
		}
		c.DefaultExpr = text
	}
	if c.MissingValue != nil {
		d, err := types.ParseDatum(nil, oldType, *c.MissingValue)
		if err != nil {
			return err
		}
		cv, err := sem.Eval(e.newEvalContext(), &sem.Cast{Expr: &sem.Const{Datum: d, T: oldType}, To: typ, Context: types.CastAssignment}, nil)
		if err != nil {
			return err
		}
		mv := types.Format(nil, typ, cv)
		c.MissingValue = &mv
	}
	for _, idxCol := range append(append([]rowenc.ColumnID{}, t.PrimaryIndex.KeyColumnIDs...), indexKeyColumns(t)...) {
		if idxCol == c.ID {
			if err := indexableType(c); err != nil {
				return err
			}
		}
	}
	// Foreign keys from or to the column must still compare.
	for _, fk := range t.ForeignKeys {
		for i, id := range fk.ColumnIDs {
			if id != c.ID {
				continue
			}
			ref, err := e.x.Writer.TableByID(ctx, fk.ReferencedTableID)
			if err != nil {
				return err
			}
			if fk.ReferencedTableID == t.ID {
				ref = t
			}
			if rc := ref.ColumnByID(fk.ReferencedColumnIDs[i]); rc != nil && !comparableTypes(typ, rc.Type) {
				return pgerror.New(pgerrcode.DatatypeMismatch, "foreign key constraint %q cannot be implemented", fk.Name).
					WithDetail("Key columns %q and %q are of incompatible types: %s and %s.", c.Name, rc.Name, typ.Name(), rc.Type.Name())
			}
		}
	}
	// Checks must still type-check over the new column type.
	for _, ch := range t.Checks {
		if _, err := e.buildOverTable(t, ch.Expr, types.Bool); err != nil {
			return err
		}
	}
	pos := slices.IndexFunc(t.Columns, func(x catalog.Column) bool { return x.ID == c.ID })
	ectx := e.newEvalContext()
	return e.rewrite(ctx, cur, t, func(old []types.Datum) ([]types.Datum, error) {
		v, err := ev(ectx, old)
		if err != nil {
			return nil, err
		}
		if types.IsNull(v) && !c.Nullable {
			return nil, pgerror.New(pgerrcode.NotNullViolation, "column %q of relation %q contains null values", c.Name, t.Name)
		}
		nr := slices.Clone(old)
		nr[pos] = v
		return nr, nil
	})
}

func indexKeyColumns(t *catalog.Table) []rowenc.ColumnID {
	var out []rowenc.ColumnID
	for _, idx := range t.Indexes {
		out = append(out, idx.KeyColumnIDs...)
	}
	return out
}

// ---- constraints ----

func (e *executor) addTableConstraint(ctx context.Context, cur *catalog.Table, con *pg_query.Constraint) error {
	if con == nil {
		return notSupported("ALTER TABLE ADD of this kind is not supported yet")
	}
	schema, err := e.x.Writer.ByID(ctx, cur.SchemaID)
	if err != nil {
		return err
	}
	relNames, err := e.loadRelNames(ctx, cur.SchemaID)
	if err != nil {
		return err
	}
	if con.Contype == pg_query.ConstrType_CONSTR_PRIMARY {
		if alter, opts := isAlterPK(con); alter {
			return e.alterPrimaryKey(ctx, cur, con, opts, schema.(*catalog.Schema), relNames)
		}
		return e.addPrimaryKey(ctx, cur, con, schema.(*catalog.Schema), relNames)
	}
	if con.Indexname != "" {
		return notSupported("constraints USING INDEX are not supported yet")
	}
	b := &tableBuilder{e: e, schema: schema.(*catalog.Schema), relNames: relNames, t: cloneTable(cur), hasPK: true}
	for _, id := range b.t.PrimaryIndex.KeyColumnIDs {
		relNames.claim(b.t.PrimaryIndex.Name)
		_ = id
	}
	if err := b.addConstraint(ctx, con, nil); err != nil {
		return err
	}
	for _, idxID := range b.newIndexes {
		if err := e.placeIndex(ctx, b.t, b.t.IndexByID(idxID)); err != nil {
			return err
		}
	}
	if err := b.relNames.err; err != nil {
		return err
	}
	if err := e.x.Writer.Update(ctx, b.t); err != nil {
		return err
	}
	if con.SkipValidation {
		b.newChecks, b.newFKs = nil, nil
	}
	fresh, err := e.x.Writer.TableByID(ctx, cur.ID)
	if err != nil {
		return err
	}
	return e.finishConstraints(ctx, fresh, b)
}

// addPrimaryKey replaces the hidden rowid key of a table created without a
// primary key (catalog.Table.RowIDKey: rowid alone, or after a distributed
// table's distribution column, which the new key must then contain): the
// key columns become NOT NULL (23502 when a row has a
// NULL), every row and index entry is rewritten under the new key (23505
// on duplicates), and rowid is dropped.
func (e *executor) addPrimaryKey(ctx context.Context, cur *catalog.Table, con *pg_query.Constraint, schema *catalog.Schema, relNames *relNameSet) error {
	rowid := cur.ColumnByName(RowIDColumn)
	if _, ok := cur.RowIDKey(); !ok || rowid == nil {
		return pgerror.New(pgerrcode.InvalidTableDefinition, "multiple primary keys for table %q are not allowed", cur.Name)
	}
	b := &tableBuilder{e: e, schema: schema, relNames: relNames, t: cloneTable(cur)}
	relNames.free(cur.PrimaryIndex.Name)
	t := b.t
	oldName := t.PrimaryIndex.Name
	t.PrimaryIndex = catalog.Index{}
	if err := b.addPrimaryKey(con, nameList(con.Keys)); err != nil {
		return err
	}
	if t.PrimaryIndex.Name == "" {
		t.PrimaryIndex.Name = oldName
	}
	t.PrimaryIndex.Kind, t.PrimaryIndex.State = catalog.IndexBTree, catalog.IndexPublic
	var keyPos []int
	for _, id := range t.PrimaryIndex.KeyColumnIDs {
		keyPos = append(keyPos, slices.IndexFunc(cur.Columns, func(x catalog.Column) bool { return x.ID == id }))
	}
	if err := t.DropColumn(RowIDColumn); err != nil {
		return err
	}
	rowidPos := slices.IndexFunc(cur.Columns, func(x catalog.Column) bool { return x.ID == rowid.ID })
	if err := b.relNames.err; err != nil {
		return err
	}
	// A distributed table's key was (distribution column, rowid): the
	// new key must contain the column, and rows stay hashed on it.
	if err := keepDistributionColumn(cur, t); err != nil {
		return err
	}
	return e.rewrite(ctx, cur, t, func(old []types.Datum) ([]types.Datum, error) {
		for i, p := range keyPos {
			if old[p] == nil || types.IsNull(old[p]) {
				return nil, pgerror.New(pgerrcode.NotNullViolation, "column %q of relation %q contains null values", t.ColumnByID(t.PrimaryIndex.KeyColumnIDs[i]).Name, t.Name)
			}
		}
		return slices.Delete(slices.Clone(old), rowidPos, rowidPos+1), nil
	})
}

func (e *executor) dropConstraint(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	t := cloneTable(cur)
	name := cmd.Name
	cascade := cmd.Behavior == pg_query.DropBehavior_DROP_CASCADE
	if i := slices.IndexFunc(t.Checks, func(c catalog.Check) bool { return c.Name == name }); i >= 0 {
		t.Checks = slices.Delete(t.Checks, i, i+1)
		return e.x.Writer.Update(ctx, t)
	}
	if i := slices.IndexFunc(t.ForeignKeys, func(f catalog.ForeignKey) bool { return f.Name == name }); i >= 0 {
		t.ForeignKeys = slices.Delete(t.ForeignKeys, i, i+1)
		return e.x.Writer.Update(ctx, t)
	}
	if t.PrimaryIndex.Name == name {
		return notSupported("dropping a primary key is not supported yet")
	}
	for _, u := range t.Uniques {
		if u.Name == name {
			return e.dropIndex(ctx, cur, t.IndexByID(u.IndexID).Name, cascade, true)
		}
	}
	if cmd.MissingOk {
		e.notice("00000", fmt.Sprintf("constraint %q of relation %q does not exist, skipping", name, t.Name))
		return nil
	}
	return pgerror.New(pgerrcode.UndefinedObject, "constraint %q of relation %q does not exist", name, t.Name)
}

func (e *executor) validateConstraint(ctx context.Context, t *catalog.Table, name string) error {
	if slices.ContainsFunc(t.Checks, func(c catalog.Check) bool { return c.Name == name }) {
		return e.validateCheck(ctx, t, name)
	}
	if slices.ContainsFunc(t.ForeignKeys, func(f catalog.ForeignKey) bool { return f.Name == name }) {
		return e.validateFK(ctx, t, name)
	}
	return pgerror.New(pgerrcode.UndefinedObject, "constraint %q of relation %q does not exist", name, t.Name)
}

// validateCheck fails with 23514 if a row of t violates CHECK name (false,
// not NULL, fails it).
func (e *executor) validateCheck(ctx context.Context, t *catalog.Table, name string) error {
	i := slices.IndexFunc(t.Checks, func(c catalog.Check) bool { return c.Name == name })
	ev, err := e.compileOverTable(t, t.Checks[i].Expr)
	if err != nil {
		return err
	}
	l, err := t.Layout()
	if err != nil {
		return err
	}
	ectx := e.newEvalContext()
	return e.scanRows(ctx, t, l, func(r []types.Datum) error {
		v, err := ev(ectx, r)
		if err != nil {
			return err
		}
		if b, ok := v.(types.DBool); ok && !bool(b) {
			return pgerror.New(pgerrcode.CheckViolation, "check constraint %q of relation %q is violated by some row", name, t.Name)
		}
		return nil
	})
}

// validateFK fails with 23503 if a row of t has a foreign key value (all
// columns non-NULL, MATCH SIMPLE) that the referenced table lacks.
func (e *executor) validateFK(ctx context.Context, t *catalog.Table, name string) error {
	fk := t.ForeignKeys[slices.IndexFunc(t.ForeignKeys, func(f catalog.ForeignKey) bool { return f.Name == name })]
	ref := t
	if fk.ReferencedTableID != t.ID {
		var err error
		if ref, err = e.x.Writer.TableByID(ctx, fk.ReferencedTableID); err != nil {
			return err
		}
	}
	pos := func(tb *catalog.Table, ids []rowenc.ColumnID) []int {
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = slices.IndexFunc(tb.Columns, func(x catalog.Column) bool { return x.ID == id })
		}
		return out
	}
	childPos, refPos := pos(t, fk.ColumnIDs), pos(ref, fk.ReferencedColumnIDs)
	refL, err := ref.Layout()
	if err != nil {
		return err
	}
	// Values compare as the referenced column's type: the key of a row is
	// its values cast to those types and printed.
	keyOf := func(r []types.Datum, ps []int, from *catalog.Table) (string, bool, error) {
		var b strings.Builder
		for i, p := range ps {
			d := r[p]
			if d == nil || types.IsNull(d) {
				return "", false, nil
			}
			rt := ref.ColumnByID(fk.ReferencedColumnIDs[i]).Type
			ft := from.Columns[p].Type
			if !ft.Identical(rt) {
				v, err := sem.Eval(&sem.EvalContext{}, &sem.Cast{Expr: &sem.Const{Datum: d, T: ft}, To: rt, Context: types.CastImplicit}, nil)
				if err != nil {
					return "", false, err
				}
				d = v
			}
			b.WriteString(types.Format(nil, rt, d))
			b.WriteByte(0)
		}
		return b.String(), true, nil
	}
	have := map[string]bool{}
	if err := e.scanRows(ctx, ref, refL, func(r []types.Datum) error {
		k, ok, err := keyOf(r, refPos, ref)
		if ok {
			have[k] = true
		}
		return err
	}); err != nil {
		return err
	}
	l, err := t.Layout()
	if err != nil {
		return err
	}
	return e.scanRows(ctx, t, l, func(r []types.Datum) error {
		k, ok, err := keyOf(r, childPos, t)
		if err != nil || !ok || have[k] {
			return err
		}
		var cols, vals []string
		for i, p := range childPos {
			cols = append(cols, t.ColumnByID(fk.ColumnIDs[i]).Name)
			vals = append(vals, types.Format(nil, t.Columns[p].Type, r[p]))
		}
		return pgerror.New(pgerrcode.ForeignKeyViolation, "insert or update on table %q violates foreign key constraint %q", t.Name, fk.Name).
			WithDetail("Key (%s)=(%s) is not present in table %q.", strings.Join(cols, ", "), strings.Join(vals, ", "), ref.Name)
	})
}

// ---- identity ----

func (e *executor) addIdentity(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	c, err := column(cur, cmd.Name)
	if err != nil {
		return err
	}
	if c.Nullable {
		return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "column %q of relation %q must be declared NOT NULL before identity can be added", c.Name, cur.Name)
	}
	if c.Identity != "" {
		return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "column %q of relation %q is already an identity column", c.Name, cur.Name)
	}
	if c.DefaultExpr != "" {
		return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "column %q of relation %q already has a default value", c.Name, cur.Name)
	}
	schema, err := e.x.Writer.ByID(ctx, cur.SchemaID)
	if err != nil {
		return err
	}
	relNames, err := e.loadRelNames(ctx, cur.SchemaID)
	if err != nil {
		return err
	}
	b := &tableBuilder{e: e, schema: schema.(*catalog.Schema), relNames: relNames, t: cloneTable(cur), hasPK: true}
	if err := b.setIdentity(ctx, b.t.ColumnByName(c.Name), cmd.Def.GetConstraint()); err != nil {
		return err
	}
	if err := b.relNames.err; err != nil {
		return err
	}
	if err := e.x.Writer.Update(ctx, b.t); err != nil {
		return err
	}
	return b.createSequences(ctx)
}

func (e *executor) dropIdentity(ctx context.Context, cur *catalog.Table, cmd *pg_query.AlterTableCmd) error {
	t := cloneTable(cur)
	c, err := column(t, cmd.Name)
	if err != nil {
		return err
	}
	if c.Identity == "" {
		if cmd.MissingOk {
			e.notice("00000", fmt.Sprintf("column %q of relation %q is not an identity column, skipping", c.Name, t.Name))
			return nil
		}
		return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "column %q of relation %q is not an identity column", c.Name, t.Name)
	}
	seqID := c.SequenceID
	c.Identity, c.SequenceID = "", 0
	if err := e.x.Writer.Update(ctx, t); err != nil {
		return err
	}
	d, err := e.x.Writer.ByID(ctx, seqID)
	if err != nil {
		return err
	}
	if err := e.x.Writer.Drop(ctx, d); err != nil {
		return err
	}
	return sequence.Clear(ctx, e.x.Txn, seqID)
}

// ---- RENAME ----

func (e *executor) rename(ctx context.Context, n *pg_query.RenameStmt) (string, error) {
	newName := truncateIdent(n.Newname)
	switch n.RenameType {
	case pg_query.ObjectType_OBJECT_TYPE:
		return "ALTER TYPE", e.renameType(ctx, n, newName)
	case pg_query.ObjectType_OBJECT_DOMAIN:
		return "ALTER DOMAIN", e.renameType(ctx, n, newName)
	case pg_query.ObjectType_OBJECT_FUNCTION:
		return "ALTER FUNCTION", e.renameFunction(ctx, n, newName)
	case pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_VIEW, pg_query.ObjectType_OBJECT_SEQUENCE:
		tag := alterTag(n.RenameType)
		d, _, err := e.lookupRelation(ctx, n.Relation)
		if err != nil {
			if n.MissingOk && pgerror.Code(err) == pgerrcode.UndefinedTable {
				e.notice("00000", fmt.Sprintf("relation %q does not exist, skipping", n.Relation.Relname))
				return tag, nil
			}
			return tag, err
		}
		if err := e.checkOwner(ctx, d); err != nil {
			return tag, err
		}
		if t, ok := d.(*catalog.Table); ok {
			if t.IndexByName(newName) != nil {
				return tag, pgerror.New(pgerrcode.DuplicateTable, "relation %q already exists", newName)
			}
			return tag, e.x.Writer.Rename(ctx, cloneTable(t), newName)
		}
		return tag, e.x.Writer.Rename(ctx, shallowCopy(d), newName)
	case pg_query.ObjectType_OBJECT_INDEX:
		t, idx, err := e.findIndex(ctx, n.Relation)
		if err != nil {
			return "ALTER INDEX", err
		}
		if idx == nil {
			if n.MissingOk {
				e.notice("00000", fmt.Sprintf("relation %q does not exist, skipping", n.Relation.Relname))
				return "ALTER INDEX", nil
			}
			return "ALTER INDEX", pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", qualified(n.Relation))
		}
		if err := e.checkIndexOwner(ctx, t, idx.Name); err != nil {
			return "ALTER INDEX", err
		}
		return "ALTER INDEX", e.renameIndex(ctx, t, idx.Name, newName)
	case pg_query.ObjectType_OBJECT_COLUMN:
		return alterTag(n.RelationType), e.renameColumn(ctx, n, newName)
	case pg_query.ObjectType_OBJECT_TABCONSTRAINT:
		return "ALTER TABLE", e.renameConstraint(ctx, n, newName)
	case pg_query.ObjectType_OBJECT_SCHEMA:
		s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, n.Subname)
		if err != nil {
			return "ALTER SCHEMA", err
		}
		if err := e.checkOwner(ctx, s); err != nil {
			return "ALTER SCHEMA", err
		}
		c := *s
		return "ALTER SCHEMA", e.x.Writer.Rename(ctx, &c, newName)
	case pg_query.ObjectType_OBJECT_DATABASE:
		db, err := e.x.Writer.Database(ctx, n.Subname)
		if err != nil {
			return "ALTER DATABASE", err
		}
		if db.ID == e.x.Database.ID {
			return "ALTER DATABASE", pgerror.New(pgerrcode.FeatureNotSupported, "current database cannot be renamed")
		}
		c := *db
		return "ALTER DATABASE", e.x.Writer.Rename(ctx, &c, newName)
	case pg_query.ObjectType_OBJECT_ROLE:
		return "ALTER ROLE", notSupported("renaming a role is not supported yet")
	}
	return "ALTER TABLE", notSupported("ALTER %s RENAME is not supported yet", strings.TrimPrefix(n.RenameType.String(), "OBJECT_"))
}

// shallowCopy copies a view or sequence descriptor for Rename.
func shallowCopy(d catalog.Descriptor) catalog.Descriptor {
	switch v := d.(type) {
	case *catalog.View:
		c := *v
		return &c
	case *catalog.Sequence:
		c := *v
		return &c
	}
	return d
}

func (e *executor) renameIndex(ctx context.Context, cur *catalog.Table, old, newName string) error {
	relNames, err := e.loadRelNames(ctx, cur.SchemaID)
	if err != nil {
		return err
	}
	if relNames.taken(newName) {
		return pgerror.New(pgerrcode.DuplicateTable, "relation %q already exists", newName)
	}
	if relNames.err != nil {
		return relNames.err
	}
	t := cloneTable(cur)
	idx := t.IndexByName(old)
	idx.Name = newName
	for i := range t.Uniques {
		if t.Uniques[i].IndexID == idx.ID {
			t.Uniques[i].Name = newName
		}
	}
	return e.x.Writer.Update(ctx, t)
}

func (e *executor) renameConstraint(ctx context.Context, n *pg_query.RenameStmt, newName string) error {
	cur, err := e.lookupTable(ctx, n.Relation)
	if err != nil {
		return err
	}
	if err := e.checkOwner(ctx, cur); err != nil {
		return err
	}
	t := cloneTable(cur)
	b := &tableBuilder{t: t}
	if b.constraintTaken(newName) {
		return pgerror.New(pgerrcode.DuplicateObject, "constraint %q for relation %q already exists", newName, t.Name)
	}
	if text, ok := t.ConstraintComments[n.Subname]; ok {
		// The comment follows the constraint (stored by name).
		delete(t.ConstraintComments, n.Subname)
		t.ConstraintComments[newName] = text
		if t.PrimaryIndex.Name == n.Subname || slices.ContainsFunc(t.Uniques, func(u catalog.UniqueConstraint) bool { return u.Name == n.Subname }) {
			if err := e.x.Writer.Update(ctx, t); err != nil {
				return err
			}
			if cur, err = e.x.Writer.TableByID(ctx, t.ID); err != nil {
				return err
			}
		}
	}
	for i := range t.Checks {
		if t.Checks[i].Name == n.Subname {
			t.Checks[i].Name = newName
			return e.x.Writer.Update(ctx, t)
		}
	}
	for i := range t.ForeignKeys {
		if t.ForeignKeys[i].Name == n.Subname {
			t.ForeignKeys[i].Name = newName
			return e.x.Writer.Update(ctx, t)
		}
	}
	if t.PrimaryIndex.Name == n.Subname {
		return e.renameIndex(ctx, cur, n.Subname, newName)
	}
	for _, u := range t.Uniques {
		if u.Name == n.Subname {
			return e.renameIndex(ctx, cur, t.IndexByID(u.IndexID).Name, newName)
		}
	}
	return pgerror.New(pgerrcode.UndefinedObject, "constraint %q for table %q does not exist", n.Subname, t.Name)
}

// renameColumn renames a column and rewrites the stored expressions that
// name it (CHECKs, generated columns, index predicates).
func (e *executor) renameColumn(ctx context.Context, n *pg_query.RenameStmt, newName string) error {
	cur, err := e.lookupTable(ctx, n.Relation)
	if err != nil {
		if n.MissingOk && pgerror.Code(err) == pgerrcode.UndefinedTable {
			e.notice("00000", fmt.Sprintf("relation %q does not exist, skipping", n.Relation.Relname))
			return nil
		}
		return err
	}
	t := cloneTable(cur)
	c, err := column(t, n.Subname)
	if err != nil {
		return err
	}
	if t.ColumnByName(newName) != nil {
		return pgerror.New(pgerrcode.DuplicateColumn, "column %q of relation %q already exists", newName, t.Name)
	}
	// Rebuild each stored expression with the column printed under its new
	// name.
	rescope := &renameScope{colScope: colScope{table: t.Name, cols: cur.Columns}, id: c.ID, name: newName}
	reprint := func(text string) (string, error) {
		node, err := parseExpr(text)
		if err != nil {
			return "", err
		}
		ex, err := sem.Build(sem.BuildContext{Scope: rescope, Types: e.types()}, node, nil)
		if err != nil {
			return "", err
		}
		return ex.String(), nil
	}
	for i := range t.Checks {
		if t.Checks[i].Expr, err = reprint(t.Checks[i].Expr); err != nil {
			return err
		}
	}
	for i := range t.Columns {
		if t.Columns[i].ComputedExpr != "" {
			if t.Columns[i].ComputedExpr, err = reprint(t.Columns[i].ComputedExpr); err != nil {
				return err
			}
		}
	}
	for i := range t.Indexes {
		if t.Indexes[i].Predicate != "" {
			if t.Indexes[i].Predicate, err = reprint(t.Indexes[i].Predicate); err != nil {
				return err
			}
		}
	}
	t.ColumnByID(c.ID).Name = newName
	return e.x.Writer.Update(ctx, t)
}

// renameScope resolves names as colScope does but prints column id under
// a new name.
type renameScope struct {
	colScope
	id   rowenc.ColumnID
	name string
}

func (s *renameScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	id, t, name, err := s.colScope.Resolve(fields)
	if err == nil && rowenc.ColumnID(id) == s.id {
		name = quoteIdentIfNeeded(s.name)
	}
	return id, t, name, err
}
