package pgcatalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/types"
)

type genFn = func(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error)

// pgGens generate the pg_catalog relations; a relation of pgSpecs without
// one is always empty in Cairn (no inheritance, triggers, ...).
var pgGens = map[string]genFn{
	"pg_namespace":     genNamespace,
	"pg_class":         genClass,
	"pg_stats":         genStats,
	"pg_attribute":     genAttribute,
	"pg_type":          genType,
	"pg_enum":          genEnum,
	"pg_index":         genIndex,
	"pg_constraint":    genConstraint,
	"pg_attrdef":       genAttrdef,
	"pg_sequence":      genSequence,
	"pg_sequences":     genSequences,
	"pg_database":      genDatabase,
	"pg_extension":     genExtension,
	"pg_roles":         genRoles,
	"pg_authid":        genRoles,
	"pg_auth_members":  genAuthMembers,
	"pg_user":          genUser,
	"pg_settings":      genSettings,
	"pg_description":   genDescription,
	"pg_am":            genAm,
	"pg_tables":        genTables,
	"pg_views":         genViews,
	"pg_indexes":       genIndexes,
	"pg_proc":          genProc,
	"pg_depend":        genDepend,
	"pg_collation":     genCollation,
	"pg_tablespace":    genTablespace,
	"pg_language":      genLanguage,
	"pg_opclass":       genOpclass,
	"pg_rewrite":       genRewrite,
	"pg_stat_activity": genStatActivity,
	// pg_stat_statements is the extension's view, always present: the
	// node's statements by fingerprint (VirtualEnv.Statements), those of
	// roles the user is a member of in full, others' query text hidden as
	// PostgreSQL hides it.
	"pg_stat_statements": genStatStatements,
	// pg_cursors lists the session's own open cursors (VirtualEnv.Cursors):
	// psycopg 3's server-side cursors look themselves up in it.
	"pg_cursors": func(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
		if s.env.Cursors == nil {
			return nil, nil
		}
		var out [][]types.Datum
		for _, c := range s.env.Cursors() {
			out = append(out, t.row("name", c.Name, "statement", c.Statement, "is_holdable", c.Holdable,
				"is_binary", c.Binary, "is_scrollable", c.Scrollable, "creation_time", types.TimestampTZFromTime(c.Created)))
		}
		return out, nil
	},
	"pg_stat_user_indexes": func(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
		var out [][]types.Datum
		for _, r := range s.tables() {
			d := r.desc.(*catalog.Table)
			for _, ix := range indexes(d) {
				out = append(out, t.row("relid", r.oid(), "indexrelid", indexOID(d.ID, ix.ID), "schemaname", r.schema.Name,
					"relname", d.Name, "indexrelname", ix.Name))
			}
		}
		return out, nil
	},
	// Access counters are not kept: they read 0. n_live_tup and
	// last_analyze come from the table statistics (stats.go).
	"pg_stat_user_tables": func(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
		var out [][]types.Datum
		all := tableStats(ctx, s)
		for _, r := range s.tables() {
			out = append(out, t.row(append([]any{"relid", r.oid(), "schemaname", r.schema.Name, "relname", r.desc.DescName()},
				userTableStats(all[r.desc.DescID()])...)...))
		}
		return out, nil
	},
}

func init() {
	for name, sp := range pgSpecs {
		define("pg_catalog", name, sp.oid, sp.oid >= 12000, sp.cols, pgGens[name])
	}
}

func genNamespace(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, sc := range s.listedSchemas() {
		out = append(out, t.row("oid", nspOID(sc.ID), "nspname", sc.Name, "nspowner", roleOID(owner(sc.Owner)),
			"nspacl", aclText(sc.ACL)))
	}
	return out, nil
}

// aclText is an ACL column's value: NULL for the default ACL (nil), as
// PostgreSQL leaves relacl NULL until the first GRANT or REVOKE.
func aclText(acl []catalog.ACLItem) any {
	if acl == nil {
		return nil
	}
	out := make([]string, len(acl))
	for i, it := range acl {
		out[i] = it.String()
	}
	return out
}

// classRow is the pg_class row shared by every kind of relation.
func classRow(t *vtable, oid uint32, name string, nsp uint32, relOwner string, kind string, natts int, kv ...any) []types.Datum {
	base := []any{"oid", oid, "relname", name, "relnamespace", nsp, "relowner", roleOID(owner(relOwner)),
		"relfilenode", oid, "relpersistence", "p", "relkind", kind, "relnatts", natts, "relreplident", "d",
		"relispopulated", true, "reltuples", -1, "relam", 0}
	if kind == "r" || kind == "m" {
		base = append(base, "relam", oidHeap)
	}
	if kind != "r" {
		base = append(base, "relreplident", "n")
	}
	return t.row(append(base, kv...)...)
}

func genClass(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	all := tableStats(ctx, s)
	for _, r := range s.rels {
		nsp := nspOID(r.schema.ID)
		switch d := r.desc.(type) {
		case *catalog.Table:
			ixs := indexes(d)
			// Foreign keys are triggers in PostgreSQL, on both tables.
			out = append(out, classRow(t, r.oid(), d.Name, nsp, d.Owner, "r", len(visibleColumns(d)),
				append([]any{"relacl", aclText(d.ACL), "relhasindex", len(ixs) > 0, "relchecks", len(d.Checks),
					"relhastriggers", len(d.ForeignKeys) > 0 || len(d.ReferencedBy) > 0,
					"relpersistence", persistence(r.schema)}, classStats(all[d.ID])...)...))
			for _, ix := range ixs {
				keys, _, stored := keyColumns(d, ix)
				am := oidBtree
				if ix.Kind == catalog.IndexGIN {
					am = oidGin
				}
				out = append(out, classRow(t, indexOID(d.ID, ix.ID), ix.Name, nsp, d.Owner, "i", len(keys)+len(stored), "relam", am,
					"relpersistence", persistence(r.schema)))
			}
		case *catalog.View:
			// WITH CHECK OPTION is a reloption in PostgreSQL; pg_dump
			// reads it from here to write the view's CHECK OPTION back.
			var opts any
			if d.CheckOption != "" {
				opts = []string{"check_option=" + d.CheckOption}
			}
			out = append(out, classRow(t, r.oid(), d.Name, nsp, d.Owner, "v", len(d.Columns), "relacl", aclText(d.ACL), "reloptions", opts))
		case *catalog.Sequence:
			out = append(out, classRow(t, r.oid(), d.Name, nsp, d.Owner, "S", 3, "relacl", aclText(d.ACL),
				"relpersistence", persistence(r.schema)))
		}
	}
	for _, v := range ordered {
		kind := "r"
		if v.view {
			kind = "v"
		}
		out = append(out, classRow(t, v.oid, v.name, nspOID(schemaIDOf(v.schema)), "", kind, len(v.cols)))
	}
	return out, nil
}

