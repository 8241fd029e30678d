package ddl

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Enum types: CREATE TYPE ... AS ENUM, ALTER TYPE ... ADD VALUE / RENAME
// VALUE / RENAME TO / OWNER TO, DROP TYPE, COMMENT ON TYPE.
//
// A type is a catalog.TypeDesc in its schema's relation namespace. Table
// and view descriptors keep a copy of the members of each enum their
// columns use (catalog's enumRef), so every change of the type rewrites
// those copies in the same transaction (refreshTypeUsers); member
// representations never change, so rows stored before stay readable.

// typeNameParts reads the name of a type as the statements give it: a
// TypeName (DROP TYPE, COMMENT ON TYPE), a list of strings (ALTER TYPE
// ... RENAME TO, OWNER TO) or a bare string.
func typeNameParts(n *pg_query.Node) []string {
	if n == nil {
		return nil
	}
	if tn := n.GetTypeName(); tn != nil {
		return nameList(tn.Names)
	}
	if l := n.GetList(); l != nil {
		return nameList(l.Items)
	}
	if s := strVal(n); s != "" {
		return []string{s}
	}
	return nil
}

func rangeVarOfNames(names []string) (*pg_query.RangeVar, error) {
	rv := &pg_query.RangeVar{}
	switch len(names) {
	case 1:
		rv.Relname = names[0]
	case 2:
		rv.Schemaname, rv.Relname = names[0], names[1]
	case 3:
		rv.Catalogname, rv.Schemaname, rv.Relname = names[0], names[1], names[2]
	default:
		return nil, pgerror.New(pgerrcode.SyntaxError, "improper qualified name (too many dotted names): %s", strings.Join(names, "."))
	}
	return rv, nil
}

func errTypeMissing(names []string) error {
	return pgerror.New(pgerrcode.UndefinedObject, "type \"%s\" does not exist", strings.Join(names, "."))
}

