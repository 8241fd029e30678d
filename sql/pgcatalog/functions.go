package pgcatalog

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// User-defined functions (CREATE FUNCTION ... LANGUAGE sql,
// catalog.FuncDesc): the Resolver finds them by name for the binder,
// which inlines them (sem.FunctionResolver), by name or signature for
// regproc and regprocedure, and prints them for the pg_get_function_*
// functions (builtins.UserFunctionInfo); pg_proc lists them (genProc).

var (
	_ sem.FunctionResolver      = (*Resolver)(nil)
	_ builtins.UserFunctionInfo = (*Resolver)(nil)
)

const (
	oidLangSQL    = 14
	oidRecord     = 2249
	oidPgProc     = 1255
	procCostSQL   = 100
	procRowsSETOF = 1000
)

// funcsInSchema returns the functions named name in schema sc (every one
// when name is "").
func (res *Resolver) funcsInSchema(sc *catalog.Schema, name string) ([]*catalog.FuncDesc, error) {
	if sc.Virtual {
		return nil, nil
	}
	rels, err := res.r.Relations(res.ctx, res.db.ID, sc.ID)
	if err != nil {
		return nil, err
	}
	var out []*catalog.FuncDesc
	for _, d := range rels {
		if f, ok := d.(*catalog.FuncDesc); ok && (name == "" || f.Name == name) {
			out = append(out, f)
		}
	}
	return out, nil
}

// funcPath is the schemas a function name is looked up in.
func (res *Resolver) funcPath(schema string) ([]*catalog.Schema, error) {
	if schema == "" {
		return res.searchPath()
	}
	sc, err := res.schemaNamed(schema)
	if err != nil || sc == nil {
		return nil, err
	}
	return []*catalog.Schema{sc}, nil
}

// UserFunctions implements sem.FunctionResolver: a function of an
// earlier schema on the path hides one with the same argument types in a
// later one, as in PostgreSQL.
func (res *Resolver) UserFunctions(schema, name string) ([]*sem.UserFunc, error) {
	path, err := res.funcPath(schema)
	if err != nil {
		return nil, err
	}
	var out []*sem.UserFunc
	seen := map[string]bool{}
	for _, sc := range path {
		fs, err := res.funcsInSchema(sc, name)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			sig := catalog.NamespaceName(f.Name, f.InputTypes())
			if seen[sig] {
				continue
			}
			seen[sig] = true
			uf, err := res.userFunc(f, sc)
			if err != nil {
				return nil, err
			}
			out = append(out, uf)
		}
	}
	return out, nil
}

// typeOf resolves a type OID stored in a function descriptor.
func (res *Resolver) typeOf(oid uint32) (*types.T, error) {
	if t, ok := types.OidToType(oid); ok {
		return t, nil
	}
	if t, ok := res.TypeByOID(oid); ok {
		return t, nil
	}
	return nil, pgerror.New(pgerrcode.UndefinedObject, "type with OID %d does not exist", oid)
}

// userFunc is the binder's view of f.
func (res *Resolver) userFunc(f *catalog.FuncDesc, sc *catalog.Schema) (*sem.UserFunc, error) {
	uf := &sem.UserFunc{OID: uint32(f.ID), Schema: sc.Name, Name: f.Name, ReturnsSet: f.ReturnsSet, Strict: f.Strict}
	var outs []sem.UserParam
	for _, a := range f.Args {
		t, err := res.typeOf(a.Type)
		if err != nil {
			return nil, err
		}
		p := sem.UserParam{Name: a.Name, Type: t}
		if a.Default != "" {
			tree, err := pg_query.Parse("SELECT " + a.Default)
			if err != nil {
				return nil, fmt.Errorf("pgcatalog: default of %s: %w", f.Name, err)
			}
			p.Default = tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
		}
		if a.IsInput() {
			uf.Params = append(uf.Params, p)
		}
		if a.Mode == "o" || a.Mode == "b" || a.Mode == "t" {
			outs = append(outs, p)
		}
	}
	if f.Return == oidRecord {
		uf.Columns = outs
	} else {
		t, err := res.typeOf(f.Return)
		if err != nil {
			return nil, err
		}
		uf.Return = t
		if f.ReturnsSet {
			uf.Columns = []sem.UserParam{{Name: f.Name, Type: t}}
		}
	}
	var err error
	if uf.Body, uf.Expr, err = sem.ParseFunctionBody(f.Body, f.SQLBody); err != nil {
		return nil, err
	}
	return uf, nil
}

// funcByOID returns the user function whose pg_proc OID is oid.
func (res *Resolver) funcByOID(oid uint32) (*catalog.FuncDesc, *catalog.Schema) {
	if catalog.ID(oid) < catalog.FirstUserID || oid>>kindShift != 0 {
		return nil, nil
	}
	d, err := res.r.ByID(res.ctx, catalog.ID(oid))
	if err != nil {
		return nil, nil
	}
	f, ok := d.(*catalog.FuncDesc)
	if !ok || f.DatabaseID != res.db.ID {
		return nil, nil
	}
	sc := res.schemaByID(f.SchemaID)
	if sc == nil {
		return nil, nil
	}
	return f, sc
}