func schemaIDOf(name string) catalog.ID {
	switch name {
	case "information_schema":
		return catalog.InformationSchemaID
	case "cairn_catalog":
		return catalog.CairnCatalogSchemaID
	}
	return catalog.PgCatalogSchemaID
}

// typeAttrs are the pg_type/pg_attribute storage properties of a type.
func typeAttrs(typ *types.T) (length int, byval bool, align, storage string) {
	length = int(typ.Size())
	byval = length > 0 && length <= 8
	switch {
	case length == 1 || length == -2 || typ.Oid == types.Name.Oid:
		align = "c"
	case length == 2:
		align = "s"
	case typ.Family == types.ArrayFamily:
		// An array is aligned as its elements, at least to int.
		align = "i"
		if _, _, ea, _ := typeAttrs(typ.Elem); ea == "d" {
			align = "d"
		}
	case length == 8 || typ.Family == types.IntervalFamily:
		align = "d"
	case length == 16:
		align, byval = "c", false
		if typ.Family == types.IntervalFamily {
			align = "d"
		}
	default:
		align = "i"
	}
	storage = "p"
	if length == -1 {
		storage = "x"
		if typ.Family == types.NumericFamily {
			storage = "m"
		}
	}
	return
}

func collationOf(typ *types.T) uint32 {
	switch typ.Oid {
	case types.Name.Oid, types.MustArray(types.Name).Oid:
		return oidCollC // PostgreSQL's name compares bytewise
	case types.Char.Oid, types.MustArray(types.Char).Oid:
		return 0
	}
	if typ.Family == types.StringFamily || typ.Family == types.ArrayFamily && typ.Elem.Family == types.StringFamily {
		return oidCollDefault
	}
	return 0
}

func attrRow(t *vtable, rel uint32, name string, typ *types.T, num int, kv ...any) []types.Datum {
	length, byval, align, storage := typeAttrs(typ)
	ndims := 0
	if typ.Family == types.ArrayFamily {
		ndims = 1
	}
	typOid := typ.Oid
	if typ.Domain != nil {
		typOid = typ.Domain.Oid // pg_attribute names the domain
	}
	base := []any{"attrelid", rel, "attname", name, "atttypid", typOid, "attstattarget", -1, "attlen", length,
		"attnum", num, "attndims", ndims, "attcacheoff", -1, "atttypmod", typ.Typmod(), "attbyval", byval,
		"attalign", align, "attstorage", storage, "attcompression", "", "attidentity", "", "attgenerated", "",
		"attislocal", true, "attcollation", collationOf(typ)}
	return t.row(append(base, kv...)...)
}

func genAttribute(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.rels {
		switch d := r.desc.(type) {
		case *catalog.Table:
			for _, c := range visibleColumns(d) {
				out = append(out, attrRow(t, r.oid(), c.Name, c.Type, int(c.ID),
					"attnotnull", !c.Nullable, "atthasdef", c.DefaultExpr != "" || c.ComputedExpr != "",
					"atthasmissing", c.MissingValue != nil, "attidentity", identityCode(c.Identity),
					"attgenerated", generatedCode(c)))
			}
			for _, ix := range indexes(d) {
				keys, _, stored := keyColumns(d, ix)
				for i, id := range append(keys, stored...) {
					c := d.ColumnByID(id)
					var kv []any
					if i >= len(keys) {
						kv = []any{"attcollation", 0} // INCLUDE columns are not compared
					}
					out = append(out, attrRow(t, indexOID(d.ID, ix.ID), c.Name, c.Type, i+1, kv...))
				}
			}
		case *catalog.View:
			for i, c := range d.Columns {
				out = append(out, attrRow(t, r.oid(), c.Name, c.Type, i+1))
			}
		case *catalog.Sequence:
			for i, n := range []string{"last_value", "log_cnt"} {
				out = append(out, attrRow(t, r.oid(), n, types.Int8, i+1, "attnotnull", true))
			}
			out = append(out, attrRow(t, r.oid(), "is_called", types.Bool, 3, "attnotnull", true))
		}
	}
	for _, v := range ordered {
		for i, c := range v.cols {
			out = append(out, attrRow(t, v.oid, c.Name, c.T, i+1, "attnotnull", !v.view))
		}
	}
	return out, nil
}

func identityCode(id catalog.Identity) string {
	switch id {
	case catalog.IdentityAlways:
		return "a"
	case catalog.IdentityByDefault:
		return "d"
	}
	return ""
}

// generatedCode is attgenerated: 's' for every generated column, virtual
// ones included (PostgreSQL 15 has stored ones only; to a client a
// virtual generated column reads the same).
func generatedCode(c *catalog.Column) string {
	if c.ComputedExpr != "" {
		return "s"
	}
	return ""
}

// builtinTypes are the types pg_type lists: the scalars, the reg* aliases,
// unknown, and their arrays.
func builtinTypes() []*types.T {
	var out []*types.T
	for _, base := range [][]*types.T{types.Scalars, types.RegTypes} {
		for _, t := range base {
			out = append(out, t)
			if a, err := types.MakeArray(t); err == nil {
				out = append(out, a)
			}
		}
	}
	return append(out, types.Unknown, types.Int2Vector, types.OidVector)
}

// pseudoTypes are the pseudo-types built-in functions are declared with
// (pg_proc.proargtypes and prorettype name them).
var pseudoTypes = []struct {
	oid    uint32
	name   string
	varlen bool // stored like an array: typlen -1, aligned on double
}{
	{2276, "any", false}, {2277, "anyarray", true}, {2283, "anyelement", false}, {2776, "anynonarray", false},
	{5077, "anycompatible", false}, {5078, "anycompatiblearray", true}, {2249, "record", true}, {2278, "void", false},
	{3500, "anyenum", false},
}

