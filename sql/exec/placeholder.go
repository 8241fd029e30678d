package exec

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/sql/plan"
)

// PLACEHOLDER: replaced by the executor's real Start and Stats; delete this
// file when they exist. Never shipped.

// Stats collects EXPLAIN ANALYZE figures.
type Stats struct{}

// Start runs p.
func Start(ctx context.Context, x *Context, p *plan.Plan) (Rows, error) {
	return nil, errors.New("exec: not built yet")
}
