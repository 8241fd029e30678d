package ddl

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/stats"
)

// kindWord is how PostgreSQL names a relation kind in messages.
func kindWord(k catalog.Kind) string {
	switch k {
	case catalog.KindView:
		return "view"
	case catalog.KindSequence:
		return "sequence"
	case catalog.KindSchema:
		return "schema"
	case catalog.KindDatabase:
		return "database"
	case catalog.KindType:
		return "type"
	case catalog.KindFunction:
		return "function"
	}
	return "table"
}

func (e *executor) drop(ctx context.Context, n *pg_query.DropStmt) (string, error) {
	cascade := n.Behavior == pg_query.DropBehavior_DROP_CASCADE
	switch n.RemoveType {
	case pg_query.ObjectType_OBJECT_TABLE:
		return "DROP TABLE", e.dropRelations(ctx, n, catalog.KindTable, cascade)
	case pg_query.ObjectType_OBJECT_VIEW:
		return "DROP VIEW", e.dropRelations(ctx, n, catalog.KindView, cascade)
	case pg_query.ObjectType_OBJECT_SEQUENCE:
		return "DROP SEQUENCE", e.dropRelations(ctx, n, catalog.KindSequence, cascade)
	case pg_query.ObjectType_OBJECT_INDEX:
		return "DROP INDEX", e.dropIndexes(ctx, n, cascade)
	case pg_query.ObjectType_OBJECT_SCHEMA:
		return "DROP SCHEMA", e.dropSchemas(ctx, n, cascade)
	case pg_query.ObjectType_OBJECT_EXTENSION:
		return "DROP EXTENSION", e.dropExtensions(ctx, n)
	case pg_query.ObjectType_OBJECT_TYPE:
		return "DROP TYPE", e.dropTypes(ctx, n, cascade, false)
	case pg_query.ObjectType_OBJECT_DOMAIN:
		return "DROP DOMAIN", e.dropTypes(ctx, n, cascade, true)
	case pg_query.ObjectType_OBJECT_FUNCTION:
		return "DROP FUNCTION", e.dropFunctions(ctx, n)
	case pg_query.ObjectType_OBJECT_MATVIEW:
		return "", notSupported("materialized views are not supported yet")
	}
	return "", notSupported("DROP %s is not supported yet", strings.TrimPrefix(n.RemoveType.String(), "OBJECT_"))
}

// rangeVarOf turns a DROP object (a list of names) into a RangeVar.
func rangeVarOf(obj *pg_query.Node) *pg_query.RangeVar {
	names := nameList(obj.GetList().GetItems())
	rv := &pg_query.RangeVar{}
	switch len(names) {
	case 0:
	case 1:
		rv.Relname = names[0]
	case 2:
		rv.Schemaname, rv.Relname = names[0], names[1]
	default:
		rv.Catalogname, rv.Schemaname, rv.Relname = names[len(names)-3], names[len(names)-2], names[len(names)-1]
	}
	return rv
}

// dropSet collects what one DROP statement removes and the NOTICE lines a
// CASCADE reports.
type dropSet struct {
	dropped  map[catalog.ID]bool
	cascaded []string
}

func (e *executor) dropRelations(ctx context.Context, n *pg_query.DropStmt, kind catalog.Kind, cascade bool) error {
	ds := &dropSet{dropped: map[catalog.ID]bool{}}
	for _, obj := range n.Objects {
		rv := rangeVarOf(obj)
		d, _, err := e.lookupRelation(ctx, rv)
		if err == nil && d.DescKind() == catalog.KindType {
			// A type is no relation (it shares their namespace).
			err = pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", rv.Relname)
		}
		if pgerror.Code(err) == pgerrcode.UndefinedTable {
			if n.MissingOk {
				e.notice("00000", fmt.Sprintf("%s %q does not exist, skipping", kindWord(kind), rv.Relname))
				continue
			}
			return pgerror.New(pgerrcode.UndefinedTable, "%s %q does not exist", kindWord(kind), qualified(rv))
		}
		if err != nil {
			return err
		}
		if d.DescKind() != kind {
			return pgerror.New(pgerrcode.WrongObjectType, "%q is not a %s", d.DescName(), kindWord(kind)).
				WithHint("Use DROP %s to remove a %s.", strings.ToUpper(kindWord(d.DescKind())), kindWord(d.DescKind()))
		}
		if err := e.checkOwner(ctx, d); err != nil {
			return err
		}
		if ds.dropped[d.DescID()] {
			continue
		}
		if err := e.dropRelation(ctx, d, cascade, ds, true); err != nil {
			return err
		}
	}
	e.reportCascade(ds)
	return nil
}

