package ddl

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// CREATE [OR REPLACE] FUNCTION ... LANGUAGE sql: a catalog.FuncDesc. The
// binder inlines a call (sql/sem's udf.go); this file checks the
// definition as PostgreSQL does (42P13 for a bad one, 42723 for a
// duplicate signature) and, with check_function_bodies on, binds the body
// with its parameters to check its result against RETURNS. Other
// languages are refused: plpgsql with 0A000, unknown ones with 42704.
// DROP FUNCTION and ALTER FUNCTION ... OWNER TO / RENAME TO find the
// function by name and argument types (lookupFunction).

const (
	oidRecord = 2249
	oidVoid   = 2278
)

func (e *executor) createFunction(ctx context.Context, n *pg_query.CreateFunctionStmt) (string, error) {
	tag := "CREATE FUNCTION"
	if n.IsProcedure {
		return "CREATE PROCEDURE", notSupported("CREATE PROCEDURE is not supported yet")
	}
	rv, err := rangeVarOfNames(nameList(n.Funcname))
	if err != nil {
		return tag, err
	}
	name := truncateIdent(rv.Relname)
	fd := &catalog.FuncDesc{DatabaseID: e.x.Database.ID, Name: name, Owner: e.x.User,
		Volatility: "v", Parallel: "u", Cost: -1, Rows: -1}
	language, body := "", ""
	hasBody := false
	for _, d := range defElems(n.Options) {
		switch d.Defname {
		case "language":
			language = strings.ToLower(defString(d))
		case "as":
			items := d.Arg.GetList().GetItems()
			if len(items) != 1 {
				return tag, pgerror.New(pgerrcode.InvalidFunctionDefinition, "only one AS item needed for language \"sql\"")
			}
			body, hasBody = strVal(items[0]), true
		case "volatility":
			fd.Volatility = defString(d)[:1]
		case "strict":
			fd.Strict = defBool(d)
		case "security":
			fd.SecurityDefiner = defBool(d)
		case "leakproof":
			fd.LeakProof = defBool(d)
		case "parallel":
			switch p := strings.ToLower(defString(d)); p {
			case "safe", "restricted", "unsafe":
				fd.Parallel = p[:1]
			default:
				return tag, pgerror.New(pgerrcode.InvalidParameterValue, "parameter \"parallel\" must be SAFE, RESTRICTED, or UNSAFE")
			}
		case "cost", "rows":
			v, err := strconv.ParseFloat(defString(d), 64)
			if err != nil || v <= 0 {
				return tag, pgerror.New(pgerrcode.InvalidParameterValue, "%s must be positive", strings.ToUpper(d.Defname))
			}
			if d.Defname == "cost" {
				fd.Cost = v
			} else {
				fd.Rows = v
			}
		case "window":
			return tag, notSupported("window functions in SQL are not supported")
		case "set":
			return tag, notSupported("SET clauses on functions are not supported yet")
		case "support":
			return tag, notSupported("SUPPORT functions are not supported")
		default:
			return tag, notSupported("function option %s is not supported", d.Defname)
		}
	}
	switch language {
	case "sql":
	case "plpgsql":
		return tag, notSupported("LANGUAGE plpgsql is not supported: Cairn runs SQL functions only (LANGUAGE sql)")
	case "":
		if n.SqlBody == nil {
			return tag, pgerror.New(pgerrcode.InvalidFunctionDefinition, "no language specified")
		}
	default:
		return tag, pgerror.New(pgerrcode.UndefinedObject, "language \"%s\" does not exist", language)
	}
	if n.SqlBody != nil {
		if hasBody {
			return tag, pgerror.New(pgerrcode.InvalidFunctionDefinition, "duplicate function body specified")
		}
		if body, err = e.sqlBodyText(ctx, n.SqlBody); err != nil {
			return tag, err
		}
		fd.SQLBody = true
	} else if !hasBody {
		return tag, pgerror.New(pgerrcode.InvalidFunctionDefinition, "no function body specified")
	}
	fd.Body = body
	if err := e.functionSignature(fd, n); err != nil {
		return tag, err
	}
	if fd.Cost < 0 {
		fd.Cost = 100
	}
	if fd.Rows < 0 {
		fd.Rows = 0
		if fd.ReturnsSet {
			fd.Rows = 1000
		}
	} else if !fd.ReturnsSet {
		return tag, pgerror.New(pgerrcode.InvalidParameterValue, "ROWS is not applicable when function does not return a set")
	}
	sc, err := e.creationSchema(ctx, rv)
	if err != nil {
		return tag, err
	}
	if sc.Temp {
		return tag, notSupported("functions in the temporary schema are not supported")
	}
	fd.SchemaID = sc.ID
	// The body parses into one SELECT or RETURN (sem.ParseFunctionBody),
	// whatever check_function_bodies says: a body the binder could never
	// inline is refused now rather than at each call.
	if _, _, err := sem.ParseFunctionBody(fd.Body, fd.SQLBody); err != nil {
		return tag, err
	}
	if fd.SQLBody {
		sel, expr, _ := sem.ParseFunctionBody(fd.Body, true)
		if sel == nil {
			sel = expr
		}
		if fd.DependsOn, err = e.queryDependencies(ctx, sel); err != nil {
			return tag, err
		}
	}
	existing, ok, err := e.x.Writer.LookupID(ctx, e.x.Database.ID, sc.ID, catalog.NamespaceName(name, fd.InputTypes()))
	if err != nil {
		return tag, err
	}
	if ok && !n.Replace {
		return tag, pgerror.New(pgerrcode.DuplicateFunction, "function \"%s\" already exists with same argument types", name)
	}
	if ok {
		cur, err := e.x.Writer.ByID(ctx, existing)
		if err != nil {
			return tag, err
		}
		old := cur.(*catalog.FuncDesc)
		if err := e.checkOwner(ctx, old); err != nil {
			return tag, err
		}
		if old.Return != fd.Return || old.ReturnsSet != fd.ReturnsSet || !sameOutputs(old, fd) {
			return tag, pgerror.New(pgerrcode.InvalidFunctionDefinition, "cannot change return type of existing function").
				WithHint("Use DROP FUNCTION %s(%s) first.", name, e.argTypeNames(old))
		}
		for i, a := range old.Args {
			if a.Name != "" && a.Name != fd.Args[i].Name {
				return tag, pgerror.New(pgerrcode.InvalidFunctionDefinition, "cannot change name of input parameter \"%s\"", a.Name).
					WithHint("Use DROP FUNCTION %s(%s) first.", name, e.argTypeNames(old))
			}
		}
		fd.ID, fd.Version, fd.Owner, fd.Comment = old.ID, old.Version, old.Owner, old.Comment
		if err := e.x.Writer.Update(ctx, fd); err != nil {
			return tag, err
		}
	} else if err := e.x.Writer.Create(ctx, fd); err != nil {
		return tag, err
	}
	// A SQL-standard body is always checked, as PostgreSQL parses and
	// analyzes it at CREATE whatever check_function_bodies says.
	if e.x.CheckFunctionBodies || fd.SQLBody {
		return tag, e.checkFunctionBody(ctx, fd, sc)
	}
	return tag, nil
}

