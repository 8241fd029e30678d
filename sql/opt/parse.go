package opt

import (
	"fmt"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Descriptors keep partial index predicates and computed columns as SQL
// text; the optimizer builds them over a table's columns to compare them
// with a query's filter or to evaluate them.

// tableScope resolves a table's column names to the IDs ids gives (a
// column ids does not map is unknown).
type tableScope struct {
	t  *catalog.Table
	id func(c *catalog.Column) (sem.ColumnID, bool)
}

func (s tableScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	name := fields[len(fields)-1]
	c := s.t.ColumnByName(name)
	if c == nil || (len(fields) > 1 && fields[len(fields)-2] != s.t.Name) {
		return 0, nil, "", sem.ErrUndefinedColumn(fields...)
	}
	id, ok := s.id(c)
	if !ok {
		return 0, nil, "", sem.ErrUndefinedColumn(fields...)
	}
	return id, c.Type, name, nil
}

// buildTableExpr builds the SQL expression text over t's columns; id
// numbers each column it reads (false: the expression cannot be used).
func buildTableExpr(t *catalog.Table, text string, want *types.T, id func(*catalog.Column) (sem.ColumnID, bool)) (sem.Expr, error) {
	stmts, err := parser.Parse("SELECT " + text)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("expression %q is not one expression", text)
	}
	sel := stmts[0].AST.GetStmt().GetSelectStmt()
	if sel == nil || len(sel.GetTargetList()) != 1 {
		return nil, fmt.Errorf("expression %q is not one expression", text)
	}
	node := sel.GetTargetList()[0].GetResTarget().GetVal()
	return sem.Build(sem.BuildContext{Scope: tableScope{t: t, id: id}}, node, want)
}

// canon prints e with columns named by ID, so two expressions over the
// same columns print alike however the binder qualified the names.
func canon(e sem.Expr) string {
	return sem.Map(e, func(x sem.Expr) sem.Expr {
		if c, ok := x.(*sem.ColRef); ok {
			return &sem.ColRef{ID: c.ID, T: c.T, Name: fmt.Sprintf("@%d", c.ID)}
		}
		return x
	}).String()
}
