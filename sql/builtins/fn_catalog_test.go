package builtins

import (
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

func TestFormatType(t *testing.T) {
	// Expected values are PostgreSQL 15's format_type output.
	for _, tc := range []struct {
		oid       uint32
		typmod    int32
		hasTypmod bool
		want      string
	}{
		{0, 0, false, "-"},
		{99999, 0, false, "???"},
		{1043, 14, true, "character varying(10)"},
		{1043, 0, false, "character varying"},
		{1043, -1, true, "character varying"},
		{1700, 10<<16 | 2 + 4, true, "numeric(10,2)"},
		{1700, -1, true, "numeric"},
		{1114, 3, true, "timestamp(3) without time zone"},
		{1184, -1, true, "timestamp with time zone"},
		{1042, -1, true, "bpchar"},
		{1042, 5, true, "character(1)"},
		{1042, 0, false, "character"},
		{1015, 14, true, "character varying(10)[]"},
		{23, -1, true, "integer"},
		{1007, -1, true, "integer[]"},
		{2205, -1, true, "regclass"},
	} {
		if got := FormatType(tc.oid, tc.typmod, tc.hasTypmod); got != tc.want {
			t.Errorf("format_type(%d, %d) = %q, want %q", tc.oid, tc.typmod, got, tc.want)
		}
	}
}

// fakeCatalog resolves one relation, t (OID 16400), and one role.
type fakeCatalog struct{}

func (fakeCatalog) ResolveReg(kind *types.T, name string) (uint32, error) {
	if kind == types.RegClass && (name == "t" || name == "public.t") {
		return 16400, nil
	}
	return 0, types.RegNotFound(kind, name)
}

func (fakeCatalog) RegName(kind *types.T, oid uint32) (string, bool) {
	switch {
	case kind == types.RegClass && oid == 16400:
		return "t", true
	case kind == types.RegRole && oid == 10:
		return "postgres", true
	}
	return "", false
}

func (fakeCatalog) IndexDef(uint32, int) (string, bool)              { return "", false }
func (fakeCatalog) ConstraintDef(uint32) (string, bool)              { return "", false }
func (fakeCatalog) Description(uint32, string, int32) (string, bool) { return "", false }
func (fakeCatalog) TableIsVisible(oid uint32) (bool, bool)           { return true, oid == 16400 }
func (fakeCatalog) SerialSequence(string, string) (string, error)    { return "", nil }
func (fakeCatalog) ViewDef(uint32) (string, bool)                    { return "", false }
func (fakeCatalog) RelKind(oid uint32) (string, bool)                { return "r", oid == 16400 }

func TestCatalogFunctions(t *testing.T) {
	with := testCtx()
	with.TypesCtx = &types.Context{Reg: fakeCatalog{}}
	without := testCtx()
	text, oid := types.Text, types.Oid
	for _, tc := range []struct {
		ctx  EvalContext
		fn   string
		args []*types.T
		vals []types.Datum
		want string
	}{
		{with, "to_regclass", []*types.T{text}, []types.Datum{types.DString("t")}, "t"},
		{with, "to_regclass", []*types.T{text}, []types.Datum{types.DString("nosuch")}, "NULL"},
		{without, "to_regclass", []*types.T{text}, []types.Datum{types.DString("t")}, "NULL"},
		{with, "to_regtype", []*types.T{text}, []types.Datum{types.DString("int4")}, "integer"},
		{with, "pg_get_userbyid", []*types.T{oid}, []types.Datum{types.DOid(10)}, "postgres"},
		{with, "pg_get_userbyid", []*types.T{oid}, []types.Datum{types.DOid(7)}, "unknown (OID=7)"},
		{with, "pg_table_is_visible", []*types.T{oid}, []types.Datum{types.DOid(16400)}, "t"},
		{with, "pg_table_is_visible", []*types.T{oid}, []types.Datum{types.DOid(1)}, "NULL"},
		{without, "pg_table_is_visible", []*types.T{oid}, []types.Datum{types.DOid(16400)}, "NULL"},
		{with, "pg_relation_is_publishable", []*types.T{types.RegClass}, []types.Datum{types.DOid(16400)}, "t"},
		{with, "pg_encoding_to_char", []*types.T{types.Int4}, []types.Datum{types.DInt(6)}, "UTF8"},
		{with, "pg_char_to_encoding", []*types.T{text}, []types.Datum{types.DString("utf8")}, "6"},
		{with, "pg_get_expr", []*types.T{text, oid}, []types.Datum{types.DString("a + 1"), types.DOid(16400)}, "a + 1"},
		{with, "pg_get_expr", []*types.T{text, oid}, []types.Datum{types.DString("(a IS NULL)"), types.DOid(16400)}, "(a IS NULL)"},
		{with, "pg_get_expr", []*types.T{text, oid, types.Bool}, []types.Datum{types.DString("(a IS NULL)"), types.DOid(16400), types.DBool(true)}, "a IS NULL"},
		{with, "pg_get_expr", []*types.T{text, oid, types.Bool}, []types.Datum{types.DString("(a) + (b)"), types.DOid(16400), types.DBool(true)}, "(a) + (b)"},
		{with, "format_type", []*types.T{oid, types.Int4}, []types.Datum{types.DOid(1043), types.DNull}, "character varying"},
		{with, "format_type", []*types.T{oid, types.Int4}, []types.Datum{types.DNull, types.DInt(1)}, "NULL"},
		{with, "pg_get_indexdef", []*types.T{oid}, []types.Datum{types.DOid(16400)}, "NULL"},
		{with, "json_build_object", []*types.T{text, types.Bool, text, types.Int8}, []types.Datum{types.DString("always"), types.DBool(true), types.DString("start"), types.DInt(1)}, `{"always" : true, "start" : 1}`},
		{with, "json_build_array", nil, nil, "[]"},
	} {
		r, err := ResolveFunc(tc.fn, tc.args)
		if err != nil {
			t.Errorf("%s: %v", tc.fn, err)
			continue
		}
		vals := make([]types.Datum, len(tc.vals))
		for i, v := range tc.vals {
			if vals[i], err = types.Cast(nil, v, nil, r.ArgTypes[i]); err != nil {
				t.Fatalf("%s arg %d: %v", tc.fn, i, err)
			}
		}
		d, err := r.Eval(tc.ctx, vals)
		if err != nil {
			t.Errorf("%s: %v", tc.fn, err)
			continue
		}
		got := "NULL"
		if !types.IsNull(d) {
			got = types.Format(tc.ctx.Types(), r.Return, d)
		}
		if got != tc.want {
			t.Errorf("%s%v = %s, want %s", tc.fn, tc.vals, got, tc.want)
		}
	}
	// The function-introspection functions read the registry.
	lower := Lookup("lower")[0]
	if got := call(t, with, "pg_get_function_arguments", []*types.T{oid}, types.DOid(lower.OID)); got.String() != "text" {
		t.Errorf("pg_get_function_arguments(lower) = %s", got)
	}
	if got := call(t, with, "pg_get_function_result", []*types.T{oid}, types.DOid(lower.OID)); got.String() != "text" {
		t.Errorf("pg_get_function_result(lower) = %s", got)
	}
	// psql's \sf and \df+ read these two; the text is PostgreSQL 15's
	// for its internal lower(text).
	want := "CREATE OR REPLACE FUNCTION pg_catalog.lower(text)\n RETURNS text\n LANGUAGE internal\n IMMUTABLE PARALLEL SAFE STRICT\nAS $function$lower$function$\n"
	if got := call(t, with, "pg_get_functiondef", []*types.T{oid}, types.DOid(lower.OID)); string(got.(types.DString)) != want {
		t.Errorf("pg_get_functiondef(lower) = %q, want %q", got, want)
	}
	if got := call(t, with, "pg_get_function_sqlbody", []*types.T{oid}, types.DOid(lower.OID)); !types.IsNull(got) {
		t.Errorf("pg_get_function_sqlbody(lower) = %s", got)
	}
}

// The catalogs' int2vector columns count from 0, as PostgreSQL's do, and
// the array functions ORMs apply to them (generate_subscripts over indkey
// in SQLAlchemy, array_position in others) must agree.
func TestVectorSubscripts(t *testing.T) {
	ctx := testCtx()
	v := types.NewVector(types.Int2Vector, types.DInt(4), types.DInt(7))
	iv := types.Int2Vector
	if got := call(t, ctx, "array_lower", []*types.T{iv, types.Int4}, v, types.DInt(1)); got != types.DInt(0) {
		t.Errorf("array_lower = %v", got)
	}
	if got := call(t, ctx, "array_upper", []*types.T{iv, types.Int4}, v, types.DInt(1)); got != types.DInt(1) {
		t.Errorf("array_upper = %v", got)
	}
	if got := call(t, ctx, "array_position", []*types.T{iv, types.Int2}, v, types.DInt(7)); got != types.DInt(1) {
		t.Errorf("array_position = %v", got)
	}
	r, err := ResolveFunc("generate_subscripts", []*types.T{iv, types.Int4})
	if err != nil {
		t.Fatal(err)
	}
	it, err := r.Overload.SRF(ctx, []types.Datum{v, types.DInt(1)})
	if err != nil {
		t.Fatal(err)
	}
	var subs []types.Datum
	for {
		row, ok, err := it.Next()
		if err != nil || !ok {
			break
		}
		subs = append(subs, row[0])
	}
	if len(subs) != 2 || subs[0] != types.DInt(0) || subs[1] != types.DInt(1) {
		t.Errorf("generate_subscripts(int2vector) = %v", subs)
	}
	// An ordinary array still counts from 1.
	a := types.NewArray(types.Int2, types.DInt(4))
	if got := call(t, ctx, "array_lower", []*types.T{types.MustArray(types.Int2), types.Int4}, a, types.DInt(1)); got != types.DInt(1) {
		t.Errorf("array_lower of int2[] = %v", got)
	}
}

// The pretty forms drop the pair of parentheses the plain forms add, as
// PostgreSQL 15's pg_get_constraintdef(oid, true) and pg_get_indexdef(oid,
// 0, true) do (the first and fourth cases are its output); parentheses the
// user wrote inside stay (PostgreSQL's deparser would drop those too).
func TestPrettyDefs(t *testing.T) {
	for _, tc := range []struct{ plain, want string }{
		{"CHECK ((age >= 0))", "CHECK (age >= 0)"},
		{"CHECK ((a > 0) AND (b > 0))", "CHECK ((a > 0) AND (b > 0))"},
		{"CHECK (((a > 0) AND (b > 0)))", "CHECK ((a > 0) AND (b > 0))"},
		{"CHECK ((s <> ')'))", "CHECK (s <> ')')"},
		{"UNIQUE (a, b)", "UNIQUE (a, b)"},
	} {
		if got := prettyConstraintDef(tc.plain); got != tc.want {
			t.Errorf("prettyConstraintDef(%q) = %q, want %q", tc.plain, got, tc.want)
		}
	}
	for _, tc := range []struct{ plain, want string }{
		{"CREATE INDEX i ON public.t USING btree (age DESC) WHERE (age IS NOT NULL)",
			"CREATE INDEX i ON t USING btree (age DESC) WHERE age IS NOT NULL"},
		// The fake catalog finds no other table: it stays qualified.
		{`CREATE UNIQUE INDEX "a ON b" ON s."u.v" USING btree (a)`, `CREATE UNIQUE INDEX "a ON b" ON s."u.v" USING btree (a)`},
		{`CREATE INDEX " WHERE (" ON public.t USING btree (a)`, `CREATE INDEX " WHERE (" ON t USING btree (a)`},
		{"CREATE INDEX i ON public.t USING btree (a) WHERE ((a > 0) OR (b > 0))",
			"CREATE INDEX i ON t USING btree (a) WHERE (a > 0) OR (b > 0)"},
	} {
		if got := prettyIndexDef(fakeCatalog{}, tc.plain); got != tc.want {
			t.Errorf("prettyIndexDef(%q) = %q, want %q", tc.plain, got, tc.want)
		}
	}
}