func sameOutputs(a, b *catalog.FuncDesc) bool {
	var ao, bo []uint32
	for _, x := range a.Args {
		if !x.IsInput() || x.Mode == "b" {
			ao = append(ao, x.Type)
		}
	}
	for _, x := range b.Args {
		if !x.IsInput() || x.Mode == "b" {
			bo = append(bo, x.Type)
		}
	}
	return fmt.Sprint(ao) == fmt.Sprint(bo)
}

// sqlBodyText returns the SQL-standard body (RETURN ... or BEGIN ATOMIC
// ... END) as it is stored and printed: its relation names qualified with
// their schemas (qualifyRelations), as PostgreSQL stores the body parsed,
// so pg_dump's restore, under an empty search_path, reads the same tables.
// libpg_query prints it inside a CREATE FUNCTION, from which the body is
// cut at its first RETURN or BEGIN token (the body is the statement's
// last clause, and neither word appears before it as a keyword).
func (e *executor) sqlBodyText(ctx context.Context, body *pg_query.Node) (string, error) {
	body = proto.Clone(body).(*pg_query.Node)
	if err := e.qualifyRelations(ctx, body); err != nil {
		return "", err
	}
	text, err := deparse(&pg_query.Node{Node: &pg_query.Node_CreateFunctionStmt{CreateFunctionStmt: &pg_query.CreateFunctionStmt{
		Funcname:   []*pg_query.Node{pg_query.MakeStrNode("f")},
		ReturnType: &pg_query.TypeName{Names: []*pg_query.Node{pg_query.MakeStrNode("int4")}},
		SqlBody:    body,
	}}})
	if err != nil {
		return "", fmt.Errorf("ddl: printing a function body: %w", err)
	}
	res, err := pg_query.Scan(text)
	if err != nil {
		return "", pgerror.New(pgerrcode.SyntaxError, "%s", err.Error())
	}
	for _, t := range res.Tokens {
		if t.Token == pg_query.Token_RETURN || t.Token == pg_query.Token_BEGIN_P {
			return strings.TrimSpace(text[t.Start:]), nil
		}
	}
	return "", pgerror.New(pgerrcode.InvalidFunctionDefinition, "cannot find the function body")
}