func genType(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, typ := range builtinTypes() {
		length, byval, align, storage := typeAttrs(typ)
		cat, pref := typ.Category()
		var elem, arr uint32
		var subscript any = types.DOid(0)
		if typ.Family == types.ArrayFamily {
			elem = typ.Elem.Oid
		} else if a, err := types.MakeArray(typ); err == nil {
			arr = a.Oid
		}
		if typ.Oid == types.Name.Oid {
			elem = types.Char.Oid // a name subscripts as its bytes
		}
		if types.IsVector(typ) {
			elem, arr = typ.Elem.Oid, 0
		}
		kind, name := "b", typ.PGName()
		if typ.Family == types.UnknownFamily {
			kind, name = "p", "unknown"
		}
		in, outFn := builtins.TypeIOFuncs(typ)
		out = append(out, t.row("oid", typ.Oid, "typname", name, "typnamespace", oidPgCatalog,
			"typinput", types.DOid(in), "typoutput", types.DOid(outFn),
			"typowner", oidSuperuser, "typlen", length, "typbyval", byval, "typtype", kind,
			"typcategory", string(cat), "typispreferred", pref, "typisdefined", true, "typdelim", ",",
			"typsubscript", subscript, "typelem", elem, "typarray", arr, "typalign", align,
			"typstorage", storage, "typtypmod", -1, "typcollation", collationOf(typ)))
	}
	for _, p := range pseudoTypes {
		length, byval, align, storage := 4, true, "i", "p"
		if p.varlen {
			length, byval, align, storage = -1, false, "d", "x"
		}
		out = append(out, t.row("oid", p.oid, "typname", p.name, "typnamespace", oidPgCatalog,
			"typowner", oidSuperuser, "typlen", length, "typbyval", byval, "typtype", "p", "typcategory", "P",
			"typisdefined", true, "typdelim", ",", "typalign", align, "typstorage", storage, "typtypmod", -1))
	}
	return append(out, userTypeRows(s, t)...), nil
}

func genIndex(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.tables() {
		d := r.desc.(*catalog.Table)
		for _, ix := range indexes(d) {
			keys, orders, stored := keyColumns(d, ix)
			var indkey, coll, class, opt []int64
			var exprs []string
			for i, id := range append(keys, stored...) {
				if c := d.ColumnByID(id); c != nil && c.IsIndexExpr() {
					// An expression: attnum 0, the expression in indexprs.
					indkey = append(indkey, 0)
					exprs = append(exprs, c.ComputedExpr)
				} else {
					indkey = append(indkey, int64(id))
				}
				if i < len(keys) {
					typ := d.ColumnByID(id).Type
					coll = append(coll, int64(collationOf(typ)))
					oc := defaultOpclass(ix.Kind, typ)
					if ix.Opclass == rowenc.JSONBPathOps {
						oc = oidJSONBPathOps
					}
					class = append(class, int64(oc))
					opt = append(opt, indoption(orders[i]))
				}
			}
			var pred, indexprs any
			if ix.Predicate != "" {
				pred = ix.Predicate
			}
			if len(exprs) > 0 {
				indexprs = strings.Join(exprs, " ")
			}
			public := ix.State == catalog.IndexPublic || ix.State == ""
			out = append(out, t.row("indexrelid", indexOID(d.ID, ix.ID), "indrelid", d.ID,
				"indnatts", len(indkey), "indnkeyatts", len(keys), "indisunique", ix.Unique || ix.ID == catalog.PrimaryIndexID,
				"indisprimary", ix.ID == catalog.PrimaryIndexID, "indimmediate", true, "indisvalid", public,
				"indisready", public || ix.State == catalog.IndexWriteOnly || ix.State == catalog.IndexBackfilling || ix.State == catalog.IndexValidating,
				"indislive", true, "indkey", indkey, "indcollation", coll, "indclass", class, "indoption", opt,
				"indpred", pred, "indexprs", indexprs))
		}
	}
	return out, nil
}

// constraint is one pg_constraint row's content, shared with
// information_schema and pg_get_constraintdef.
type constraint struct {
	oid      uint32
	name     string
	kind     byte // p, u, c, f
	table    *catalog.Table
	schema   *catalog.Schema
	index    *catalog.Index // p and u; for f the referenced unique index, if found
	cols     []int64
	fk       *catalog.ForeignKey
	refTable *catalog.Table
	check    string
	// refSchema qualifies refTable in pg_get_constraintdef's text when
	// the table is not visible in the search path ("" when it is), as
	// ruleutils does: pg_dump, which empties the search path, gets
	// REFERENCES public.t(...).
	refSchema string
}

func (s *snapshot) constraints(ctx context.Context) []constraint {
	var out []constraint
	for _, r := range s.tables() {
		out = append(out, tableConstraints(r.desc.(*catalog.Table), r.schema, func(id catalog.ID) *catalog.Table {
			if rr, ok := s.byID[id]; ok {
				t, _ := rr.desc.(*catalog.Table)
				return t
			}
			return nil
		})...)
	}
	return out
}

func tableConstraints(d *catalog.Table, sc *catalog.Schema, byID func(catalog.ID) *catalog.Table) []constraint {
	var out []constraint
	if hasPrimaryKey(d) {
		keys, _, _ := keyColumns(d, &d.PrimaryIndex)
		out = append(out, constraint{oid: derivedOID(kindConstr, d.ID, uint32(catalog.PrimaryIndexID)),
			name: d.PrimaryIndex.Name, kind: 'p', table: d, schema: sc, index: &d.PrimaryIndex, cols: ids(keys)})
	}
	for _, u := range d.Uniques {
		ix := d.IndexByID(u.IndexID)
		if ix == nil {
			continue
		}
		keys, _, _ := keyColumns(d, ix)
		out = append(out, constraint{oid: derivedOID(kindConstr, d.ID, uint32(u.IndexID)), name: u.Name,
			kind: 'u', table: d, schema: sc, index: ix, cols: ids(keys)})
	}
	for i, c := range d.Checks {
		out = append(out, constraint{oid: derivedOID(kindConstr, d.ID, uint32(subCheck+i)), name: c.Name,
			kind: 'c', table: d, schema: sc, check: c.Expr, cols: checkColumns(d, c.Expr)})
	}
	for i := range d.ForeignKeys {
		fk := &d.ForeignKeys[i]
		c := constraint{oid: derivedOID(kindConstr, d.ID, uint32(subFK+i)), name: fk.Name, kind: 'f',
			table: d, schema: sc, fk: fk, cols: ids(fk.ColumnIDs)}
		if fk.ReferencedTableID == d.ID {
			c.refTable = d
		} else {
			c.refTable = byID(fk.ReferencedTableID)
		}
		if c.refTable != nil {
			c.index = uniqueIndexOn(c.refTable, fk.ReferencedColumnIDs)
		}
		out = append(out, c)
	}
	return out
}

