package plan

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// virtualSchemas are the schemas whose relations are generated rather than
// stored: a qualified name in one of them never reaches the KV catalog.
var virtualSchemas = map[string]bool{
	"pg_catalog":         true,
	"information_schema": true,
	"cairn_catalog":      true,
}

// NewCatalog returns the Catalog the binder resolves names through: a
// catalog.Reader over the session's database and search path, with the
// virtual schemas served by virtual (which returns nil for a name it does
// not know). An unqualified name looks in pg_catalog first, as Postgres does
// when pg_catalog is not on the search path explicitly.
func NewCatalog(r *catalog.Reader, db *catalog.Database, searchPath []string,
	virtual func(schema, name string) VirtualTable) Catalog {
	return &kvCatalog{r: r, db: db, path: searchPath, virtual: virtual}
}

type kvCatalog struct {
	r       *catalog.Reader
	db      *catalog.Database
	path    []string
	virtual func(schema, name string) VirtualTable
}

func undefinedRelation(name string) error {
	return pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", name)
}

func (c *kvCatalog) lookupVirtual(schema, name string) VirtualTable {
	if c.virtual == nil {
		return nil
	}
	return c.virtual(schema, name)
}

func (c *kvCatalog) LookupRelation(ctx context.Context, schema, name string) (Relation, error) {
	if schema != "" {
		if virtualSchemas[schema] {
			if vt := c.lookupVirtual(schema, name); vt != nil {
				return Relation{Virtual: vt}, nil
			}
			return Relation{}, undefinedRelation(schema + "." + name)
		}
		if schema == "pg_temp" {
			// The session's temporary schema, listed first when it has one.
			if len(c.path) == 0 || !strings.HasPrefix(c.path[0], "pg_temp_") {
				return Relation{}, undefinedRelation(schema + "." + name)
			}
			schema = c.path[0]
		} else if strings.HasPrefix(schema, "pg_temp_") && (len(c.path) == 0 || c.path[0] != schema) {
			return Relation{}, pgerror.New(pgerrcode.FeatureNotSupported, "cannot access temporary tables of other sessions")
		}
		sc, err := c.r.Schema(ctx, c.db.ID, schema)
		if err != nil {
			// Postgres's parserOpenTable looks the schema up with
			// missing_ok: a missing schema is a missing relation.
			if pgerror.Code(err) == pgerrcode.InvalidSchemaName {
				return Relation{}, undefinedRelation(schema + "." + name)
			}
			return Relation{}, err
		}
		rel, err := c.inSchema(ctx, sc, name)
		if err != nil && pgerror.Code(err) == pgerrcode.UndefinedTable {
			return Relation{}, undefinedRelation(schema + "." + name)
		}
		return rel, err
	}
	if vt := c.lookupVirtual("pg_catalog", name); vt != nil {
		return Relation{Virtual: vt}, nil
	}
	for _, s := range c.path {
		if s == "pg_catalog" {
			continue // searched first already
		}
		if virtualSchemas[s] {
			if vt := c.lookupVirtual(s, name); vt != nil {
				return Relation{Virtual: vt}, nil
			}
			continue
		}
		// Postgres skips search-path entries that name no schema
		// ("$user" usually), so a missing schema is not an error here.
		sc, ok, err := c.r.LookupSchema(ctx, c.db.ID, s)
		if err != nil {
			return Relation{}, err
		}
		if !ok {
			continue
		}
		rel, err := c.inSchema(ctx, sc, name)
		if err == nil {
			return rel, nil
		}
		if pgerror.Code(err) != pgerrcode.UndefinedTable {
			return Relation{}, err
		}
	}
	return Relation{}, undefinedRelation(name)
}

func (c *kvCatalog) inSchema(ctx context.Context, sc *catalog.Schema, name string) (Relation, error) {
	if sc.Virtual {
		if vt := c.lookupVirtual(sc.Name, name); vt != nil {
			return Relation{Virtual: vt}, nil
		}
		return Relation{}, undefinedRelation(name)
	}
	d, err := c.r.Relation(ctx, c.db.ID, sc.ID, name)
	if err != nil {
		return Relation{}, err
	}
	switch d := d.(type) {
	case *catalog.Table:
		return Relation{Table: d}, nil
	case *catalog.View:
		return Relation{View: d}, nil
	case *catalog.Sequence:
		return Relation{Sequence: d}, nil
	case *catalog.TypeDesc:
		// A type shares the relation namespace; to a query it is no
		// relation, as in PostgreSQL.
		return Relation{}, undefinedRelation(name)
	}
	return Relation{}, fmt.Errorf("plan: relation %q is a %T", name, d)
}

func (c *kvCatalog) TableByID(ctx context.Context, id catalog.ID) (*catalog.Table, error) {
	return c.r.TableByID(ctx, id)
}