func (e *executor) reportCascade(ds *dropSet) {
	switch len(ds.cascaded) {
	case 0:
	case 1:
		e.notice("00000", "drop cascades to "+ds.cascaded[0])
	default:
		lines := make([]string, len(ds.cascaded))
		for i, c := range ds.cascaded {
			lines[i] = "drop cascades to " + c
		}
		// PostgreSQL puts the list in the DETAIL; Notice carries one text.
		e.notice("00000", fmt.Sprintf("drop cascades to %d other objects\n%s", len(ds.cascaded), strings.Join(lines, "\n")))
	}
}

// allRelations lists every relation of the current database.
func (e *executor) allRelations(ctx context.Context) ([]catalog.Descriptor, error) {
	schemas, err := e.x.Writer.Schemas(ctx, e.x.Database.ID)
	if err != nil {
		return nil, err
	}
	var out []catalog.Descriptor
	for _, s := range schemas {
		rels, err := e.x.Writer.Relations(ctx, e.x.Database.ID, s.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, rels...)
	}
	return out, nil
}

// dependent is an object that depends on the relation being dropped.
type dependent struct {
	what string // "view v", "constraint c_fkey on table c", "default value for column id of table t"
	desc catalog.Descriptor
	fk   string // the foreign key's name when desc is the referencing table
	col  string // the column whose default uses a dropped sequence
}

// dependents finds what depends on d: views reading it, foreign keys of
// other tables referencing it (tables), column defaults using it
// (sequences not owned by the column).
func (e *executor) dependents(ctx context.Context, d catalog.Descriptor, ds *dropSet) ([]dependent, error) {
	rels, err := e.allRelations(ctx)
	if err != nil {
		return nil, err
	}
	var out []dependent
	for _, r := range rels {
		if ds.dropped[r.DescID()] || r.DescID() == d.DescID() {
			continue
		}
		switch v := r.(type) {
		case *catalog.View:
			if slices.Contains(v.DependsOn, d.DescID()) {
				out = append(out, dependent{what: "view " + v.Name, desc: v})
			}
		case *catalog.Table:
			for _, fk := range v.ForeignKeys {
				if fk.ReferencedTableID == d.DescID() {
					out = append(out, dependent{what: fmt.Sprintf("constraint %s on table %s", fk.Name, v.Name), desc: v, fk: fk.Name})
				}
			}
			if seq, ok := d.(*catalog.Sequence); ok {
				for _, c := range v.Columns {
					if c.SequenceID == seq.ID && c.Identity == "" || c.SequenceID == 0 && e.defaultUses(ctx, c.DefaultExpr, seq) {
						out = append(out, dependent{what: fmt.Sprintf("default value for column %s of table %s", c.Name, v.Name), desc: v, col: c.Name})
					}
				}
			}
		}
	}
	return out, nil
}

// displayName is a relation's name as PostgreSQL's messages print it:
// qualified unless its schema is on the search path.
func (e *executor) displayName(ctx context.Context, d catalog.Descriptor) string {
	_, schemaID := d.Parent()
	sn := e.schemaName(ctx, schemaID)
	if sn == "" || slices.Contains(e.searchPath(), sn) {
		return d.DescName()
	}
	return sn + "." + d.DescName()
}