// FunctionIsVisible implements builtins.UserFunctionInfo: the function is
// the one its bare name and argument types find on the search path.
func (res *Resolver) FunctionIsVisible(oid uint32) (visible, ok bool) {
	f, _ := res.funcByOID(oid)
	if f == nil {
		return false, false
	}
	path, err := res.searchPath()
	if err != nil {
		return false, true
	}
	want := catalog.NamespaceName(f.Name, f.InputTypes())
	for _, sc := range path {
		fs, err := res.funcsInSchema(sc, f.Name)
		if err != nil {
			return false, true
		}
		for _, g := range fs {
			if catalog.NamespaceName(g.Name, g.InputTypes()) == want {
				return g.ID == f.ID, true
			}
		}
	}
	return false, true
}

// formatTypeOID is format_type(oid, NULL) for built-in and user types.
func (res *Resolver) formatTypeOID(oid uint32) string {
	switch oid {
	case oidRecord:
		return "record"
	}
	if _, ok := types.OidToType(oid); ok {
		return builtins.FormatType(oid, -1, false)
	}
	if n, ok := res.typeName(oid); ok {
		return n
	}
	return "???"
}

// funcArgs is pg_get_function_arguments (identity false) or
// pg_get_function_identity_arguments (identity true): PostgreSQL's
// print_function_arguments.
func (res *Resolver) funcArgs(f *catalog.FuncDesc, identity bool) string {
	var parts []string
	for _, a := range f.Args {
		if a.Mode == "t" || identity && a.Mode == "o" {
			continue
		}
		var b strings.Builder
		switch a.Mode {
		case "o":
			b.WriteString("OUT ")
		case "b":
			b.WriteString("INOUT ")
		case "v":
			b.WriteString("VARIADIC ")
		}
		if a.Name != "" {
			b.WriteString(quoteIdent(a.Name) + " ")
		}
		b.WriteString(res.formatTypeOID(a.Type))
		if !identity && a.Default != "" {
			b.WriteString(" DEFAULT " + a.Default)
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ", ")
}

// funcResult is pg_get_function_result.
func (res *Resolver) funcResult(f *catalog.FuncDesc) string {
	var table []string
	for _, a := range f.Args {
		if a.Mode == "t" {
			table = append(table, quoteIdent(a.Name)+" "+res.formatTypeOID(a.Type))
		}
	}
	if len(table) > 0 {
		return "TABLE(" + strings.Join(table, ", ") + ")"
	}
	r := res.formatTypeOID(f.Return)
	if f.ReturnsSet {
		r = "SETOF " + r
	}
	return r
}

// funcDef is pg_get_functiondef, as PostgreSQL 15's ruleutils prints it.
func (res *Resolver) funcDef(f *catalog.FuncDesc, sc *catalog.Schema) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE OR REPLACE FUNCTION %s.%s(%s)\n RETURNS %s\n LANGUAGE sql\n",
		quoteIdent(sc.Name), quoteIdent(f.Name), res.funcArgs(f, false), res.funcResult(f))
	opts := b.Len()
	switch f.Volatility {
	case "i":
		b.WriteString(" IMMUTABLE")
	case "s":
		b.WriteString(" STABLE")
	}
	switch f.Parallel {
	case "s":
		b.WriteString(" PARALLEL SAFE")
	case "r":
		b.WriteString(" PARALLEL RESTRICTED")
	}
	if f.Strict {
		b.WriteString(" STRICT")
	}
	if f.SecurityDefiner {
		b.WriteString(" SECURITY DEFINER")
	}
	if f.LeakProof {
		b.WriteString(" LEAKPROOF")
	}
	if f.Cost != procCostSQL {
		b.WriteString(" COST " + strconv.FormatFloat(f.Cost, 'g', -1, 64))
	}
	if f.Rows > 0 && f.Rows != procRowsSETOF {
		b.WriteString(" ROWS " + strconv.FormatFloat(f.Rows, 'g', -1, 64))
	}
	if b.Len() != opts {
		b.WriteByte('\n')
	}
	if f.SQLBody {
		b.WriteString(f.Body)
	} else {
		dq := "$function"
		for strings.Contains(f.Body, dq) {
			dq += "x"
		}
		dq += "$"
		b.WriteString("AS " + dq + f.Body + dq)
	}
	b.WriteByte('\n')
	return b.String()
}

// UserFunctionText implements builtins.UserFunctionInfo.
func (res *Resolver) UserFunctionText(oid uint32, what builtins.FuncText) (text string, null, ok bool) {
	f, sc := res.funcByOID(oid)
	if f == nil {
		return "", false, false
	}
	switch what {
	case builtins.FuncArguments:
		return res.funcArgs(f, false), false, true
	case builtins.FuncIdentityArguments:
		return res.funcArgs(f, true), false, true
	case builtins.FuncResult:
		return res.funcResult(f), false, true
	case builtins.FuncSQLBody:
		return f.Body, !f.SQLBody, true
	case builtins.FuncDef:
		return res.funcDef(f, sc), false, true
	}
	return "", true, true
}

