package sem

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/types"
)

// Scope resolves column references for Build. The binder implements it
// over the FROM clause; sem never looks at relations itself.
type Scope interface {
	// Resolve returns the column that fields (["a"], ["t", "a"], already
	// case-folded by the parser) names, its type and the name String
	// should print. Unknown names are ErrUndefinedColumn, names several
	// relations share ErrAmbiguousColumn.
	Resolve(fields []string) (id ColumnID, typ *types.T, name string, err error)
}

// Subqueries plans the subqueries Build meets. The binder implements it;
// a nil Subqueries in BuildContext rejects subqueries.
type Subqueries interface {
	// Plan plans sel (a SelectStmt node) and returns the ID the executor
	// will know its value by and its output column types.
	Plan(sel *pg_query.Node, kind SubqueryKind) (id int, cols []*types.T, err error)
}

// BuildContext is what Build needs of the statement being bound.
type BuildContext struct {
	// Scope resolves column names; nil means no columns are visible.
	Scope Scope
	// Params records the types of $n; nil rejects parameters (42P02).
	Params *ParamTypes
	// Types is the session context (time zone) for typing literals.
	Types *types.Context
	// Clause names where the expression appears, for messages such as
	// "aggregate functions are not allowed in WHERE".
	Clause string
	// AllowAggregates and AllowWindows permit aggregate and window calls
	// (they become AggCall nodes for the binder to extract).
	AllowAggregates, AllowWindows bool
	// Subqueries plans subqueries; nil rejects them (0A000).
	Subqueries Subqueries
	// Position maps an AST location to the 1-based position reported to
	// the client (parser.Statement.Position); nil means location+1.
	Position func(location int32) int
	// Inlining counts the user-defined function calls being inlined
	// around the expression (udf.go), shared by every BuildContext of one
	// statement so a function that calls itself, directly or through a
	// subquery, stops at maxInlineDepth; nil: counted per Build.
	Inlining *int
}

// ParamTypes holds the types of a statement's parameters $1..$n. Slots a
// client declared (Parse's parameter OIDs) are fixed; the others start
// unknown and take the type their first use demands, as Postgres infers
// them for prepared statements.
type ParamTypes struct {
	types []*types.T
	// Fixed forbids parameters beyond those given to NewParamTypes.
	Fixed bool
}

// NewParamTypes starts with the declared types (nil or types.Unknown for
// a parameter whose type is to be inferred).
func NewParamTypes(declared ...*types.T) *ParamTypes {
	p := &ParamTypes{}
	for _, t := range declared {
		if t == nil {
			t = types.Unknown
		}
		p.types = append(p.types, t)
	}
	return p
}

// Type returns the current type of $i (types.Unknown while not inferred).
func (p *ParamTypes) Type(i int) *types.T {
	if i < 1 || i > len(p.types) {
		return types.Unknown
	}
	return p.types[i-1]
}

// Types returns every parameter's type, failing with 42P18 on one that
// no use determined: what Prepare answers in ParameterDescription.
func (p *ParamTypes) Types() ([]*types.T, error) {
	for i, t := range p.types {
		if t.Family == types.UnknownFamily {
			return nil, errUnknownParamType(i + 1)
		}
	}
	return append([]*types.T(nil), p.types...), nil
}

func (p *ParamTypes) use(i int) (*types.T, error) {
	if i < 1 || i > 65535 || p.Fixed && i > len(p.types) {
		return nil, errNoParam(i)
	}
	for len(p.types) < i {
		p.types = append(p.types, types.Unknown)
	}
	return p.types[i-1], nil
}

func (p *ParamTypes) set(i int, t *types.T) { p.types[i-1] = t }
