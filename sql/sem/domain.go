package sem

import (
	"fmt"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Domains (types.DomainMeta): a conversion into a domain is a conversion
// into its base type followed by a DomainCoerce, which checks the
// domain's NOT NULL and CHECK constraints on the value, as PostgreSQL's
// CoerceToDomain does.

// DomainCoerce checks that Arg's value (of T's base type) satisfies
// domain T and yields it as a value of T.
type DomainCoerce struct {
	Arg Expr
	T   *types.T
	// Checks are the domain's CHECK expressions, built over ValueScope:
	// VALUE is column 0 of a one-column row.
	Checks []Expr
	// Explicit: written as a cast (printed (x)::d); an assignment to a
	// column of the domain prints as its argument, as pg_get_expr does.
	Explicit bool
	// Display is the domain's name in error messages: qualified when the
	// search path of the statement that bound it does not find it, as
	// PostgreSQL's format_type_be prints it.
	Display string
}

func (e *DomainCoerce) Type() *types.T { return e.T }
func (*DomainCoerce) expr()            {}

func (e *DomainCoerce) String() string {
	if e.Explicit {
		return "(" + e.Arg.String() + ")::" + typeText(e.T)
	}
	return e.Arg.String()
}

// ValueScope resolves VALUE, the value a domain's CHECK constraint tests:
// column 0 of type T.
type ValueScope struct{ T *types.T }

// Resolve implements Scope.
func (s ValueScope) Resolve(fields []string) (ColumnID, *types.T, string, error) {
	if len(fields) == 1 && fields[0] == "value" {
		return 0, s.T, "VALUE", nil
	}
	return 0, nil, "", pgerror.New(pgerrcode.UndefinedColumn, "column \"%s\" does not exist", joinFields(fields))
}

func joinFields(fs []string) string {
	out := ""
	for i, f := range fs {
		if i > 0 {
			out += "."
		}
		out += f
	}
	return out
}

// BuildDomainCheck binds a domain's CHECK expression (node, or text when
// node is nil) over VALUE of type base: a boolean expression (42804
// otherwise), without parameters or subqueries.
func BuildDomainCheck(tc *types.Context, node *pg_query.Node, text string, base *types.T) (Expr, error) {
	if node == nil {
		res, err := pg_query.Parse("SELECT " + text)
		if err != nil {
			return nil, fmt.Errorf("sem: domain check %q: %w", text, err)
		}
		ss := res.GetStmts()
		if len(ss) != 1 || ss[0].GetStmt().GetSelectStmt() == nil || len(ss[0].GetStmt().GetSelectStmt().TargetList) != 1 {
			return nil, pgerror.New(pgerrcode.InternalError, "sem: invalid stored domain check %q", text)
		}
		node = ss[0].GetStmt().GetSelectStmt().TargetList[0].GetResTarget().Val
	}
	return Build(BuildContext{Scope: ValueScope{T: base}, Types: tc, Clause: "CHECK"}, node, types.Bool)
}

// toDomain wraps e, a value of the domain's base type, in the domain's
// checks.
func (b *builder) toDomain(e Expr, to *types.T, explicit bool) (Expr, error) {
	base := types.BaseType(to)
	m := to.Domain
	display := m.Name
	if ut := b.ctx.Types.UserTypes(); ut != nil {
		if t, ok, err := ut.ResolveType("", m.Name); err != nil || !ok || types.TypeOID(t) != m.Oid {
			display = m.Schema + "." + m.Name
		}
	}
	dc := &DomainCoerce{Arg: e, T: to, Explicit: explicit, Display: display}
	for _, c := range to.Domain.Checks {
		ce, err := BuildDomainCheck(b.ctx.Types, nil, c.Expr, base)
		if err != nil {
			return nil, err
		}
		dc.Checks = append(dc.Checks, ce)
	}
	return dc, nil
}

// compileDomain evaluates a DomainCoerce: 23502 for a NULL in a NOT NULL
// domain, 23514 for a CHECK that is false (NULL passes, as in SQL's CHECK).
func (c *compiler) compileDomain(v *DomainCoerce) (evalFn, error) {
	arg, err := c.compile(v.Arg)
	if err != nil {
		return nil, err
	}
	checks := make([]Evaluator, len(v.Checks))
	for i, ce := range v.Checks {
		if checks[i], err = Compile(ce, nil); err != nil {
			return nil, err
		}
	}
	m, name := v.T.Domain, v.Display
	if name == "" {
		name = m.Name
	}
	return func(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
		d, err := arg(ctx, row)
		if err != nil {
			return nil, err
		}
		if types.IsNull(d) {
			if m.NotNull {
				return nil, pgerror.New(pgerrcode.NotNullViolation, "domain %s does not allow null values", name)
			}
			return d, nil
		}
		one := []types.Datum{d}
		for i, f := range checks {
			r, err := f(ctx, one)
			if err != nil {
				return nil, err
			}
			if b, ok := r.(types.DBool); ok && !bool(b) {
				return nil, pgerror.New(pgerrcode.CheckViolation, "value for domain %s violates check constraint \"%s\"", name, m.Checks[i].Name)
			}
		}
		return d, nil
	}, nil
}
