package plan

import (
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// jsonToRecord binds json_to_record, jsonb_to_record, json_to_recordset
// and jsonb_to_recordset in FROM, which return records whose columns the
// column definition list gives (AS x(a int, b text)). Cairn has no record
// type, so each is planned as what it computes: a one-row Project of the
// object (or, for the _recordset forms, a ProjectSet of the array's
// elements) and a Project taking each column from the member of its name,
// converted as PostgreSQL's populate functions do: the member's text
// through the column type's input function, json and jsonb columns the
// member itself, NULL when it is missing. ok is false for any other call.
func (b *builder) jsonToRecord(rf *pg_query.RangeFunction, s *scope) (n Node, lateral, ok bool, err error) {
	if len(rf.Functions) != 1 {
		return nil, false, false, nil
	}
	items := rf.Functions[0].GetList().GetItems()
	if len(items) == 0 || items[0].GetFuncCall() == nil {
		return nil, false, false, nil
	}
	fc := items[0].GetFuncCall()
	name := funcName(fc)
	set := false
	switch name {
	case "json_to_record", "jsonb_to_record":
	case "json_to_recordset", "jsonb_to_recordset":
		set = true
	default:
		return nil, false, false, nil
	}
	coldefs := rf.Coldeflist
	if len(coldefs) == 0 && len(items) > 1 {
		coldefs = items[1].GetList().GetItems()
	}
	if len(coldefs) == 0 {
		return nil, false, true, b.errAt(pgerror.New(pgerrcode.SyntaxError,
			"a column definition list is required for functions returning \"record\""), fc.Location)
	}
	if len(fc.Args) != 1 {
		return nil, false, true, b.errAt(pgerror.New(pgerrcode.UndefinedFunction,
			"function %s with %d arguments does not exist", name, len(fc.Args)), fc.Location)
	}
	if rf.Ordinality {
		return nil, false, true, notSupported("WITH ORDINALITY on %s is not supported", name)
	}
	var lat []sem.ColumnID
	side := &scope{b: b, parent: s, outer: &lat, ctes: s.ctes}
	in := types.JSONB
	if name[:5] == "json_" {
		in = types.JSONText
	}
	arg, err := b.expr(side, "FROM", fc.Args[0], in)
	if err != nil {
		return nil, false, true, err
	}
	// json input is read with json's operators, so json columns keep the
	// members' text as written.
	obj := Column{ID: b.newCol(), Name: name, T: in, Hidden: true}
	var input Node
	if set {
		elemsFn := "jsonb_array_elements"
		if in == types.JSONText {
			elemsFn = "json_array_elements"
		}
		elems, err := builtins.ResolveFunc(elemsFn, []*types.T{in})
		if err != nil {
			return nil, false, true, err
		}
		input = &ProjectSet{Input: oneRow(), Funcs: []SetFunc{{Call: &sem.FuncCall{Fn: elems, Args: []sem.Expr{arg}},
			Cols: []Column{obj}}}, Cols: []Column{obj}}
	} else {
		input = &Project{Input: oneRow(), Exprs: []sem.Expr{arg}, Cols: []Column{obj}}
	}
	field, err := builtins.LookupBinaryOp("->", in, types.Text)
	if err != nil {
		return nil, false, true, err
	}
	text, err := builtins.LookupBinaryOp("->>", in, types.Text)
	if err != nil {
		return nil, false, true, err
	}
	p := &Project{Input: input}
	ref := colRef(obj)
	for _, cd := range coldefs {
		def := cd.GetColumnDef()
		if def == nil {
			return nil, false, true, notSupported("unexpected column definition in %s", name)
		}
		t, err := sem.TypeFromAST(b.env.Types, def.TypeName)
		if err != nil {
			return nil, false, true, b.errAt(err, def.Location)
		}
		key := &sem.Const{Datum: types.DString(def.Colname), T: types.Text}
		var e sem.Expr
		switch t.Family {
		case types.JSONBFamily, types.JSONTextFamily:
			e = &sem.BinOp{Op: "->", Fn: field, Left: ref, Right: key}
			if t.Family != in.Family {
				e = &sem.Cast{Expr: e, To: t, Context: types.CastExplicit}
			}
		default:
			// The input function: an assignment cast from text keeps
			// char(n)/varchar(n) limits as errors, like a typmod'd input.
			e = &sem.Cast{Expr: &sem.BinOp{Op: "->>", Fn: text, Left: ref, Right: key}, To: t, Context: types.CastAssignment}
		}
		p.Exprs = append(p.Exprs, e)
		p.Cols = append(p.Cols, Column{ID: b.newCol(), Name: def.Colname, T: t})
	}
	alias, colAliases := aliasOf(rf.Alias)
	if alias == "" {
		alias = name
	}
	cols, err := renameCols(p.Cols, colAliases, alias)
	if err != nil {
		return nil, false, true, err
	}
	p.Cols = cols
	b.addRelCols(s, alias, cols, nil)
	return p, referencesLevel(s, lat), true, nil
}

// wholeRowJSON rewrites to_json(t), to_jsonb(t), row_to_json(t) and
// jsonb_agg(t), where t names a relation of the query and no column, to
// take ROW(t.c1, t.c2, ...) with the columns' names (RowExpr.Colnames),
// which sem turns into an object keyed by them. Cairn has no record
// type, so this is where a whole-row reference can be used. n itself is
// not modified: a rewritten copy is returned.
func (b *builder) wholeRowJSON(bc sem.BuildContext, n *pg_query.Node) *pg_query.Node {
	s, _ := bc.Scope.(*scope)
	if n == nil || s == nil || b.stmt == nil || !strings.Contains(b.stmt.SQL, "json") && !strings.Contains(b.stmt.SQL, "JSON") {
		return n // the cheap test first: every expression of every statement comes here
	}
	target := func(x *pg_query.Node) (*pg_query.FuncCall, *rel, *scope) {
		fc := x.GetFuncCall()
		if fc == nil || len(fc.Args) != 1 || fc.AggStar || fc.Over != nil {
			return nil, nil, nil
		}
		switch funcName(fc) {
		case "to_json", "to_jsonb", "row_to_json", "jsonb_agg":
		default:
			return nil, nil, nil
		}
		cr := fc.Args[0].GetColumnRef()
		if cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetString_() == nil {
			return nil, nil, nil
		}
		name := cr.Fields[0].GetString_().Sval
		if _, _, _, err := s.Resolve([]string{name}); err == nil {
			return nil, nil, nil // a column of that name wins, as in PostgreSQL
		}
		for cur := s; cur != nil; cur = cur.parent {
			for _, r := range cur.rels {
				if r.alias == name {
					return fc, r, cur
				}
			}
		}
		return nil, nil, nil
	}
	found := false
	walkAST(n, func(x *pg_query.Node) bool {
		if fc, _, _ := target(x); fc != nil {
			found = true
		}
		return !found
	})
	if !found {
		return n
	}
	n = proto.Clone(n).(*pg_query.Node)
	walkAST(n, func(x *pg_query.Node) bool {
		fc, r, owner := target(x)
		if fc == nil {
			return true
		}
		row := &pg_query.RowExpr{Location: fc.Location, RowFormat: pg_query.CoercionForm_COERCE_IMPLICIT_CAST}
		for _, i := range r.cols {
			c := owner.cols[i]
			if c.hidden {
				continue
			}
			row.Args = append(row.Args, &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
				Fields:   []*pg_query.Node{pg_query.MakeStrNode(r.alias), pg_query.MakeStrNode(c.name)},
				Location: fc.Location}}})
			row.Colnames = append(row.Colnames, pg_query.MakeStrNode(c.name))
		}
		arg := &pg_query.Node{Node: &pg_query.Node_RowExpr{RowExpr: row}}
		if funcName(fc) == "jsonb_agg" {
			arg = &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: &pg_query.FuncCall{
				Funcname: []*pg_query.Node{pg_query.MakeStrNode("to_jsonb")}, Args: []*pg_query.Node{arg},
				Location: fc.Location, Funcformat: fc.Funcformat}}}
		}
		fc.Args = []*pg_query.Node{arg}
		return true
	})
	return n
}
