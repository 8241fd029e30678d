package plan

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/sql/parser"
)

// PLACEHOLDER: replaced by the binder; delete this file when it exists.

// Build binds one statement (SELECT, VALUES, TABLE, INSERT, UPDATE,
// DELETE) into a plan.
func Build(ctx context.Context, env *Env, stmt *parser.Statement) (*Plan, error) {
	return nil, errors.New("plan: not built yet")
}

// Explain renders p as EXPLAIN prints it, one line per element; annotate,
// when non-nil, returns extra text for a node (EXPLAIN ANALYZE figures).
func Explain(p *Plan, annotate func(Node) string) []string { return nil }