func ids[E ~uint32 | ~uint16 | ~int](xs []E) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

// checkColumns are the columns a CHECK expression mentions (conkey), found
// by matching identifiers outside string literals.
func checkColumns(d *catalog.Table, expr string) []int64 {
	var out []int64
	words := map[string]bool{}
	inStr := false
	start := -1
	flush := func(i int) {
		if start >= 0 {
			w := expr[start:i]
			if strings.HasPrefix(w, `"`) {
				w = strings.Trim(w, `"`) // a quoted identifier keeps its case
			} else {
				w = strings.ToLower(w)
			}
			words[w] = true
			start = -1
		}
	}
	for i, r := range expr {
		switch {
		case r == '\'':
			flush(i)
			inStr = !inStr
		case inStr:
		case r == '_' || r == '"' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' && start >= 0:
			if start < 0 {
				start = i
			}
		default:
			flush(i)
		}
	}
	flush(len(expr))
	for _, c := range visibleColumns(d) {
		if words[c.Name] {
			out = append(out, int64(c.ID))
		}
	}
	return out
}

// uniqueIndexOn finds the unique index whose key is exactly cols (in any
// order), the one a foreign key depends on (conindid).
func uniqueIndexOn(t *catalog.Table, cols []rowenc.ColumnID) *catalog.Index {
	for _, ix := range indexes(t) {
		if !ix.Unique && ix.ID != catalog.PrimaryIndexID {
			continue
		}
		keys, _, _ := keyColumns(t, ix)
		if len(keys) != len(cols) {
			continue
		}
		match := true
		for _, c := range cols {
			found := false
			for _, k := range keys {
				if uint32(k) == uint32(c) {
					found = true
				}
			}
			match = match && found
		}
		if match {
			return ix
		}
	}
	return nil
}

func refAction(a catalog.RefAction) string {
	switch a {
	case catalog.Restrict:
		return "r"
	case catalog.Cascade:
		return "c"
	case catalog.SetNull:
		return "n"
	case catalog.SetDefault:
		return "d"
	}
	return "a"
}

func genConstraint(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, c := range s.constraints(ctx) {
		kv := []any{"oid", c.oid, "conname", c.name, "connamespace", nspOID(c.schema.ID), "contype", string(c.kind),
			"convalidated", true, "conrelid", c.table.ID, "conislocal", true, "conkey", c.cols,
			"confupdtype", " ", "confdeltype", " ", "confmatchtype", " ", "connoinherit", c.kind != 'c'}
		if c.index != nil {
			tid := c.table.ID
			if c.kind == 'f' {
				tid = c.refTable.ID
			}
			kv = append(kv, "conindid", indexOID(tid, c.index.ID))
		}
		switch c.kind {
		case 'c':
			kv = append(kv, "conbin", c.check)
		case 'f':
			kv = append(kv, "confrelid", c.fk.ReferencedTableID, "confkey", ids(c.fk.ReferencedColumnIDs),
				"confupdtype", refAction(c.fk.OnUpdate), "confdeltype", refAction(c.fk.OnDelete), "confmatchtype", "s")
		}
		out = append(out, t.row(kv...))
	}
	return append(out, domainConstraintRows(s, t)...), nil
}

func genAttrdef(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.tables() {
		d := r.desc.(*catalog.Table)
		for _, c := range visibleColumns(d) {
			expr := c.DefaultExpr
			if c.ComputedExpr != "" {
				expr = c.ComputedExpr
			}
			if expr == "" {
				continue
			}
			out = append(out, t.row("oid", attrdefOID(d.ID, c.ID), "adrelid", d.ID, "adnum", c.ID, "adbin", expr))
		}
	}
	return out, nil
}

func (s *snapshot) sequences() []rel {
	var out []rel
	for _, r := range s.rels {
		if _, ok := r.desc.(*catalog.Sequence); ok {
			out = append(out, r)
		}
	}
	return out
}

func genSequence(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.sequences() {
		q := r.desc.(*catalog.Sequence)
		out = append(out, t.row("seqrelid", q.ID, "seqtypid", seqType(q), "seqstart", q.Start,
			"seqincrement", q.Increment, "seqmax", q.Max, "seqmin", q.Min, "seqcache", max(q.Cache, 1), "seqcycle", q.Cycle))
	}
	return out, nil
}

// seqType is a sequence's AS type (pg_sequence.seqtypid): bigint unless
// it says otherwise, a serial's integer.
func seqType(q *catalog.Sequence) uint32 {
	if q.TypeOID == 0 {
		return types.Int8.Oid
	}
	return q.TypeOID
}

// genSequences reads each sequence's value (one KV read per sequence)
// for last_value, NULL for a sequence not yet used, as in PostgreSQL.
func genSequences(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.sequences() {
		q := r.desc.(*catalog.Sequence)
		// last_value is NULL until the first nextval, as in PostgreSQL.
		var last any
		if s.env.Txn != nil {
			v, called, err := sequence.State(ctx, s.env.Txn, q)
			if err != nil {
				return nil, err
			}
			if called {
				last = v
			}
		}
		out = append(out, t.row("schemaname", r.schema.Name, "sequencename", q.Name, "sequenceowner", owner(q.Owner),
			"data_type", types.DOid(seqType(q)), "start_value", q.Start, "min_value", q.Min, "max_value", q.Max,
			"increment_by", q.Increment, "cycle", q.Cycle, "cache_size", max(q.Cache, 1), "last_value", last))
	}
	return out, nil
}

func genDatabase(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, d := range s.dbs {
		out = append(out, t.row("oid", d.ID, "datname", d.Name, "datdba", roleOID(owner(d.Owner)), "datacl", aclText(d.ACL),
			"encoding", oidEncodingUTF8, "datlocprovider", "c", "datallowconn", true, "datconnlimit", -1,
			"dattablespace", oidTablespaceDefault, "datcollate", "C", "datctype", "C"))
	}
	return out, nil
}