// functionSignature fills in fd's arguments and result from the
// statement's parameter list and RETURNS clause.
func (e *executor) functionSignature(fd *catalog.FuncDesc, n *pg_query.CreateFunctionStmt) error {
	var outs []catalog.FuncArg
	seen := map[string]bool{}
	sawDefault := false
	for _, pn := range n.Parameters {
		p := pn.GetFunctionParameter()
		if p == nil {
			continue
		}
		t, err := sem.TypeFromAST(e.types(), p.ArgType)
		if err != nil {
			return err
		}
		if p.ArgType.Setof {
			return pgerror.New(pgerrcode.InvalidFunctionDefinition, "functions cannot accept set arguments")
		}
		a := catalog.FuncArg{Name: p.Name, Type: types.TypeOID(t)}
		switch p.Mode {
		case pg_query.FunctionParameterMode_FUNC_PARAM_OUT:
			a.Mode = "o"
		case pg_query.FunctionParameterMode_FUNC_PARAM_INOUT:
			a.Mode = "b"
		case pg_query.FunctionParameterMode_FUNC_PARAM_VARIADIC:
			return notSupported("VARIADIC parameters are not supported yet")
		case pg_query.FunctionParameterMode_FUNC_PARAM_TABLE:
			a.Mode = "t"
		default:
			a.Mode = "i"
		}
		if a.Name != "" {
			if seen[a.Name] && (a.IsInput() || a.Mode != "t") {
				return pgerror.New(pgerrcode.InvalidFunctionDefinition, "parameter name \"%s\" used more than once", a.Name)
			}
			seen[a.Name] = true
		}
		if p.Defexpr != nil {
			if !a.IsInput() {
				return pgerror.New(pgerrcode.InvalidFunctionDefinition, "only input parameters can have default values")
			}
			def, err := e.defaultText(p.Defexpr, t, a.Name)
			if err != nil {
				return err
			}
			a.Default, sawDefault = def, true
		} else if a.IsInput() && sawDefault {
			return pgerror.New(pgerrcode.InvalidFunctionDefinition, "input parameters after one with a default value must also have defaults")
		}
		fd.Args = append(fd.Args, a)
		if !a.IsInput() || a.Mode == "b" {
			outs = append(outs, a)
		}
	}
	rt := n.ReturnType
	switch {
	case len(outs) > 0 && outs[0].Mode == "t":
		fd.Return, fd.ReturnsSet = oidRecord, true
		return nil
	case rt == nil && len(outs) == 1:
		fd.Return = outs[0].Type
	case rt == nil && len(outs) > 1:
		return notSupported("functions with several OUT parameters (returning record) are not supported yet")
	case rt == nil:
		return pgerror.New(pgerrcode.InvalidFunctionDefinition, "function result type must be specified")
	default:
		tn := proto.Clone(rt).(*pg_query.TypeName)
		tn.Setof = false
		t, err := sem.TypeFromAST(e.types(), tn)
		if err != nil {
			if pgerror.Code(err) == pgerrcode.UndefinedObject && len(rt.Names) > 0 {
				switch strVal(rt.Names[len(rt.Names)-1]) {
				case "void":
					return notSupported("functions returning void are not supported yet")
				case "record":
					return notSupported("functions returning record are not supported yet")
				case "trigger", "event_trigger":
					return notSupported("trigger functions are not supported")
				}
			}
			return err
		}
		fd.Return, fd.ReturnsSet = types.TypeOID(t), rt.Setof
		if len(outs) == 1 && outs[0].Type != fd.Return {
			return pgerror.New(pgerrcode.InvalidFunctionDefinition, "function result type must be %s because of OUT parameters",
				e.typeNameOf(outs[0].Type))
		}
	}
	return nil
}

