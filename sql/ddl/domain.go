package ddl

import (
	"context"
	"fmt"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// CREATE DOMAIN name [AS] type [DEFAULT expr] [[CONSTRAINT c] NOT NULL |
// NULL | CHECK (expr)] ...: a catalog.TypeDesc with a DomainDesc. The
// checks are enforced by the binder (sql/sem's DomainCoerce) wherever a
// value becomes one of the domain's: INSERT, UPDATE, casts, defaults.
// DROP DOMAIN is dropTypes (enum.go); ALTER DOMAIN is not supported.

func (e *executor) createDomain(ctx context.Context, n *pg_query.CreateDomainStmt) error {
	rv, err := rangeVarOfNames(nameList(n.Domainname))
	if err != nil {
		return err
	}
	sc, err := e.creationSchema(ctx, rv)
	if err != nil {
		return err
	}
	name := truncateIdent(rv.Relname)
	if _, ok, err := e.x.Writer.LookupID(ctx, e.x.Database.ID, sc.ID, name); err != nil {
		return err
	} else if ok {
		return pgerror.New(pgerrcode.DuplicateObject, "type \"%s\" already exists", name)
	}
	base, _, err := columnType(e.types(), n.TypeName)
	if err != nil {
		return err
	}
	if base.Domain != nil {
		return notSupported("a domain over a domain is not supported yet")
	}
	if n.CollClause != nil {
		if coll := nameList(n.CollClause.Collname); coll[len(coll)-1] != "default" && coll[len(coll)-1] != "C" && coll[len(coll)-1] != "POSIX" {
			return notSupported("collation %q is not supported yet", coll[len(coll)-1])
		}
	}
	var notNull, sawNull bool
	var def string
	var checks []types.DomainCheck
	taken := map[string]bool{}
	for _, cn := range n.Constraints {
		c := cn.GetConstraint()
		if c == nil {
			continue
		}
		switch c.Contype {
		case pg_query.ConstrType_CONSTR_NOTNULL:
			if sawNull {
				return pgerror.New(pgerrcode.SyntaxError, "conflicting NULL/NOT NULL constraints")
			}
			notNull = true
		case pg_query.ConstrType_CONSTR_NULL:
			if notNull {
				return pgerror.New(pgerrcode.SyntaxError, "conflicting NULL/NOT NULL constraints")
			}
			sawNull = true
		case pg_query.ConstrType_CONSTR_DEFAULT:
			if def != "" {
				return pgerror.New(pgerrcode.SyntaxError, "multiple default expressions")
			}
			if def, err = e.defaultText(c.RawExpr, base, ""); err != nil {
				return err
			}
		case pg_query.ConstrType_CONSTR_CHECK:
			ce, err := sem.BuildDomainCheck(e.types(), c.RawExpr, "", base)
			if err != nil {
				return err
			}
			text, err := exprText(ce, c.RawExpr)
			if err != nil {
				return err
			}
			cname := c.Conname
			if cname == "" {
				// PostgreSQL's ChooseConstraintName: name_check, then
				// name_check1, name_check2, ...
				cname = name + "_check"
				for i := 1; taken[cname]; i++ {
					cname = fmt.Sprintf("%s_check%d", name, i)
				}
			} else if taken[cname] {
				return pgerror.New(pgerrcode.DuplicateObject, "constraint \"%s\" for domain \"%s\" already exists", cname, name)
			}
			taken[cname] = true
			checks = append(checks, types.DomainCheck{Name: cname, Expr: text})
		default:
			return notSupported("%s constraints on domains are not supported", constraintWord(c.Contype))
		}
	}
	id, err := e.x.Writer.AllocateID(ctx)
	if err != nil {
		return err
	}
	arr, err := e.x.Writer.AllocateID(ctx)
	if err != nil {
		return err
	}
	td := &catalog.TypeDesc{ID: id, DatabaseID: e.x.Database.ID, SchemaID: sc.ID, Name: name,
		Owner: e.x.User, ArrayID: arr, Domain: catalog.NewDomainDesc(base, notNull, def, checks)}
	return e.x.Writer.Create(ctx, td)
}

func constraintWord(t pg_query.ConstrType) string {
	switch t {
	case pg_query.ConstrType_CONSTR_UNIQUE:
		return "unique"
	case pg_query.ConstrType_CONSTR_PRIMARY:
		return "primary key"
	case pg_query.ConstrType_CONSTR_FOREIGN:
		return "foreign key"
	case pg_query.ConstrType_CONSTR_EXCLUSION:
		return "exclusion"
	}
	return "such"
}