// lookupType resolves an existing type by its (possibly qualified) name:
// nil with no error when there is no type of that name; rel is the
// relation found instead, if any (a table's name is a type's name too in
// PostgreSQL, its row type).
func (e *executor) lookupType(ctx context.Context, names []string) (td *catalog.TypeDesc, sc *catalog.Schema, rel catalog.Descriptor, err error) {
	rv, err := rangeVarOfNames(names)
	if err != nil {
		return nil, nil, nil, err
	}
	d, s, err := e.lookupRelation(ctx, rv)
	if pgerror.Code(err) == pgerrcode.UndefinedTable || pgerror.Code(err) == pgerrcode.InvalidSchemaName {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if t, ok := d.(*catalog.TypeDesc); ok {
		return t, s, nil, nil
	}
	return nil, s, d, nil
}

// enumOf returns the type names names, 42704 when there is none and 42809
// when it is no enum.
func (e *executor) enumOf(ctx context.Context, names []string) (*catalog.TypeDesc, *catalog.Schema, error) {
	td, sc, rel, err := e.lookupType(ctx, names)
	if err != nil {
		return nil, nil, err
	}
	if rel != nil {
		return nil, nil, pgerror.New(pgerrcode.WrongObjectType, "%s is not an enum", rel.DescName())
	}
	if td == nil {
		return nil, nil, errTypeMissing(names)
	}
	return td, sc, nil
}

// enumOnly refuses a domain where an enum is required (ADD/RENAME VALUE).
func enumOnly(td *catalog.TypeDesc) error {
	if td.Domain != nil {
		return pgerror.New(pgerrcode.WrongObjectType, "%s is not an enum", td.Name)
	}
	return nil
}

func (e *executor) createEnum(ctx context.Context, n *pg_query.CreateEnumStmt) error {
	names := nameList(n.TypeName)
	rv, err := rangeVarOfNames(names)
	if err != nil {
		return err
	}
	sc, err := e.creationSchema(ctx, rv)
	if err != nil {
		return err
	}
	name := truncateIdent(rv.Relname)
	// Any relation's name is taken: in PostgreSQL it names the
	// relation's row type.
	if _, ok, err := e.x.Writer.LookupID(ctx, e.x.Database.ID, sc.ID, name); err != nil {
		return err
	} else if ok {
		return pgerror.New(pgerrcode.DuplicateObject, "type \"%s\" already exists", name)
	}
	labels := make([]string, len(n.Vals))
	for i, v := range n.Vals {
		labels[i] = strVal(v)
	}
	id, err := e.x.Writer.AllocateID(ctx)
	if err != nil {
		return err
	}
	arr, err := e.x.Writer.AllocateID(ctx)
	if err != nil {
		return err
	}
	et, err := types.MakeEnum(uint32(id), uint32(arr), sc.Name, name, labels)
	if err != nil {
		return err
	}
	td := &catalog.TypeDesc{ID: id, DatabaseID: e.x.Database.ID, SchemaID: sc.ID, Name: name,
		Owner: e.x.User, ArrayID: arr}
	td.SetMembers(et.Enum)
	return e.x.Writer.Create(ctx, td)
}

func (e *executor) alterEnum(ctx context.Context, n *pg_query.AlterEnumStmt) error {
	td, sc, err := e.enumOf(ctx, nameList(n.TypeName))
	if err != nil {
		return err
	}
	if err := enumOnly(td); err != nil {
		return err
	}
	if err := e.checkOwner(ctx, td); err != nil {
		return err
	}
	m := td.EnumType(sc.Name).Enum
	if n.OldVal != "" {
		if m, err = m.RenameValue(n.OldVal, n.NewVal); err != nil {
			return err
		}
	} else {
		var exists bool
		m, exists, err = m.AddValue(n.NewVal, n.NewValNeighbor, !n.NewValIsAfter, n.SkipIfNewValExists)
		if err != nil {
			return err
		}
		if exists {
			e.notice(pgerrcode.DuplicateObject, fmt.Sprintf("enum label \"%s\" already exists, skipping", n.NewVal))
			return nil
		}
	}
	c, err := catalog.Clone(td)
	if err != nil {
		return err
	}
	c.SetMembers(m)
	if err := e.x.Writer.Update(ctx, c); err != nil {
		return err
	}
	return e.refreshTypeUsers(ctx, c, sc.Name)
}

// renameType is ALTER TYPE t RENAME TO u.
func (e *executor) renameType(ctx context.Context, n *pg_query.RenameStmt, newName string) error {
	names := typeNameParts(n.Object)
	td, sc, err := e.enumOf(ctx, names)
	if err != nil {
		if n.MissingOk && pgerror.Code(err) == pgerrcode.UndefinedObject {
			e.notice("00000", fmt.Sprintf("type \"%s\" does not exist, skipping", strings.Join(names, ".")))
			return nil
		}
		return err
	}
	if err := e.checkOwner(ctx, td); err != nil {
		return err
	}
	if _, ok, err := e.x.Writer.LookupID(ctx, e.x.Database.ID, sc.ID, newName); err != nil {
		return err
	} else if ok {
		return pgerror.New(pgerrcode.DuplicateObject, "type \"%s\" already exists", newName)
	}
	c, err := catalog.Clone(td)
	if err != nil {
		return err
	}
	if err := e.x.Writer.Rename(ctx, c, newName); err != nil {
		return err
	}
	c.Name = newName
	return e.refreshTypeUsers(ctx, c, sc.Name)
}

// dropTypes is DROP TYPE [IF EXISTS] t, ... [CASCADE | RESTRICT].
// domainOnly (DROP DOMAIN) refuses a type that is no domain, 42809.
func (e *executor) dropTypes(ctx context.Context, n *pg_query.DropStmt, cascade, domainOnly bool) error {
	for _, obj := range n.Objects {
		names := typeNameParts(obj)
		td, sc, rel, err := e.lookupType(ctx, names)
		if err != nil {
			return err
		}
		if rel != nil {
			w := kindWord(rel.DescKind())
			return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop type %s because %s %s requires it", rel.DescName(), w, rel.DescName()).
				WithHint("You can drop %s %s instead.", w, rel.DescName())
		}
		if td == nil {
			if n.MissingOk {
				e.notice("00000", fmt.Sprintf("type \"%s\" does not exist, skipping", strings.Join(names, ".")))
				continue
			}
			return errTypeMissing(names)
		}
		if domainOnly && td.Domain == nil {
			return pgerror.New(pgerrcode.WrongObjectType, "\"%s\" is not a domain", td.Name)
		}
		if err := e.checkOwner(ctx, td); err != nil {
			return err
		}
		users, err := e.typeUsers(ctx, td)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			if cascade {
				return notSupported("DROP TYPE ... CASCADE is not supported yet when columns use the type (drop or alter them first)")
			}
			var detail []string
			for _, u := range users {
				detail = append(detail, u.what)
			}
			return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop type %s because other objects depend on it", td.Name).
				WithDetail("%s", strings.Join(detail, "\n")).
				WithHint("Use DROP ... CASCADE to drop the dependent objects too.")
		}
		_ = sc
		if err := e.x.Writer.Drop(ctx, td); err != nil {
			return err
		}
	}
	return nil
}

