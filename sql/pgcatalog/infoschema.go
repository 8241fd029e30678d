package pgcatalog

import (
	"context"
	"strconv"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// isGens generate the information_schema views (SQL standard names and
// spellings: "YES"/"NO", data types as format_type names them).
var isGens = map[string]genFn{
	"schemata":                genSchemata,
	"tables":                  genISTables,
	"columns":                 genColumns,
	"table_constraints":       genTableConstraints,
	"key_column_usage":        genKeyColumnUsage,
	"referential_constraints": genReferentialConstraints,
	"constraint_column_usage": genConstraintColumnUsage,
	"check_constraints":       genCheckConstraints,
	"views":                   genISViews,
	"sequences":               genISSequences,
}

func init() {
	for name, sp := range isSpecs {
		define("information_schema", name, sp.oid, true, sp.cols, isGens[name])
	}
}

func colID(id int64) rowenc.ColumnID { return rowenc.ColumnID(id) }

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

func genSchemata(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, sc := range s.listedSchemas() {
		out = append(out, t.row("catalog_name", s.db.Name, "schema_name", sc.Name, "schema_owner", owner(sc.Owner)))
	}
	return out, nil
}

func genISTables(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	add := func(schema, name string, view, insertable bool) {
		kind := "BASE TABLE"
		if view {
			kind = "VIEW"
		}
		out = append(out, t.row("table_catalog", s.db.Name, "table_schema", schema, "table_name", name,
			"table_type", kind, "is_insertable_into", yesNo(insertable), "is_typed", "NO"))
	}
	for _, r := range s.rels {
		switch d := r.desc.(type) {
		case *catalog.Table:
			add(r.schema.Name, r.desc.DescName(), false, true)
		case *catalog.View:
			_, ins := plan.ViewIsUpdatable(d.Query)
			add(r.schema.Name, r.desc.DescName(), true, ins)
		}
	}
	for _, v := range ordered {
		add(v.schema, v.name, v.view, !v.view)
	}
	return out, nil
}

// dataType is information_schema's data_type: the type's name without
// modifiers, "ARRAY" for arrays.
func dataType(t *types.T) string {
	switch {
	case t.Family == types.ArrayFamily:
		return "ARRAY"
	case t.Oid == types.BPChar.Oid:
		return "character"
	case t.Family == types.EnumFamily:
		return "USER-DEFINED"
	}
	if u, ok := types.OidToType(t.Oid); ok {
		return u.Name()
	}
	return t.Name()
}

// typeFacets are the columns' length, precision and scale as
// information_schema reports them (PostgreSQL's _pg_char_max_length and
// friends); nil where they do not apply.
func typeFacets(t *types.T) (charMax, octetMax, numPrec, numRadix, numScale, dtPrec any) {
	switch t.Family {
	case types.StringFamily:
		if t.Width > 0 {
			charMax, octetMax = int(t.Width), int(t.Width)*4
		} else {
			octetMax = 1073741824
		}
	case types.IntFamily:
		numPrec, numRadix, numScale = int(t.Width), 2, 0
	case types.FloatFamily:
		numPrec, numRadix = 53, 2
		if t.Width == 32 {
			numPrec = 24
		}
	case types.NumericFamily:
		numRadix = 10
		if t.Precision > 0 {
			numPrec, numScale = int(t.Precision), int(t.Scale)
		}
	case types.DateFamily:
		dtPrec = 0
	case types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily:
		dtPrec = 6
		if t.Precision >= 0 {
			dtPrec = int(t.Precision)
		}
	case types.IntervalFamily:
		dtPrec = 6
	}
	return
}

func genColumns(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	add := func(schema, table string, pos int, name string, typ *types.T, kv ...any) {
		charMax, octetMax, numPrec, numRadix, numScale, dtPrec := typeFacets(typ)
		udt, udtSchema := typ.PGName(), "pg_catalog"
		if e := typ; e.Family == types.EnumFamily || e.Family == types.ArrayFamily && e.Elem.Family == types.EnumFamily {
			if e.Family == types.ArrayFamily {
				e = e.Elem
			}
			udtSchema = e.Enum.Schema
		}
		base := []any{"table_catalog", s.db.Name, "table_schema", schema, "table_name", table, "column_name", name,
			"ordinal_position", pos, "is_nullable", "YES", "data_type", dataType(typ),
			"character_maximum_length", charMax, "character_octet_length", octetMax,
			"numeric_precision", numPrec, "numeric_precision_radix", numRadix, "numeric_scale", numScale,
			"datetime_precision", dtPrec, "udt_catalog", s.db.Name, "udt_schema", udtSchema, "udt_name", udt,
			"dtd_identifier", strconv.Itoa(pos), "is_self_referencing", "NO", "is_identity", "NO", "identity_cycle", "NO",
			"is_generated", "NEVER", "is_updatable", "YES"}
		if typ.Domain != nil {
			base = append(base, "domain_catalog", s.db.Name, "domain_schema", typ.Domain.Schema, "domain_name", typ.Domain.Name)
		}
		out = append(out, t.row(append(base, kv...)...))
	}
	for _, r := range s.rels {
		switch d := r.desc.(type) {
		case *catalog.Table:
			for _, c := range visibleColumns(d) {
				kv := []any{"is_nullable", yesNo(c.Nullable && (c.Type.Domain == nil || !c.Type.Domain.NotNull))}
				switch {
				case c.ComputedExpr != "":
					kv = append(kv, "is_generated", "ALWAYS", "generation_expression", c.ComputedExpr)
				case c.Identity != "":
					gen := "BY DEFAULT"
					if c.Identity == catalog.IdentityAlways {
						gen = "ALWAYS"
					}
					kv = append(kv, "is_identity", "YES", "identity_generation", gen, "identity_cycle", "NO")
					if sr, ok := s.byID[c.SequenceID]; ok {
						if q, ok := sr.desc.(*catalog.Sequence); ok {
							kv = append(kv, "identity_start", strconv.FormatInt(q.Start, 10),
								"identity_increment", strconv.FormatInt(q.Increment, 10),
								"identity_maximum", strconv.FormatInt(q.Max, 10),
								"identity_minimum", strconv.FormatInt(q.Min, 10), "identity_cycle", yesNo(q.Cycle))
						}
					}
				case c.DefaultExpr != "":
					// pg_get_expr's text, relation names as the search path sees them.
					kv = append(kv, "column_default", builtins.QualifyRegclassLiterals(s.regResolver(ctx), c.DefaultExpr))
				}
				add(r.schema.Name, d.Name, int(c.ID), c.Name, c.Type, kv...)
			}
		case *catalog.View:
			upd := plan.ViewColumnsUpdatable(d.Query, len(d.Columns))
			for i, c := range d.Columns {
				add(r.schema.Name, d.Name, i+1, c.Name, c.Type, "is_updatable", yesNo(upd[i]))
			}
		}
	}
	for _, v := range ordered {
		for i, c := range v.cols {
			add(v.schema, v.name, i+1, c.Name, c.T, "is_updatable", "NO")
		}
	}
	return out, nil
}

var constraintTypes = map[byte]string{'p': "PRIMARY KEY", 'u': "UNIQUE", 'c': "CHECK", 'f': "FOREIGN KEY"}

func genTableConstraints(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, c := range s.constraints(ctx) {
		var nullsDistinct any
		if c.kind == 'u' {
			nullsDistinct = "YES"
		}
		out = append(out, t.row("constraint_catalog", s.db.Name, "constraint_schema", c.schema.Name,
			"constraint_name", c.name, "table_catalog", s.db.Name, "table_schema", c.schema.Name,
			"table_name", c.table.Name, "constraint_type", constraintTypes[c.kind], "is_deferrable", "NO",
			"initially_deferred", "NO", "enforced", "YES", "nulls_distinct", nullsDistinct))
	}
	for _, nn := range s.notNulls() {
		out = append(out, t.row("constraint_catalog", s.db.Name, "constraint_schema", nn.schema.Name,
			"constraint_name", nn.name, "table_catalog", s.db.Name, "table_schema", nn.schema.Name,
			"table_name", nn.table.Name, "constraint_type", "CHECK", "is_deferrable", "NO",
			"initially_deferred", "NO", "enforced", "YES"))
	}
	return out, nil
}

// notNull is a NOT NULL column, which the SQL standard's views show as a
// CHECK constraint named as PostgreSQL names it (nspoid_reloid_attnum_not_null).
type notNull struct {
	schema *catalog.Schema
	table  *catalog.Table
	col    *catalog.Column
	name   string
}

func (s *snapshot) notNulls() []notNull {
	var out []notNull
	for _, r := range s.tables() {
		d := r.desc.(*catalog.Table)
		for _, c := range visibleColumns(d) {
			if !c.Nullable {
				out = append(out, notNull{r.schema, d, c,
					strconv.FormatUint(uint64(nspOID(r.schema.ID)), 10) + "_" + strconv.FormatUint(uint64(d.ID), 10) +
						"_" + strconv.FormatUint(uint64(c.ID), 10) + "_not_null"})
			}
		}
	}
	return out
}

func genKeyColumnUsage(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, c := range s.constraints(ctx) {
		if c.kind == 'c' {
			continue
		}
		for i, id := range c.cols {
			var posInUnique any
			if c.kind == 'f' && i < len(c.fk.ReferencedColumnIDs) && c.index != nil {
				keys, _, _ := keyColumns(c.refTable, c.index)
				for j, k := range keys {
					if k == c.fk.ReferencedColumnIDs[i] {
						posInUnique = j + 1
					}
				}
			}
			out = append(out, t.row("constraint_catalog", s.db.Name, "constraint_schema", c.schema.Name,
				"constraint_name", c.name, "table_catalog", s.db.Name, "table_schema", c.schema.Name,
				"table_name", c.table.Name, "column_name", colName(c.table, colID(id)), "ordinal_position", i+1,
				"position_in_unique_constraint", posInUnique))
		}
	}
	return out, nil
}

var ruleNames = map[catalog.RefAction]string{catalog.NoAction: "NO ACTION", catalog.Restrict: "RESTRICT",
	catalog.Cascade: "CASCADE", catalog.SetNull: "SET NULL", catalog.SetDefault: "SET DEFAULT"}

func genReferentialConstraints(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	cons := s.constraints(ctx)
	var out [][]types.Datum
	for _, c := range cons {
		if c.kind != 'f' {
			continue
		}
		var uSchema, uName any
		if c.index != nil {
			for _, u := range cons {
				if (u.kind == 'p' || u.kind == 'u') && u.table == c.refTable && u.index == c.index {
					uSchema, uName = u.schema.Name, u.name
				}
			}
		}
		out = append(out, t.row("constraint_catalog", s.db.Name, "constraint_schema", c.schema.Name,
			"constraint_name", c.name, "unique_constraint_catalog", s.db.Name, "unique_constraint_schema", uSchema,
			"unique_constraint_name", uName, "match_option", "NONE", "update_rule", ruleNames[c.fk.OnUpdate],
			"delete_rule", ruleNames[c.fk.OnDelete]))
	}
	return out, nil
}

func genConstraintColumnUsage(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, c := range s.constraints(ctx) {
		table, cols, schema := c.table, c.cols, c.schema
		if c.kind == 'f' {
			if c.refTable == nil {
				continue
			}
			table, cols = c.refTable, ids(c.fk.ReferencedColumnIDs)
			if rr, ok := s.byID[table.ID]; ok {
				schema = rr.schema
			}
		}
		for _, id := range cols {
			out = append(out, t.row("table_catalog", s.db.Name, "table_schema", schema.Name, "table_name", table.Name,
				"column_name", colName(table, colID(id)), "constraint_catalog", s.db.Name,
				"constraint_schema", c.schema.Name, "constraint_name", c.name))
		}
	}
	return out, nil
}

func genCheckConstraints(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, c := range s.constraints(ctx) {
		if c.kind == 'c' {
			out = append(out, t.row("constraint_catalog", s.db.Name, "constraint_schema", c.schema.Name,
				"constraint_name", c.name, "check_clause", c.check))
		}
	}
	for _, nn := range s.notNulls() {
		out = append(out, t.row("constraint_catalog", s.db.Name, "constraint_schema", nn.schema.Name,
			"constraint_name", nn.name, "check_clause", quoteIdent(nn.col.Name)+" IS NOT NULL"))
	}
	return out, nil
}

func genISViews(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.rels {
		if v, ok := r.desc.(*catalog.View); ok {
			upd, ins := plan.ViewIsUpdatable(v.Query)
			check := "NONE"
			switch v.CheckOption {
			case "local":
				check = "LOCAL"
			case "cascaded":
				check = "CASCADED"
			}
			out = append(out, t.row("table_catalog", s.db.Name, "table_schema", r.schema.Name, "table_name", v.Name,
				"view_definition", s.viewDef(ctx, v), "check_option", check, "is_updatable", yesNo(upd), "is_insertable_into", yesNo(ins),
				"is_trigger_updatable", "NO", "is_trigger_deletable", "NO", "is_trigger_insertable_into", "NO"))
		}
	}
	return out, nil
}

func genISSequences(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.sequences() {
		q := r.desc.(*catalog.Sequence)
		out = append(out, t.row("sequence_catalog", s.db.Name, "sequence_schema", r.schema.Name, "sequence_name", q.Name,
			"data_type", "bigint", "numeric_precision", 64, "numeric_precision_radix", 2, "numeric_scale", 0,
			"start_value", strconv.FormatInt(q.Start, 10), "minimum_value", strconv.FormatInt(q.Min, 10),
			"maximum_value", strconv.FormatInt(q.Max, 10), "increment", strconv.FormatInt(q.Increment, 10),
			"cycle_option", yesNo(q.Cycle)))
	}
	return out, nil
}

// viewDef is pg_get_viewdef's text of v, which pg_views.definition and
// information_schema.views.view_definition show as well.
func (s *snapshot) viewDef(ctx context.Context, v *catalog.View) string {
	if s.env == nil || s.env.Catalog == nil {
		return v.Query + ";"
	}
	cat := plan.NewCatalog(s.env.Catalog, s.db, s.env.Session.SearchPath, Lookup)
	return plan.ViewDef(ctx, cat, &types.Context{}, v)
}