// resolveUserProc finds a user function for regproc (name alone; 42725
// when overloaded) or regprocedure (name(argument types)); found is false
// when none has the name.
func (res *Resolver) resolveUserProc(kind *types.T, name string) (oid uint32, found bool, err error) {
	fn, args, hasArgs := strings.Cut(strings.TrimSpace(name), "(")
	parts, err := splitName(fn)
	if err != nil || len(parts) > 2 {
		return 0, false, err
	}
	schema := ""
	if len(parts) == 2 {
		schema = parts[0]
	}
	path, err := res.funcPath(schema)
	if err != nil {
		return 0, false, err
	}
	var want []uint32
	if hasArgs {
		args = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(args), ")"))
		if args != "" {
			for _, a := range strings.Split(args, ",") {
				tree, err := pg_query.Parse("SELECT CAST(NULL AS " + a + ")")
				if err != nil {
					return 0, false, pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid type name \"%s\"", strings.TrimSpace(a))
				}
				tn := tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val.GetTypeCast().TypeName
				t, err := sem.TypeFromAST(&types.Context{Reg: res}, tn)
				if err != nil {
					return 0, false, err
				}
				want = append(want, types.TypeOID(t))
			}
		}
	}
	for _, sc := range path {
		fs, err := res.funcsInSchema(sc, parts[len(parts)-1])
		if err != nil {
			return 0, false, err
		}
		if len(fs) == 0 {
			continue
		}
		if !hasArgs {
			if len(fs) > 1 {
				return 0, true, pgerror.New(pgerrcode.AmbiguousFunction, "more than one function named \"%s\"", name)
			}
			return uint32(fs[0].ID), true, nil
		}
		for _, f := range fs {
			if catalog.NamespaceName(f.Name, f.InputTypes()) == catalog.NamespaceName(f.Name, want) {
				return uint32(f.ID), true, nil
			}
		}
	}
	return 0, false, nil
}

// userProcName is regproc's (signature false) or regprocedure's output
// for a user function: qualified when not visible.
func (res *Resolver) userProcName(oid uint32, signature bool) (string, bool) {
	f, sc := res.funcByOID(oid)
	if f == nil {
		return "", false
	}
	name := quoteIdent(f.Name)
	if vis, _ := res.FunctionIsVisible(oid); !vis {
		name = quoteIdent(sc.Name) + "." + name
	}
	if signature {
		var args []string
		for _, t := range f.InputTypes() {
			args = append(args, res.formatTypeOID(t))
		}
		name += "(" + strings.Join(args, ",") + ")"
	}
	return name, true
}

// procRows are pg_proc's rows of the database's user functions.
func procRows(s *snapshot, t *vtable) [][]types.Datum {
	var out [][]types.Datum
	for _, r := range s.rels {
		f, ok := r.desc.(*catalog.FuncDesc)
		if !ok {
			continue
		}
		var in, all []int64
		var modes, names []string
		named, nondefault, defaults := false, false, 0
		for _, a := range f.Args {
			if a.IsInput() {
				in = append(in, int64(a.Type))
			}
			all = append(all, int64(a.Type))
			modes = append(modes, a.Mode)
			names = append(names, a.Name)
			named = named || a.Name != ""
			nondefault = nondefault || a.Mode != "i"
			if a.Default != "" {
				defaults++
			}
		}
		kv := []any{"oid", f.ID, "proname", f.Name, "pronamespace", nspOID(r.schema.ID),
			"proowner", roleOID(owner(f.Owner)), "prolang", oidLangSQL, "procost", types.DFloat(f.Cost), "prorows", types.DFloat(f.Rows),
			"prokind", "f", "prosecdef", f.SecurityDefiner, "proleakproof", f.LeakProof, "proisstrict", f.Strict,
			"proretset", f.ReturnsSet, "provolatile", f.Volatility, "proparallel", f.Parallel,
			"pronargs", len(in), "pronargdefaults", defaults, "prorettype", f.Return, "proargtypes", in}
		if nondefault {
			kv = append(kv, "proallargtypes", all, "proargmodes", charArray(modes))
		}
		if named {
			kv = append(kv, "proargnames", names)
		}
		if f.SQLBody {
			kv = append(kv, "prosrc", "", "prosqlbody", f.Body)
		} else {
			kv = append(kv, "prosrc", f.Body)
		}
		out = append(out, t.row(kv...))
	}
	return out
}

// charArray is a "char"[] value.
func charArray(xs []string) types.Datum {
	a := types.NewArray(types.Char)
	for _, x := range xs {
		a.Elems = append(a.Elems, types.DString(x))
	}
	return a
}