// commentOnType is COMMENT ON TYPE t IS '...'.
func (e *executor) commentOnType(ctx context.Context, n *pg_query.CommentStmt) error {
	td, _, err := e.enumOf(ctx, typeNameParts(n.Object))
	if err != nil {
		return err
	}
	if err := e.checkOwner(ctx, td); err != nil {
		return err
	}
	c, err := catalog.Clone(td)
	if err != nil {
		return err
	}
	c.Comment = n.Comment
	return e.x.Writer.Update(ctx, c)
}

// typeUser is a table or view with columns of an enum type or its array.
type typeUser struct {
	desc catalog.Descriptor
	// what is PostgreSQL's dependency line: "column m of table t depends
	// on type mood" (the first such column).
	what string
}

func usesType(t *types.T, td *catalog.TypeDesc) bool {
	if t == nil {
		return false
	}
	if t.Domain != nil && t.Domain.Oid == uint32(td.ID) {
		return true
	}
	if t.Family == types.ArrayFamily && t.Elem != nil && t.Elem.Domain != nil && t.Elem.Domain.Oid == uint32(td.ID) {
		return true
	}
	return td.Domain == nil && (t.Oid == uint32(td.ID) || t.Oid == uint32(td.ArrayID))
}

// typeUsers lists the database's tables and views whose columns use td.
// It reads every relation of the database: enum DDL is rare, and a
// reverse index would have to be kept by every CREATE and DROP TABLE.
func (e *executor) typeUsers(ctx context.Context, td *catalog.TypeDesc) ([]typeUser, error) {
	schemas, err := e.x.Writer.Schemas(ctx, e.x.Database.ID)
	if err != nil {
		return nil, err
	}
	var out []typeUser
	for _, sc := range schemas {
		rels, err := e.x.Writer.Relations(ctx, e.x.Database.ID, sc.ID)
		if err != nil {
			return nil, err
		}
		for _, d := range rels {
			switch v := d.(type) {
			case *catalog.Table:
				for _, c := range v.Columns {
					if usesType(c.Type, td) {
						out = append(out, typeUser{d, fmt.Sprintf("column %s of table %s depends on type %s", c.Name, v.Name, c.Type.Name())})
						break
					}
				}
			case *catalog.View:
				for _, c := range v.Columns {
					if usesType(c.Type, td) {
						out = append(out, typeUser{d, fmt.Sprintf("view %s depends on type %s", v.Name, c.Type.Name())})
						break
					}
				}
			case *catalog.TypeDesc:
				// A domain over the type.
				if v.Domain != nil && v.ID != td.ID {
					if bt, err := v.Type(sc.Name); err == nil && usesType(types.BaseType(bt), td) {
						out = append(out, typeUser{d, fmt.Sprintf("type %s depends on type %s", v.Name, td.Name)})
					}
				}
			}
		}
	}
	return out, nil
}

// refreshTypeUsers rewrites the copy of td's members in every table and
// view whose columns use it (see the file comment); their new versions
// also invalidate plans cached with the old members.
func (e *executor) refreshTypeUsers(ctx context.Context, td *catalog.TypeDesc, schema string) error {
	users, err := e.typeUsers(ctx, td)
	if err != nil {
		return err
	}
	et, err := td.Type(schema)
	if err != nil {
		return err
	}
	at, err := types.MakeArray(et)
	if err != nil {
		return err
	}
	retype := func(t *types.T) *types.T {
		switch {
		case td.Domain != nil:
			// A renamed domain: its columns' copies get the new name.
			if t.Domain != nil && t.Domain.Oid == uint32(td.ID) {
				return et
			}
			return t
		case t.Oid == uint32(td.ID) && t.Domain != nil:
			return types.MakeDomain(et, t.Domain) // a domain over the enum
		case t.Oid == uint32(td.ID):
			return et
		case t.Oid == uint32(td.ArrayID):
			return at
		}
		return t
	}
	for _, u := range users {
		switch v := u.desc.(type) {
		case *catalog.TypeDesc:
			if td.Domain != nil {
				continue
			}
			// A domain over the enum: its base type's copy of the members.
			c, err := catalog.Clone(v)
			if err != nil {
				return err
			}
			c.Domain = catalog.NewDomainDesc(et, v.Domain.NotNull, v.Domain.Default, v.Domain.Checks)
			if err := e.x.Writer.Update(ctx, c); err != nil {
				return err
			}
		case *catalog.Table:
			c := cloneTable(v)
			for i := range c.Columns {
				c.Columns[i].Type = retype(c.Columns[i].Type)
			}
			if err := e.x.Writer.Update(ctx, c); err != nil {
				return err
			}
		case *catalog.View:
			c, err := catalog.Clone(v)
			if err != nil {
				return err
			}
			for i := range c.Columns {
				c.Columns[i].Type = retype(c.Columns[i].Type)
			}
			if err := e.x.Writer.Update(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}
