package ddl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Indexes on expressions. An index key is made of columns, so an
// expression key is a hidden stored generated column holding the
// expression's value (named catalog.ExprColumnPrefix + n): the executor computes
// it on every INSERT and UPDATE as any generated column, the index
// encodes it as any column, and the catalogs print the expression in its
// place (pg_get_indexdef shows "(lower(email))" as PostgreSQL does). The
// column is dropped with the last index using it.

// addExprColumn adds to t (not yet stored) the hidden column for an index
// expression and returns its ID and the name PostgreSQL gives the
// expression in a generated index name (the function's name, or "expr").
func (e *executor) addExprColumn(t *catalog.Table, raw *pg_query.Node) (rowenc.ColumnID, string, error) {
	scope := &colScope{table: t.Name, cols: t.Columns}
	bc := sem.BuildContext{Scope: scope, Types: e.types(), Clause: "index expression", Position: e.stmt.Position}
	ex, err := sem.Build(bc, raw, nil)
	if err != nil {
		return 0, "", err
	}
	if len(sem.Aggregates(ex)) > 0 {
		return 0, "", pgerror.New(pgerrcode.GroupingError, "aggregate functions are not allowed in index expressions")
	}
	if nonImmutable(ex) {
		return 0, "", pgerror.New(pgerrcode.InvalidObjectDefinition, "functions in index expression must be marked IMMUTABLE")
	}
	if len(colRefs(ex)) == 0 {
		return 0, "", notSupported("index expressions without columns are not supported")
	}
	typ := ex.Type()
	if typ.Family == types.UnknownFamily {
		typ = types.Text
	}
	text, err := exprText(ex, raw)
	if err != nil {
		return 0, "", err
	}
	n := 1
	for t.ColumnByName(fmt.Sprintf("%s%d", catalog.ExprColumnPrefix, n)) != nil {
		n++
	}
	col := catalog.Column{Name: fmt.Sprintf("%s%d", catalog.ExprColumnPrefix, n), Type: typ, Nullable: true,
		ComputedExpr: text, Stored: true, Hidden: true}
	if err := indexableType(&col); err != nil {
		return 0, "", err
	}
	id, err := t.AddColumn(col)
	if err != nil {
		return 0, "", err
	}
	name := "expr"
	if fc := raw.GetFuncCall(); fc != nil && len(fc.Funcname) > 0 {
		name = nameList(fc.Funcname)[len(nameList(fc.Funcname))-1]
	}
	return id, name, nil
}

// nonImmutable reports whether an expression calls a function that is
// not immutable (PostgreSQL refuses it in an index).
func nonImmutable(ex sem.Expr) bool {
	return volatile(ex) || strings.Contains(ex.String(), "now()")
}

// fillExprColumns stores table t (old: as it was before the expression
// columns) with the new columns' values computed in every row.
func (e *executor) fillExprColumns(ctx context.Context, old, t *catalog.Table, cols []rowenc.ColumnID) error {
	type filler struct {
		pos int
		ev  sem.Evaluator
	}
	var fills []filler
	for _, id := range cols {
		c := t.ColumnByID(id)
		ex, err := e.buildOverTable(old, c.ComputedExpr, nil)
		if err != nil {
			return err
		}
		if ex, err = sem.CoerceToAssign(ex, c.Type, c.Name); err != nil {
			return err
		}
		ev, err := compileRow(old, ex)
		if err != nil {
			return err
		}
		fills = append(fills, filler{pos: slices.IndexFunc(t.Columns, func(x catalog.Column) bool { return x.ID == id }), ev: ev})
	}
	ectx := e.newEvalContext()
	return e.rewrite(ctx, old, t, func(r []types.Datum) ([]types.Datum, error) {
		nr := make([]types.Datum, len(t.Columns))
		copy(nr, r)
		for _, f := range fills {
			v, err := f.ev(ectx, r)
			if err != nil {
				return nil, err
			}
			nr[f.pos] = v
		}
		for i := len(r); i < len(nr); i++ {
			if nr[i] == nil {
				nr[i] = types.DNull
			}
		}
		return nr, nil
	})
}

// dropUnusedExprColumns removes from t the expression columns no index
// uses any more (after DROP INDEX).
func dropUnusedExprColumns(t *catalog.Table) {
	used := map[rowenc.ColumnID]bool{}
	for _, ix := range append([]catalog.Index{t.PrimaryIndex}, t.Indexes...) {
		for _, id := range ix.KeyColumnIDs {
			used[id] = true
		}
		for _, id := range ix.StoreColumnIDs {
			used[id] = true
		}
	}
	for _, c := range slices.Clone(t.Columns) {
		if c.IsIndexExpr() && !used[c.ID] {
			_ = t.DropColumn(c.Name)
		}
	}
}