// dropRelation drops a table, view or sequence, and with cascade what
// depends on it. top is false for objects dropped by a cascade.
func (e *executor) dropRelation(ctx context.Context, d catalog.Descriptor, cascade bool, ds *dropSet, top bool) error {
	deps, err := e.dependents(ctx, d, ds)
	if err != nil {
		return err
	}
	if len(deps) > 0 && !cascade {
		err := pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop %s %s because other objects depend on it", kindWord(d.DescKind()), d.DescName())
		lines := make([]string, len(deps))
		for i, dep := range deps {
			lines[i] = fmt.Sprintf("%s depends on %s %s", dep.what, kindWord(d.DescKind()), d.DescName())
		}
		return err.WithDetail("%s", strings.Join(lines, "\n")).WithHint("Use DROP ... CASCADE to drop the dependent objects too.")
	}
	ds.dropped[d.DescID()] = true
	if !top {
		ds.cascaded = append(ds.cascaded, kindWord(d.DescKind())+" "+e.displayName(ctx, d))
	}
	for _, dep := range deps {
		switch {
		case dep.fk != "" || dep.col != "":
			ds.cascaded = append(ds.cascaded, dep.what)
			cur, err := e.x.Writer.TableByID(ctx, dep.desc.DescID())
			if err != nil {
				return err
			}
			t := cloneTable(cur)
			if dep.fk != "" {
				t.ForeignKeys = slices.DeleteFunc(t.ForeignKeys, func(fk catalog.ForeignKey) bool { return fk.Name == dep.fk })
			} else if c := t.ColumnByName(dep.col); c != nil {
				c.DefaultExpr, c.SequenceID = "", 0
			}
			if err := e.x.Writer.Update(ctx, t); err != nil {
				return err
			}
		default:
			if ds.dropped[dep.desc.DescID()] {
				continue
			}
			fresh, err := e.x.Writer.ByID(ctx, dep.desc.DescID())
			if err != nil {
				return err
			}
			if err := e.dropRelation(ctx, fresh, cascade, ds, false); err != nil {
				return err
			}
		}
	}
	// Re-read: cascades above may have changed d (ReferencedBy).
	cur, err := e.x.Writer.ByID(ctx, d.DescID())
	if err != nil {
		return err
	}
	switch v := cur.(type) {
	case *catalog.Table:
		return e.dropTable(ctx, v, ds)
	case *catalog.Sequence:
		if err := e.x.Writer.Drop(ctx, v); err != nil {
			return err
		}
		if err := e.clearOwnedDefault(ctx, v, ds); err != nil {
			return err
		}
		return sequence.Clear(ctx, e.x.Txn, v.ID)
	case *catalog.TypeDesc:
		// DROP SCHEMA ... CASCADE: the schema's tables went first
		// (dropSchemaContents); columns elsewhere still using the type
		// would be left without it.
		users, err := e.typeUsers(ctx, v)
		if err != nil {
			return err
		}
		for _, u := range users {
			if !ds.dropped[u.desc.DescID()] {
				return notSupported("cannot drop type %s: %s (drop or alter it first)", v.Name, u.what)
			}
		}
	}
	return e.x.Writer.Drop(ctx, cur)
}

// clearOwnedDefault removes the default of the column owning a dropped
// sequence (DROP SEQUENCE ... CASCADE of a serial's sequence).
func (e *executor) clearOwnedDefault(ctx context.Context, seq *catalog.Sequence, ds *dropSet) error {
	if seq.OwnedBy == nil || ds.dropped[seq.OwnedBy.TableID] {
		return nil
	}
	cur, err := e.x.Writer.TableByID(ctx, seq.OwnedBy.TableID)
	if err != nil {
		return nil // the owner is gone already
	}
	c := cur.ColumnByID(seq.OwnedBy.ColumnID)
	if c == nil || c.SequenceID != seq.ID {
		return nil
	}
	t := cloneTable(cur)
	c = t.ColumnByID(seq.OwnedBy.ColumnID)
	if c.Identity != "" {
		return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop sequence %s because column %s of table %s requires it", seq.Name, c.Name, t.Name).
			WithHint("You can drop column %s of table %s instead.", c.Name, t.Name)
	}
	if strings.Contains(c.DefaultExpr, "nextval(") {
		c.DefaultExpr = ""
	}
	c.SequenceID = 0
	return e.x.Writer.Update(ctx, t)
}