// genExtension lists the current database's CREATE EXTENSION records,
// read from the snapshot's database list (the session's descriptor may
// predate a CREATE EXTENSION of its own transaction).
func genExtension(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	db := s.db
	for _, d := range s.dbs {
		if d.ID == s.db.ID {
			db = d
		}
	}
	var out [][]types.Datum
	for _, x := range db.Extensions {
		out = append(out, t.row("oid", x.OID, "extname", x.Name, "extowner", roleOID(owner(x.Owner)),
			"extnamespace", nspOID(x.SchemaID), "extrelocatable", true, "extversion", x.Version))
	}
	return out, nil
}

// genRoles serves pg_roles and pg_authid (which share their columns but
// for rolconfig and oid order); passwords are never shown.
func genRoles(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.roles {
		kv := []any{"oid", roleOID(r.Name), "rolname", r.Name, "rolsuper", r.Superuser, "rolinherit", true,
			"rolcreaterole", r.Superuser, "rolcreatedb", r.Superuser, "rolcanlogin", r.Login,
			"rolreplication", r.Superuser, "rolbypassrls", r.Superuser, "rolconnlimit", -1}
		if t.has("rolconfig") && r.Verifier != "" {
			kv = append(kv, "rolpassword", "********")
		}
		out = append(out, t.row(kv...))
	}
	return out, nil
}

func genUser(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.roles {
		if !r.Login {
			continue
		}
		out = append(out, t.row("usename", r.Name, "usesysid", roleOID(r.Name), "usecreatedb", r.Superuser,
			"usesuper", r.Superuser, "userepl", r.Superuser, "usebypassrls", r.Superuser, "passwd", "********"))
	}
	return out, nil
}

func genSettings(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	if s.env.Settings == nil {
		return nil, nil
	}
	var out [][]types.Datum
	for _, st := range s.env.Settings() {
		out = append(out, t.row("name", st[0], "setting", st[1], "category", "Ungrouped", "short_desc", st[2],
			"context", "user", "vartype", "string", "source", "default", "boot_val", st[1], "reset_val", st[1],
			"pending_restart", false))
	}
	return out, nil
}

func genDescription(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	add := func(oid any, sub int, text string) {
		if text != "" {
			out = append(out, t.row("objoid", oid, "classoid", oidPgClass, "objsubid", sub, "description", text))
		}
	}
	for _, r := range s.rels {
		switch d := r.desc.(type) {
		case *catalog.Table:
			add(d.ID, 0, d.Comment)
			for _, c := range d.Columns {
				if !c.Hidden {
					add(d.ID, int(c.ID), c.Comment)
				}
			}
			for _, ix := range indexes(d) {
				add(indexOID(d.ID, ix.ID), 0, ix.Comment)
			}
			if len(d.ConstraintComments) > 0 {
				for _, c := range tableConstraints(d, r.schema, func(catalog.ID) *catalog.Table { return nil }) {
					if text := d.ConstraintComments[c.name]; text != "" {
						out = append(out, t.row("objoid", c.oid, "classoid", oidPgConstraint, "objsubid", 0, "description", text))
					}
				}
			}
		case *catalog.View:
			add(d.ID, 0, d.Comment)
		case *catalog.Sequence:
			add(d.ID, 0, d.Comment)
		case *catalog.TypeDesc:
			if d.Comment != "" {
				out = append(out, t.row("objoid", uint32(d.ID), "classoid", oidPgType, "objsubid", 0, "description", d.Comment))
			}
		case *catalog.FuncDesc:
			if d.Comment != "" {
				out = append(out, t.row("objoid", uint32(d.ID), "classoid", oidPgProc, "objsubid", 0, "description", d.Comment))
			}
		}
	}
	for _, d := range s.dbs {
		if d.ID != s.db.ID {
			continue
		}
		for _, x := range d.Extensions {
			if x.Comment != "" {
				out = append(out, t.row("objoid", x.OID, "classoid", oidPgExtension, "objsubid", 0, "description", x.Comment))
			}
		}
	}
	// Schemas' comments (public's "standard public schema" among them,
	// which pg_dump compares against to leave it out of a dump).
	for _, sc := range s.schemas {
		if sc.Comment != "" && !sc.Virtual {
			out = append(out, t.row("objoid", nspOID(sc.ID), "classoid", oidPgNamespace, "objsubid", 0, "description", sc.Comment))
		}
	}
	return out, nil
}

func genAm(_ context.Context, _ *snapshot, t *vtable) ([][]types.Datum, error) {
	return [][]types.Datum{
		t.row("oid", oidHeap, "amname", "heap", "amtype", "t"),
		t.row("oid", oidBtree, "amname", "btree", "amtype", "i"),
		t.row("oid", oidHash, "amname", "hash", "amtype", "i"),
		t.row("oid", oidGin, "amname", "gin", "amtype", "i"),
	}, nil
}

func genTables(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.tables() {
		d := r.desc.(*catalog.Table)
		out = append(out, t.row("schemaname", r.schema.Name, "tablename", d.Name, "tableowner", owner(d.Owner),
			"hasindexes", len(indexes(d)) > 0))
	}
	for _, v := range ordered {
		if !v.view {
			out = append(out, t.row("schemaname", v.schema, "tablename", v.name, "tableowner", catalog.SuperuserName))
		}
	}
	return out, nil
}

func genViews(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.rels {
		if v, ok := r.desc.(*catalog.View); ok {
			out = append(out, t.row("schemaname", r.schema.Name, "viewname", v.Name, "viewowner", owner(v.Owner),
				"definition", s.viewDef(ctx, v)))
		}
	}
	return out, nil
}

func genIndexes(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.tables() {
		d := r.desc.(*catalog.Table)
		for _, ix := range indexes(d) {
			out = append(out, t.row("schemaname", r.schema.Name, "tablename", d.Name, "indexname", ix.Name,
				"indexdef", indexDef(r.schema, d, ix, 0, false, false)))
		}
	}
	return out, nil
}