// argTypeNames lists fd's input argument types for messages.
func (e *executor) argTypeNames(fd *catalog.FuncDesc) string {
	var names []string
	for _, o := range fd.InputTypes() {
		names = append(names, e.typeNameOf(o))
	}
	return strings.Join(names, ", ")
}

func (e *executor) typeNameOf(oid uint32) string {
	if t, ok := types.OidToType(oid); ok {
		return t.Name()
	}
	if ut := e.types().UserTypes(); ut != nil {
		if t, ok := ut.TypeByOID(oid); ok {
			return t.Name()
		}
	}
	return strconv.FormatUint(uint64(oid), 10)
}

// checkFunctionBody binds the body with every parameter as a NULL of its
// type and checks what it returns against the declaration, with
// PostgreSQL's check_sql_fn_retval messages (42P13).
func (e *executor) checkFunctionBody(ctx context.Context, fd *catalog.FuncDesc, sc *catalog.Schema) error {
	sel, expr, err := sem.ParseFunctionBody(fd.Body, fd.SQLBody)
	if err != nil {
		return err
	}
	var params []sem.UserParam
	var args []*pg_query.Node
	for _, a := range fd.Args {
		if !a.IsInput() {
			continue
		}
		t, err := e.typeOfOID(a.Type)
		if err != nil {
			return err
		}
		null := &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Isnull: true}}}
		c, err := sem.CastNode(null, t)
		if err != nil {
			return err
		}
		params, args = append(params, sem.UserParam{Name: a.Name, Type: t}), append(args, c)
	}
	if expr != nil {
		if fd.ReturnsSet {
			return pgerror.New(pgerrcode.InvalidFunctionDefinition, "set-returning function %s() must have a SELECT body", fd.Name)
		}
		sel = &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: &pg_query.SelectStmt{
			TargetList: []*pg_query.Node{{Node: &pg_query.Node_ResTarget{ResTarget: &pg_query.ResTarget{Val: expr}}}}}}}
	}
	sel = sem.SubstituteParams(sel, fd.Name, params, args)
	// Deparse wants the parse tree version of the library's grammar.
	ver, err := pg_query.Parse("SELECT")
	if err != nil {
		return err
	}
	text, err := pg_query.Deparse(&pg_query.ParseResult{Version: ver.Version, Stmts: []*pg_query.RawStmt{{Stmt: sel}}})
	if err != nil {
		return fmt.Errorf("ddl: printing the body of %s: %w", fd.Name, err)
	}
	cols, err := e.x.Describe(ctx, text)
	if err != nil {
		return err
	}
	var want []*types.T
	if fd.Return == oidRecord {
		for _, a := range fd.Args {
			if a.Mode == "t" || a.Mode == "o" || a.Mode == "b" {
				t, err := e.typeOfOID(a.Type)
				if err != nil {
					return err
				}
				want = append(want, t)
			}
		}
	} else {
		t, err := e.typeOfOID(fd.Return)
		if err != nil {
			return err
		}
		want = []*types.T{t}
	}
	declared := e.typeNameOf(fd.Return)
	if fd.Return == oidRecord {
		declared = "record"
	}
	mismatch := func() *pgerror.Error {
		return pgerror.New(pgerrcode.InvalidFunctionDefinition, "return type mismatch in function declared to return %s", declared)
	}
	switch {
	case len(want) == 1 && len(cols) != 1:
		return mismatch().WithDetail("Final statement must return exactly one column.")
	case len(cols) > len(want):
		return mismatch().WithDetail("Final statement returns too many columns.")
	case len(cols) < len(want):
		return mismatch().WithDetail("Final statement returns too few columns.")
	}
	for i, c := range cols {
		if c.T.Family == types.UnknownFamily || c.T.Identical(want[i]) || types.AssignmentCastAllowed(c.T, want[i]) {
			continue
		}
		if len(want) == 1 {
			return mismatch().WithDetail("Actual return type is %s.", c.T.Name())
		}
		return mismatch().WithDetail("Final statement returns %s instead of %s at column %d.", c.T.Name(), want[i].Name(), i+1)
	}
	return nil
}