// dropTable removes a table's descriptor, its owned sequences and its data.
func (e *executor) dropTable(ctx context.Context, t *catalog.Table, ds *dropSet) error {
	layout, err := t.Layout()
	if err != nil {
		return err
	}
	rels, err := e.x.Writer.Relations(ctx, t.DatabaseID, t.SchemaID)
	if err != nil {
		return err
	}
	// A foreign key from t to a table being dropped by the same statement
	// would make the Writer update that table's back-references after it
	// is gone: drop the references first.
	if err := e.x.Writer.Drop(ctx, t); err != nil {
		return err
	}
	for _, r := range rels {
		if s, ok := r.(*catalog.Sequence); ok && s.OwnedBy != nil && s.OwnedBy.TableID == t.ID && !ds.dropped[s.ID] {
			ds.dropped[s.ID] = true
			if err := e.x.Writer.Drop(ctx, s); err != nil {
				return err
			}
			if err := sequence.Clear(ctx, e.x.Txn, s.ID); err != nil {
				return err
			}
		}
	}
	// Its statistics go with it (in the same transaction, so a ROLLBACK
	// brings them back with the table).
	if err := stats.Delete(ctx, e.x.Txn, t.ID); err != nil {
		return err
	}
	e.clearDataAfterCommit(layout)
	return nil
}

// clearDataAfterCommit frees a dropped table's storage once the
// transaction has committed: a range deletion (kv.DB.ClearRanges) of each
// of its spans (rowenc.FreeSpans: the table's keyspace in its group, which
// holds its primary and local indexes under every storage ID they ever
// had, garbage of aborted loads included; the whole group of a
// hash-partitioned table that has one of its own, or the table's keyspace
// in each bucket of a distributed table's group, which the tables
// colocated with it share; and each global index), instead of a tombstone
// intent per row in the transaction. No descriptor names the table after the
// commit and its ID is never handed out again, so nothing can write
// there; a rollback (or one to a savepoint before the DROP) never runs
// it. A clear cut short leaves unreachable garbage.
func (e *executor) clearDataAfterCommit(layout *rowenc.TableLayout) {
	spans := layout.FreeSpans()
	db := e.x.Txn.DB()
	e.x.Txn.AfterCommit(func(ctx context.Context) {
		_ = db.ClearRanges(ctx, spans)
	})
}

// clearData deletes every KV of a table (its rows and index entries).
func (e *executor) clearData(ctx context.Context, layout *rowenc.TableLayout) error {
	for _, sp := range layout.FreeSpans() {
		if _, err := e.x.Txn.DelRange(ctx, sp.Key, sp.EndKey); err != nil {
			return fmt.Errorf("clearing table data: %w", err)
		}
	}
	return nil
}

func (e *executor) dropIndexes(ctx context.Context, n *pg_query.DropStmt, cascade bool) error {
	for _, obj := range n.Objects {
		rv := rangeVarOf(obj)
		t, idx, err := e.findIndex(ctx, rv)
		if err != nil {
			return err
		}
		if idx == nil {
			if n.MissingOk {
				e.notice("00000", fmt.Sprintf("index %q does not exist, skipping", rv.Relname))
				continue
			}
			return pgerror.New(pgerrcode.UndefinedObject, "index %q does not exist", qualified(rv))
		}
		if err := e.checkIndexOwner(ctx, t, idx.Name); err != nil {
			return err
		}
		if err := e.dropIndex(ctx, t, idx.Name, cascade, false); err != nil {
			return err
		}
	}
	return nil
}

// findIndex finds the table holding index rv (schema-qualified, or in the
// search path). idx is nil when there is none; a relation of that name
// that is not an index is 42809.
func (e *executor) findIndex(ctx context.Context, rv *pg_query.RangeVar) (*catalog.Table, *catalog.Index, error) {
	schemas := []string{rv.Schemaname}
	if rv.Schemaname == "" {
		schemas = e.searchPath()
	}
	for _, sn := range schemas {
		s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, sn)
		if err != nil || s.Virtual {
			if rv.Schemaname != "" && err != nil {
				return nil, nil, err
			}
			continue
		}
		// One lookup of each namespace (catalog.Reader.IndexTable),
		// not a read of every relation of the schema.
		if r, ok, err := e.x.Writer.LookupID(ctx, e.x.Database.ID, s.ID, rv.Relname); err != nil {
			return nil, nil, err
		} else if ok {
			d, err := e.x.Writer.ByID(ctx, r)
			if err != nil {
				return nil, nil, err
			}
			return nil, nil, pgerror.New(pgerrcode.WrongObjectType, "%q is not an index", rv.Relname).
				WithHint("Use DROP %s to remove a %s.", strings.ToUpper(kindWord(d.DescKind())), kindWord(d.DescKind()))
		}
		t, ok, err := e.x.Writer.IndexTable(ctx, e.x.Database.ID, s.ID, rv.Relname)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return t, t.IndexByName(rv.Relname), nil
		}
	}
	return nil, nil, nil
}