// indexDef is pg_get_indexdef: the whole CREATE INDEX statement (col 0)
// or one key column's name. pretty is the function's pretty flag: as in
// PostgreSQL it prints the predicate without redundant parentheses and
// the table unqualified when visible (the search path finds it).
func indexDef(sc *catalog.Schema, d *catalog.Table, ix *catalog.Index, col int, pretty, visible bool) string {
	keys, orders, stored := keyColumns(d, ix)
	if col > 0 {
		all := append(keys, stored...)
		if col > len(all) {
			return ""
		}
		return keyText(d, all[col-1], pretty)
	}
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.Unique || ix.ID == catalog.PrimaryIndexID {
		b.WriteString("UNIQUE ")
	}
	am := "btree"
	if ix.Kind == catalog.IndexGIN {
		am = "gin"
	}
	table := quoteIdent(sc.Name) + "." + quoteIdent(d.Name)
	if pretty && visible {
		table = quoteIdent(d.Name)
	}
	fmt.Fprintf(&b, "INDEX %s ON %s USING %s (", quoteIdent(ix.Name), table, am)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(keyText(d, k, pretty))
		if ix.Opclass == rowenc.JSONBPathOps {
			b.WriteString(" jsonb_path_ops")
		}
		switch o := orders[i]; {
		case o&rowenc.Descending != 0 && o&rowenc.NullsFirst == 0:
			b.WriteString(" DESC NULLS LAST")
		case o&rowenc.Descending != 0:
			b.WriteString(" DESC")
		case o&rowenc.NullsFirst != 0:
			b.WriteString(" NULLS FIRST")
		}
	}
	b.WriteString(")")
	if len(stored) > 0 && ix.ID != catalog.PrimaryIndexID {
		b.WriteString(" INCLUDE (")
		for i, k := range stored {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteIdent(colName(d, k)))
		}
		b.WriteString(")")
	}
	if ix.Predicate != "" {
		// The stored predicate is the non-pretty form, with its own
		// parentheses where PostgreSQL prints them (none around a bare
		// boolean column).
		pred := ix.Predicate
		if pretty {
			pred = prettyExpr(pred)
		}
		fmt.Fprintf(&b, " WHERE %s", pred)
	}
	return b.String()
}

// keyText is how pg_get_indexdef prints a key column: its name, or for
// an index expression the expression, parenthesized unless it is a bare
// function call (PostgreSQL's looks_like_function).
func keyText(d *catalog.Table, id rowenc.ColumnID, pretty bool) string {
	c := d.ColumnByID(id)
	if c == nil || !c.IsIndexExpr() {
		return quoteIdent(colName(d, id))
	}
	e := c.ComputedExpr
	if pretty {
		e = prettyExpr(e)
	}
	if looksLikeFunction(e) {
		return e
	}
	return "(" + e + ")"
}

// looksLikeFunction reports whether e is one function call: a name, then
// parentheses enclosing the rest.
func looksLikeFunction(e string) bool {
	toks := tokenize(e)
	if len(toks) < 3 || toks[0].kind != 'w' && toks[0].kind != 'q' || toks[1].text != "(" || toks[len(toks)-1].text != ")" {
		return false
	}
	depth := 0
	for i, t := range toks[1:] {
		if t.kind != 'p' {
			continue
		}
		switch t.text {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 && i+1 != len(toks)-1 {
				return false
			}
		}
	}
	return true
}

// indoption is pg_index.indoption for a key column: rowenc's order bits
// are PostgreSQL's INDOPTION_DESC (1) and INDOPTION_NULLS_FIRST (2).
func indoption(o rowenc.Order) int64 {
	var v int64
	if o&rowenc.Descending != 0 {
		v |= 1
	}
	if o&rowenc.NullsFirst != 0 {
		v |= 2
	}
	return v
}

// opclass is a default operator class (pg_opclass), with PostgreSQL 15's
// OIDs: the one an index on a column of the type uses.
type opclass struct {
	oid, method    uint32
	name           string
	inType, family uint32
	keyType        uint32
}

// oidJSONBPathOps is the one operator class here that is not its type's
// default: jsonb's second GIN class, used when an index names it.
const oidJSONBPathOps = 4037

var opclasses = []opclass{
	{10003, oidBtree, "bool_ops", 16, 424, 0}, {10006, oidBtree, "bytea_ops", 17, 428, 0},
	{3124, oidBtree, "int8_ops", 20, 1976, 0}, {1979, oidBtree, "int2_ops", 21, 1976, 0},
	{1978, oidBtree, "int4_ops", 23, 1976, 0}, {3126, oidBtree, "text_ops", 25, 1994, 0},
	{1981, oidBtree, "oid_ops", 26, 1989, 0}, {10012, oidBtree, "float4_ops", 700, 1970, 0},
	{3123, oidBtree, "float8_ops", 701, 1970, 0}, {10004, oidBtree, "bpchar_ops", 1042, 426, 0},
	{3122, oidBtree, "date_ops", 1082, 434, 0}, {10038, oidBtree, "time_ops", 1083, 1996, 0},
	{3128, oidBtree, "timestamp_ops", 1114, 434, 0}, {3127, oidBtree, "timestamptz_ops", 1184, 434, 0},
	{10022, oidBtree, "interval_ops", 1186, 1982, 0}, {3125, oidBtree, "numeric_ops", 1700, 1988, 0},
	{10000, oidBtree, "array_ops", 2277, 397, 0}, {10065, oidBtree, "uuid_ops", 2950, 2968, 0},
	{10088, oidBtree, "jsonb_ops", 3802, 4033, 0},
	{10064, oidGin, "array_ops", 2277, 2745, 2283}, {10090, oidGin, "jsonb_ops", 3802, 4036, 25},
	{oidJSONBPathOps, oidGin, "jsonb_path_ops", 3802, 4037, 23},
}

// defaultOpclass is the operator class an index of kind on a column of
// type t uses (pg_index.indclass): varchar shares text's, the reg* types
// oid's, every array the polymorphic array_ops.
func defaultOpclass(kind catalog.IndexKind, t *types.T) uint32 {
	am := uint32(oidBtree)
	if kind == catalog.IndexGIN {
		am = oidGin
	}
	in := t.Oid
	switch {
	case t.Family == types.ArrayFamily:
		in = 2277
	case t.Family == types.OidFamily:
		in = types.Oid.Oid
	case t.Oid == types.VarChar.Oid:
		in = types.Text.Oid
	}
	for _, c := range opclasses {
		if c.method == am && c.inType == in && c.oid != oidJSONBPathOps {
			return c.oid
		}
	}
	return 0
}

