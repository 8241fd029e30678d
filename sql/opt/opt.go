package opt

import (
	"context"

	"github.com/cairn-db/cairn/sql/plan"
)

// PLACEHOLDER body: replaced by the optimizer.

// Optimize rewrites p in place into a cheaper equivalent plan.
func Optimize(ctx context.Context, p *plan.Plan) error { return nil }