// dropIndex removes index name of t (and its entries). An index backing a
// constraint can only be dropped with the constraint (2BP01), unless
// viaConstraint; foreign keys of other tables that need it go with
// CASCADE.
func (e *executor) dropIndex(ctx context.Context, cur *catalog.Table, name string, cascade, viaConstraint bool) error {
	t := cloneTable(cur)
	idx := t.IndexByName(name)
	if idx.ID == catalog.PrimaryIndexID && !viaConstraint {
		return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop index %s because constraint %s on table %s requires it", name, name, t.Name).
			WithHint("You can drop constraint %s on table %s instead.", name, t.Name)
	}
	if idx.ID == catalog.PrimaryIndexID {
		return notSupported("dropping a primary key is not supported yet")
	}
	for _, u := range t.Uniques {
		if u.IndexID == idx.ID && !viaConstraint {
			return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop index %s because constraint %s on table %s requires it", name, u.Name, t.Name).
				WithHint("You can drop constraint %s on table %s instead.", u.Name, t.Name)
		}
	}
	// Foreign keys (of other tables, or of t itself) whose referenced
	// columns only this unique index covers.
	if idx.Unique {
		remaining := cloneTable(t)
		remaining.Indexes = slices.DeleteFunc(remaining.Indexes, func(i catalog.Index) bool { return i.ID == idx.ID })
		var deps []dependent
		rels, err := e.allRelations(ctx)
		if err != nil {
			return err
		}
		for _, r := range rels {
			other, ok := r.(*catalog.Table)
			if !ok {
				continue
			}
			if other.ID == t.ID {
				other = t
			}
			for _, fk := range other.ForeignKeys {
				if fk.ReferencedTableID == t.ID && !hasUniqueIndexOn(remaining, fk.ReferencedColumnIDs) {
					deps = append(deps, dependent{what: fmt.Sprintf("constraint %s on table %s", fk.Name, other.Name), desc: other, fk: fk.Name})
				}
			}
		}
		if len(deps) > 0 {
			if !cascade {
				lines := make([]string, len(deps))
				for i, d := range deps {
					lines[i] = fmt.Sprintf("%s depends on index %s", d.what, name)
				}
				return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop index %s because other objects depend on it", name).
					WithDetail("%s", strings.Join(lines, "\n")).WithHint("Use DROP ... CASCADE to drop the dependent objects too.")
			}
			ds := &dropSet{}
			for _, d := range deps {
				ds.cascaded = append(ds.cascaded, d.what)
				if d.desc.DescID() == t.ID {
					t.ForeignKeys = slices.DeleteFunc(t.ForeignKeys, func(fk catalog.ForeignKey) bool { return fk.Name == d.fk })
					continue
				}
				ot, err := e.x.Writer.TableByID(ctx, d.desc.DescID())
				if err != nil {
					return err
				}
				oc := cloneTable(ot)
				oc.ForeignKeys = slices.DeleteFunc(oc.ForeignKeys, func(fk catalog.ForeignKey) bool { return fk.Name == d.fk })
				if err := e.x.Writer.Update(ctx, oc); err != nil {
					return err
				}
			}
			e.reportCascade(ds)
			// The updates above rewrote t's ReferencedBy: start from the
			// stored version again.
			fresh, err := e.x.Writer.TableByID(ctx, t.ID)
			if err != nil {
				return err
			}
			fks := t.ForeignKeys
			t = cloneTable(fresh)
			t.ForeignKeys = fks
		}
	}
	layout, err := t.Layout()
	if err != nil {
		return err
	}
	id := t.IndexByName(name).ID
	t.Indexes = slices.DeleteFunc(t.Indexes, func(i catalog.Index) bool { return i.ID == id })
	t.Uniques = slices.DeleteFunc(t.Uniques, func(u catalog.UniqueConstraint) bool { return u.IndexID == id })
	dropUnusedExprColumns(t)
	dropUnusedShardColumns(t)
	if err := e.x.Writer.Update(ctx, t); err != nil {
		return err
	}
	return e.deleteIndexData(ctx, layout, id)
}