func genOpclass(_ context.Context, _ *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, c := range opclasses {
		out = append(out, t.row("oid", c.oid, "opcmethod", c.method, "opcname", c.name, "opcnamespace", oidPgCatalog,
			"opcowner", oidSuperuser, "opcfamily", c.family, "opcintype", c.inType, "opcdefault", c.oid != oidJSONBPathOps,
			"opckeytype", c.keyType))
	}
	return out, nil
}

// constraintDef is pg_get_constraintdef; pretty is its pretty flag.
func constraintDef(c constraint, pretty bool) string {
	names := func(t *catalog.Table, cols []int64) string {
		var parts []string
		for _, id := range cols {
			parts = append(parts, quoteIdent(colName(t, rowenc.ColumnID(id))))
		}
		return strings.Join(parts, ", ")
	}
	switch c.kind {
	case 'p':
		return "PRIMARY KEY (" + names(c.table, c.cols) + ")"
	case 'u':
		return "UNIQUE (" + names(c.table, c.cols) + ")"
	case 'c':
		if pretty {
			return "CHECK (" + prettyExpr(c.check) + ")"
		}
		return "CHECK (" + c.check + ")"
	}
	ref := "?"
	var refCols string
	if c.refTable != nil {
		ref = quoteIdent(c.refTable.Name)
		if c.refSchema != "" {
			ref = quoteIdent(c.refSchema) + "." + ref
		}
		refCols = names(c.refTable, ids(c.fk.ReferencedColumnIDs))
	}
	def := fmt.Sprintf("FOREIGN KEY (%s) REFERENCES %s(%s)", names(c.table, c.cols), ref, refCols)
	for _, a := range []struct {
		what string
		act  catalog.RefAction
	}{{"UPDATE", c.fk.OnUpdate}, {"DELETE", c.fk.OnDelete}} {
		if a.act != catalog.NoAction {
			def += " ON " + a.what + " " + strings.ToUpper(strings.ReplaceAll(string(a.act), "_", " "))
		}
	}
	return def
}

func genProc(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	out := procRows(s, t)
	seen := map[uint32]bool{}
	for _, name := range builtins.Names() {
		for _, o := range builtins.Lookup(name) {
			if seen[o.OID] {
				continue
			}
			seen[o.OID] = true
			var argTypes []int64
			for _, a := range o.Args {
				argTypes = append(argTypes, int64(a.Oid))
			}
			ret := returnOID(o)
			kind := "f"
			switch o.Class {
			case builtins.AggregateClass:
				kind = "a"
			case builtins.WindowClass:
				kind = "w"
			}
			vol := "v"
			switch o.Volatility {
			case builtins.Immutable:
				vol = "i"
			case builtins.Stable:
				vol = "s"
			}
			var variadic uint32
			if o.Variadic && len(o.Args) > 0 {
				variadic = o.Args[len(o.Args)-1].Oid
			}
			out = append(out, t.row("oid", o.OID, "proname", name, "pronamespace", oidPgCatalog,
				"proowner", oidSuperuser, "prolang", oidLangInternal, "procost", 1, "provariadic", variadic,
				"prokind", kind, "proisstrict", o.Strict, "proretset", o.Class == builtins.Generator,
				"provolatile", vol, "proparallel", "s", "pronargs", len(o.Args), "prorettype", ret,
				"proargtypes", argTypes, "prosrc", name))
		}
	}
	return out, nil
}

// returnOID is prorettype. A polymorphic overload's return type is only
// known for concrete arguments, and its ReturnFunc may refuse the
// pseudo-types themselves: that is anyelement, as PostgreSQL declares most
// of them.
func returnOID(o *builtins.Overload) (oid uint32) {
	if o.Return == nil {
		return 0
	}
	defer func() {
		if recover() != nil {
			oid = 2283 // anyelement
		}
	}()
	if rt := o.Return(o.Args); rt != nil {
		return rt.Oid
	}
	return 0
}

// genDepend lists what PostgreSQL's clients look up in pg_depend: the
// column a sequence belongs to (serial: 'a', identity: 'i').
func genDepend(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	// A SQL-standard function body → the relations it reads (normal
	// dependencies), so pg_dump creates the function after them.
	for _, r := range s.rels {
		if f, ok := r.desc.(*catalog.FuncDesc); ok {
			for _, dep := range f.DependsOn {
				out = append(out, t.row("classid", oidPgProc, "objid", f.ID, "objsubid", 0,
					"refclassid", oidPgClass, "refobjid", dep, "refobjsubid", 0, "deptype", "n"))
			}
		}
	}
	for _, r := range s.sequences() {
		q := r.desc.(*catalog.Sequence)
		if q.OwnedBy == nil {
			continue
		}
		dep := "a"
		if tr, ok := s.byID[q.OwnedBy.TableID]; ok {
			if tb, ok := tr.desc.(*catalog.Table); ok {
				if c := tb.ColumnByID(q.OwnedBy.ColumnID); c != nil && c.Identity != "" {
					dep = "i"
				}
			}
		}
		out = append(out, t.row("classid", oidPgClass, "objid", q.ID, "objsubid", 0, "refclassid", oidPgClass,
			"refobjid", q.OwnedBy.TableID, "refobjsubid", q.OwnedBy.ColumnID, "deptype", dep))
	}
	// A column default that uses a sequence (a serial's, or any
	// nextval('s')) depends on it (a normal dependency of the pg_attrdef
	// entry). pg_dump needs it to create the sequence before the default,
	// and for a serial to see the loop table → default → sequence →
	// owning table, which it breaks by adding the default after the table.
	for _, r := range s.tables() {
		d := r.desc.(*catalog.Table)
		for _, c := range visibleColumns(d) {
			if c.DefaultExpr == "" || c.ComputedExpr != "" {
				continue
			}
			refs := builtins.ReferencedRelations(s.regResolver(ctx), c.DefaultExpr)
			if c.SequenceID != 0 && !slices.Contains(refs, uint32(c.SequenceID)) {
				refs = append(refs, uint32(c.SequenceID))
			}
			for _, ref := range refs {
				out = append(out, t.row("classid", oidPgAttrdef, "objid", attrdefOID(d.ID, c.ID), "objsubid", 0,
					"refclassid", oidPgClass, "refobjid", ref, "refobjsubid", 0, "deptype", "n"))
			}
		}
	}
	// A view's rule depends on the relations its query reads, and the
	// view on its rule, as in PostgreSQL: pg_dump orders a view after
	// them through these.
	for _, r := range s.rels {
		v, ok := r.desc.(*catalog.View)
		if !ok {
			continue
		}
		out = append(out, t.row("classid", oidPgRewrite, "objid", ruleOID(v.ID), "objsubid", 0,
			"refclassid", oidPgClass, "refobjid", v.ID, "refobjsubid", 0, "deptype", "i"))
		for _, dep := range v.DependsOn {
			out = append(out, t.row("classid", oidPgRewrite, "objid", ruleOID(v.ID), "objsubid", 0,
				"refclassid", oidPgClass, "refobjid", dep, "refobjsubid", 0, "deptype", "n"))
		}
	}
	return out, nil
}