func (e *executor) typeOfOID(oid uint32) (*types.T, error) {
	if t, ok := types.OidToType(oid); ok {
		return t, nil
	}
	if ut := e.types().UserTypes(); ut != nil {
		if t, ok := ut.TypeByOID(oid); ok {
			return t, nil
		}
	}
	return nil, pgerror.New(pgerrcode.UndefinedObject, "type with OID %d does not exist", oid)
}

// lookupFunction finds the function an ObjectWithArgs names (DROP
// FUNCTION f(int), ALTER FUNCTION f OWNER TO ...): by its input argument
// types, or by name alone when the statement gives no argument list and
// the name is not overloaded. missingOK returns nil, nil for none.
func (e *executor) lookupFunction(ctx context.Context, ow *pg_query.ObjectWithArgs, missingOK bool) (*catalog.FuncDesc, error) {
	if ow == nil {
		return nil, pgerror.New(pgerrcode.SyntaxError, "function name expected")
	}
	rv, err := rangeVarOfNames(nameList(ow.Objname))
	if err != nil {
		return nil, err
	}
	var want []uint32
	var wantNames []string
	for _, a := range ow.Objfuncargs {
		p := a.GetFunctionParameter()
		if p == nil || p.Mode == pg_query.FunctionParameterMode_FUNC_PARAM_OUT || p.Mode == pg_query.FunctionParameterMode_FUNC_PARAM_TABLE {
			continue
		}
		t, err := sem.TypeFromAST(e.types(), p.ArgType)
		if err != nil {
			return nil, err
		}
		want, wantNames = append(want, types.TypeOID(t)), append(wantNames, t.Name())
	}
	if len(ow.Objfuncargs) == 0 {
		for _, a := range ow.Objargs {
			t, err := sem.TypeFromAST(e.types(), a.GetTypeName())
			if err != nil {
				return nil, err
			}
			want, wantNames = append(want, types.TypeOID(t)), append(wantNames, t.Name())
		}
	}
	var schemas []*catalog.Schema
	if rv.Schemaname != "" {
		sc, err := e.x.Writer.Schema(ctx, e.x.Database.ID, rv.Schemaname)
		if err != nil {
			return nil, err
		}
		schemas = []*catalog.Schema{sc}
	} else {
		for _, name := range e.searchPath() {
			sc, err := e.x.Writer.Schema(ctx, e.x.Database.ID, name)
			if pgerror.Code(err) == pgerrcode.InvalidSchemaName {
				continue
			}
			if err != nil {
				return nil, err
			}
			schemas = append(schemas, sc)
		}
	}
	for _, sc := range schemas {
		if sc.Virtual {
			continue
		}
		if !ow.ArgsUnspecified {
			id, ok, err := e.x.Writer.LookupID(ctx, e.x.Database.ID, sc.ID, catalog.NamespaceName(rv.Relname, want))
			if err != nil {
				return nil, err
			}
			if ok {
				d, err := e.x.Writer.ByID(ctx, id)
				if err != nil {
					return nil, err
				}
				return d.(*catalog.FuncDesc), nil
			}
			continue
		}
		rels, err := e.x.Writer.Relations(ctx, e.x.Database.ID, sc.ID)
		if err != nil {
			return nil, err
		}
		var found []*catalog.FuncDesc
		for _, d := range rels {
			if f, ok := d.(*catalog.FuncDesc); ok && f.Name == rv.Relname {
				found = append(found, f)
			}
		}
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		}
		return nil, pgerror.New(pgerrcode.AmbiguousFunction, "function name \"%s\" is not unique", rv.Relname).
			WithHint("Specify the argument list to select the function unambiguously.")
	}
	if missingOK {
		return nil, nil
	}
	if ow.ArgsUnspecified {
		return nil, pgerror.New(pgerrcode.UndefinedFunction, "could not find a function named \"%s\"", qualified(rv))
	}
	return nil, pgerror.New(pgerrcode.UndefinedFunction, "function %s(%s) does not exist", qualified(rv), strings.Join(wantNames, ", "))
}