func (e *executor) dropSchemas(ctx context.Context, n *pg_query.DropStmt, cascade bool) error {
	ds := &dropSet{dropped: map[catalog.ID]bool{}}
	var schemas []*catalog.Schema
	for _, obj := range n.Objects {
		name := strVal(obj)
		s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, name)
		if pgerror.Code(err) == pgerrcode.InvalidSchemaName {
			if n.MissingOk {
				e.notice("00000", fmt.Sprintf("schema %q does not exist, skipping", name))
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if s.Virtual {
			return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop schema %s because it is required by the database system", name)
		}
		if err := e.checkOwner(ctx, s); err != nil {
			return err
		}
		if !slices.ContainsFunc(schemas, func(x *catalog.Schema) bool { return x.ID == s.ID }) {
			schemas = append(schemas, s)
		}
	}
	if cascade {
		// All the schemas' contents at once: a table in one may use a
		// type of another.
		if err := e.dropSchemaContents(ctx, schemas, ds); err != nil {
			return err
		}
	}
	for _, s := range schemas {
		if err := e.x.Writer.Drop(ctx, s); err != nil {
			return err
		}
	}
	e.reportCascade(ds)
	return nil
}

// dropSchemaContents drops every relation and type of the schemas
// (CASCADE, DROP DATABASE, DROP OWNED). Relations of all the schemas go
// first, then domains, then the other types: a column, or a domain, in one
// schema may use a type of another, and a type is dropped only once
// nothing left uses it.
func (e *executor) dropSchemaContents(ctx context.Context, schemas []*catalog.Schema, ds *dropSet) error {
	var rels []catalog.Descriptor
	for _, s := range schemas {
		rs, err := e.x.Writer.Relations(ctx, s.DatabaseID, s.ID)
		if err != nil {
			return err
		}
		rels = append(rels, rs...)
	}
	rank := func(d catalog.Descriptor) int {
		switch t, ok := d.(*catalog.TypeDesc); {
		case !ok:
			return 0
		case t.Domain != nil:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(rels, func(a, b catalog.Descriptor) int { return rank(a) - rank(b) })
	for _, r := range rels {
		if ds.dropped[r.DescID()] {
			continue
		}
		fresh, err := e.x.Writer.ByID(ctx, r.DescID())
		if pgerror.Code(err) == pgerrcode.UndefinedObject {
			continue // dropped with its owner
		}
		if err != nil {
			return err
		}
		if err := e.dropRelation(ctx, fresh, true, ds, false); err != nil {
			return err
		}
	}
	return nil
}

func (e *executor) createDatabase(ctx context.Context, n *pg_query.CreatedbStmt) error {
	// CREATEDB is not a role attribute in Cairn: creating a database
	// takes a superuser.
	if err := e.requireSuperuser(ctx, "create database"); err != nil {
		return err
	}
	owner := e.x.User
	colocated := false
	for _, d := range defElems(n.Options) {
		switch d.Defname {
		case "colocated", "colocation":
			v, err := colocationValue(d)
			if err != nil {
				return err
			}
			colocated = v
		case "owner":
			owner = defString(d)
		case "encoding":
			if enc := strings.ToUpper(strings.ReplaceAll(defString(d), "-", "")); enc != "UTF8" && enc != "UNICODE" && enc != "SQL_ASCII" {
				return notSupported("encoding %q is not supported: Cairn stores UTF8", defString(d))
			}
		case "template", "locale", "lc_collate", "lc_ctype", "connection_limit", "is_template", "allow_connections",
			"tablespace", "strategy", "icu_locale", "locale_provider", "collation_version", "oid", "builtin_locale", "icu_rules":
			// Accepted: they describe storage and locales Cairn does not have.
		default:
			return pgerror.New(pgerrcode.SyntaxError, "option %q not recognized", d.Defname)
		}
	}
	db := &catalog.Database{Name: truncateIdent(n.Dbname), Owner: owner, Colocated: colocated}
	if err := e.x.Writer.Create(ctx, db); err != nil {
		return err
	}
	if colocated {
		return e.splitDatabaseGroup(ctx, db)
	}
	return nil
}

func (e *executor) dropDatabase(ctx context.Context, n *pg_query.DropdbStmt) error {
	db, err := e.x.Writer.Database(ctx, n.Dbname)
	if pgerror.Code(err) == pgerrcode.InvalidCatalogName && n.MissingOk {
		e.notice("00000", fmt.Sprintf("database %q does not exist, skipping", n.Dbname))
		return nil
	}
	if err != nil {
		return err
	}
	if db.ID == e.x.Database.ID {
		return pgerror.New(pgerrcode.ObjectInUse, "cannot drop the currently open database")
	}
	if err := e.checkOwner(ctx, db); err != nil {
		return err
	}
	// Everything in the database goes with it, data included.
	sub := &executor{x: &Context{Txn: e.x.Txn, Writer: e.x.Writer, Database: db, User: e.x.User, Types: e.x.Types, DB: e.x.DB}, stmt: e.stmt}
	schemas, err := e.x.Writer.Schemas(ctx, db.ID)
	if err != nil {
		return err
	}
	ds := &dropSet{dropped: map[catalog.ID]bool{}}
	if err := sub.dropSchemaContents(ctx, schemas, ds); err != nil {
		return err
	}
	return e.x.Writer.Drop(ctx, db)
}

func (e *executor) createSchema(ctx context.Context, n *pg_query.CreateSchemaStmt) error {
	if len(n.SchemaElts) > 0 {
		return notSupported("CREATE SCHEMA with schema elements is not supported yet")
	}
	name := n.Schemaname
	owner := e.x.User
	if n.Authrole != nil && n.Authrole.Rolename != "" {
		owner = n.Authrole.Rolename
		if _, err := e.x.Writer.Role(ctx, owner); err != nil {
			return err
		}
		if name == "" {
			name = owner
		}
	}
	name = truncateIdent(name)
	db, err := e.x.Writer.Database(ctx, e.x.Database.Name)
	if err != nil {
		return err
	}
	if err := e.checkPrivilege(ctx, db, catalog.PrivCreate); err != nil {
		return err
	}
	if _, err := e.x.Writer.Schema(ctx, e.x.Database.ID, name); err == nil {
		if n.IfNotExists {
			e.notice(pgerrcode.DuplicateSchema, fmt.Sprintf("schema %q already exists, skipping", name))
			return nil
		}
		return pgerror.New(pgerrcode.DuplicateSchema, "schema %q already exists", name)
	}
	return e.x.Writer.Create(ctx, &catalog.Schema{DatabaseID: e.x.Database.ID, Name: name, Owner: owner})
}

// seqRefRE finds the sequences a stored default names
// ("nextval('s')", "nextval('s'::regclass)").
var seqRefRE = regexp.MustCompile(`(?:nextval|currval|setval)\('((?:[^']|'')+)'(?:::regclass)?`)

// defaultUses reports whether a column default written by the user (not
// a serial's) names seq, so that DROP SEQUENCE refuses (2BP01) as
// PostgreSQL's dependency on the default does. The name is resolved as
// the default resolved it: qualified, or by the search path.
func (e *executor) defaultUses(ctx context.Context, def string, seq *catalog.Sequence) bool {
	if def == "" {
		return false
	}
	for _, m := range seqRefRE.FindAllStringSubmatch(def, -1) {
		names := splitQualified(strings.ReplaceAll(m[1], "''", "'"))
		if len(names) == 0 || names[len(names)-1] != seq.Name {
			continue
		}
		if len(names) > 1 {
			if e.schemaName(ctx, seq.SchemaID) == names[len(names)-2] {
				return true
			}
			continue
		}
		rv := &pg_query.RangeVar{Relname: seq.Name}
		if d, _, err := e.lookupRelation(ctx, rv); err == nil && d.DescID() == seq.ID {
			return true
		}
	}
	return false
}

// splitQualified splits a possibly qualified, possibly quoted name as
// regclass input does: unquoted parts fold to lower case.
func splitQualified(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '"' && quoted && i+1 < len(s) && s[i+1] == '"':
			cur.WriteByte('"')
			i++
		case ch == '"':
			quoted = !quoted
		case ch == '.' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		case !quoted:
			cur.WriteString(strings.ToLower(string(ch)))
		default:
			cur.WriteByte(ch)
		}
	}
	return append(out, cur.String())
}