// genRewrite lists each view's ON SELECT rule, the only rules Cairn has.
// ev_action, the rule's query tree, is NULL: pg_get_viewdef prints it.
func genRewrite(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.rels {
		if v, ok := r.desc.(*catalog.View); ok {
			out = append(out, t.row("oid", ruleOID(v.ID), "rulename", "_RETURN", "ev_class", v.ID, "ev_type", "1",
				"ev_enabled", "O", "is_instead", true))
		}
	}
	return out, nil
}

func genCollation(_ context.Context, _ *snapshot, t *vtable) ([][]types.Datum, error) {
	return [][]types.Datum{
		t.row("oid", oidCollDefault, "collname", "default", "collnamespace", oidPgCatalog, "collowner", oidSuperuser,
			"collprovider", "d", "collisdeterministic", true, "collencoding", -1),
		t.row("oid", oidCollC, "collname", "C", "collnamespace", oidPgCatalog, "collowner", oidSuperuser,
			"collprovider", "c", "collisdeterministic", true, "collencoding", -1, "collcollate", "C", "collctype", "C"),
	}, nil
}

func genTablespace(_ context.Context, _ *snapshot, t *vtable) ([][]types.Datum, error) {
	return [][]types.Datum{
		t.row("oid", oidTablespaceDefault, "spcname", "pg_default", "spcowner", oidSuperuser),
		t.row("oid", oidTablespaceGlobal, "spcname", "pg_global", "spcowner", oidSuperuser),
	}, nil
}

func genLanguage(_ context.Context, _ *snapshot, t *vtable) ([][]types.Datum, error) {
	return [][]types.Datum{
		t.row("oid", oidLangInternal, "lanname", "internal", "lanowner", oidSuperuser),
		t.row("oid", 13, "lanname", "c", "lanowner", oidSuperuser),
		t.row("oid", 14, "lanname", "sql", "lanowner", oidSuperuser, "lanpltrusted", true),
	}, nil
}

// genStatActivity lists the node's sessions (VirtualEnv.Activity), or the
// running one alone when there is no registry. As in PostgreSQL, a role
// that is not a superuser sees the details (client, times, state, query)
// only of sessions of roles whose privileges it has; of the others it
// sees who and where, and query "<insufficient privilege>".
func genStatActivity(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	if s.env.Activity == nil {
		sess := s.env.Session
		var pid any
		if sess.BackendPID != 0 {
			pid = sess.BackendPID
		}
		return [][]types.Datum{t.row("datid", s.db.ID, "datname", s.db.Name, "pid", pid,
			"usesysid", roleOID(s.user()), "usename", s.user(), "application_name", "",
			"state", "active", "backend_type", "client backend")}, nil
	}
	var auth *catalog.Authorizer
	ts := func(v time.Time) any {
		if v.IsZero() {
			return nil
		}
		return types.TimestampTZFromTime(v)
	}
	str := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	var out [][]types.Datum
	for _, a := range s.env.Activity() {
		row := []any{"datid", a.DatabaseID, "datname", a.Database, "pid", a.PID,
			"usesysid", roleOID(a.User), "usename", a.User, "application_name", a.ApplicationName,
			"backend_type", "client backend"}
		if a.User != s.user() {
			if auth == nil {
				var err error
				if auth, err = catalog.NewAuthorizer(ctx, s.env.Catalog, s.user(), nil); err != nil {
					return nil, err
				}
			}
			if !auth.HasRole(a.User) {
				out = append(out, t.row(append(row, "query", "<insufficient privilege>")...))
				continue
			}
		}
		var port any
		if a.ClientAddr != "" {
			port = a.ClientPort
		}
		row = append(row, "client_addr", str(a.ClientAddr), "client_port", port,
			"backend_start", ts(a.BackendStart), "xact_start", ts(a.XactStart), "query_start", ts(a.QueryStart),
			"state_change", ts(a.StateChange), "wait_event_type", str(a.WaitEventType), "wait_event", str(a.WaitEvent),
			"state", a.State, "query", a.Query)
		out = append(out, t.row(row...))
	}
	return out, nil
}

// persistence is pg_class.relpersistence: 't' in a session's temporary
// schema, 'p' elsewhere.
func persistence(sc *catalog.Schema) string {
	if sc != nil && sc.Temp {
		return "t"
	}
	return "p"
}

func genStatStatements(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	if s.env.Statements == nil {
		return nil, nil
	}
	var auth *catalog.Authorizer
	var out [][]types.Datum
	for _, st := range s.env.Statements() {
		query := st.Query
		if st.User != s.user() {
			if auth == nil {
				var err error
				if auth, err = catalog.NewAuthorizer(ctx, s.env.Catalog, s.user(), nil); err != nil {
					return nil, err
				}
			}
			if !auth.HasRole(st.User) {
				query = "<insufficient privilege>"
			}
		}
		out = append(out, t.row("userid", roleOID(st.User), "dbid", st.DatabaseID, "toplevel", true,
			"queryid", st.QueryID, "query", query, "calls", st.Calls,
			"total_exec_time", types.DFloat(st.TotalMs), "min_exec_time", types.DFloat(st.MinMs),
			"max_exec_time", types.DFloat(st.MaxMs), "mean_exec_time", types.DFloat(st.MeanMs),
			"stddev_exec_time", types.DFloat(st.StddevMs), "rows", st.Rows))
	}
	return out, nil
}
