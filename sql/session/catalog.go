package session

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgcatalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/jackc/pgerrcode"
)

// nameResolver implements plan.Catalog for one statement: names resolve in
// the session's database and search path, as of the statement's
// transaction (through the Reader), with the virtual schemas from
// sql/pgcatalog.
type nameResolver struct {
	r          *catalog.Reader
	db         *catalog.Database
	searchPath []string // $user already substituted
}

var _ plan.Catalog = (*nameResolver)(nil)

// LookupRelation implements plan.Catalog.
func (c *nameResolver) LookupRelation(ctx context.Context, schema, name string) (plan.Relation, error) {
	if schema != "" {
		if vt := pgcatalog.Lookup(schema, name); vt != nil {
			return plan.Relation{Virtual: vt}, nil
		}
		sch, err := c.r.Schema(ctx, c.db.ID, schema)
		if err != nil {
			return plan.Relation{}, err
		}
		if sch.Virtual {
			return plan.Relation{}, pgerror.New(pgerrcode.UndefinedTable, "relation \"%s.%s\" does not exist", schema, name)
		}
		rel, found, err := c.inSchema(ctx, sch, name)
		if err != nil {
			return plan.Relation{}, err
		}
		if !found {
			return plan.Relation{}, pgerror.New(pgerrcode.UndefinedTable, "relation \"%s.%s\" does not exist", schema, name)
		}
		return rel, nil
	}
	// pg_catalog is searched first unless the path names it, as Postgres
	// does; the virtual schemas are not stored, so only pgcatalog knows.
	if vt := pgcatalog.Lookup("pg_catalog", name); vt != nil {
		return plan.Relation{Virtual: vt}, nil
	}
	for _, sp := range c.searchPath {
		if vt := pgcatalog.Lookup(sp, name); vt != nil {
			return plan.Relation{Virtual: vt}, nil
		}
		sch, err := c.r.Schema(ctx, c.db.ID, sp)
		if err != nil {
			if pgerror.Code(err) == pgerrcode.InvalidSchemaName {
				continue // Postgres skips search_path entries that do not exist
			}
			return plan.Relation{}, err
		}
		if sch.Virtual {
			continue
		}
		rel, found, err := c.inSchema(ctx, sch, name)
		if err != nil {
			return plan.Relation{}, err
		}
		if found {
			return rel, nil
		}
	}
	return plan.Relation{}, pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", name)
}

func (c *nameResolver) inSchema(ctx context.Context, sch *catalog.Schema, name string) (plan.Relation, bool, error) {
	d, err := c.r.Relation(ctx, c.db.ID, sch.ID, name)
	if err != nil {
		if pgerror.Code(err) == pgerrcode.UndefinedTable {
			return plan.Relation{}, false, nil
		}
		return plan.Relation{}, false, err
	}
	switch d := d.(type) {
	case *catalog.Table:
		return plan.Relation{Table: d}, true, nil
	case *catalog.View:
		return plan.Relation{View: d}, true, nil
	case *catalog.Sequence:
		return plan.Relation{Sequence: d}, true, nil
	}
	return plan.Relation{}, false, fmt.Errorf("session: relation %q is a %s", name, d.DescKind())
}

// TableByID implements plan.Catalog.
func (c *nameResolver) TableByID(ctx context.Context, id catalog.ID) (*catalog.Table, error) {
	return c.r.TableByID(ctx, id)
}