// dropFunctions is DROP FUNCTION [IF EXISTS] f[(types)], .... Nothing
// records what uses a SQL function (PostgreSQL neither, for bodies given
// as strings), so CASCADE and RESTRICT drop just the function.
func (e *executor) dropFunctions(ctx context.Context, n *pg_query.DropStmt) error {
	for _, obj := range n.Objects {
		ow := obj.GetObjectWithArgs()
		f, err := e.lookupFunction(ctx, ow, n.MissingOk)
		if err != nil {
			return err
		}
		if f == nil {
			rv, _ := rangeVarOfNames(nameList(ow.GetObjname()))
			e.notice("00000", fmt.Sprintf("function %s(%s) does not exist, skipping", qualified(rv), e.objArgNames(ow)))
			continue
		}
		if err := e.checkOwner(ctx, f); err != nil {
			return err
		}
		if err := e.x.Writer.Drop(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// objArgNames prints the argument types an ObjectWithArgs names.
func (e *executor) objArgNames(ow *pg_query.ObjectWithArgs) string {
	var names []string
	for _, a := range ow.GetObjargs() {
		if t, err := sem.TypeFromAST(e.types(), a.GetTypeName()); err == nil {
			names = append(names, t.Name())
		}
	}
	return strings.Join(names, ", ")
}

// renameFunction is ALTER FUNCTION f(types) RENAME TO g.
func (e *executor) renameFunction(ctx context.Context, n *pg_query.RenameStmt, newName string) error {
	f, err := e.lookupFunction(ctx, n.Object.GetObjectWithArgs(), false)
	if err != nil {
		return err
	}
	if err := e.checkOwner(ctx, f); err != nil {
		return err
	}
	if _, ok, err := e.x.Writer.LookupID(ctx, f.DatabaseID, f.SchemaID, catalog.NamespaceName(newName, f.InputTypes())); err != nil {
		return err
	} else if ok {
		return pgerror.New(pgerrcode.DuplicateFunction, "function %s(%s) already exists in schema \"%s\"",
			newName, e.argTypeNames(f), e.schemaName(ctx, f.SchemaID))
	}
	c, err := catalog.Clone(f)
	if err != nil {
		return err
	}
	return e.x.Writer.Rename(ctx, c, newName)
}

func defBool(d *pg_query.DefElem) bool {
	if b := d.Arg.GetBoolean(); b != nil {
		return b.Boolval
	}
	if i := d.Arg.GetInteger(); i != nil {
		return i.Ival != 0
	}
	return true
}
