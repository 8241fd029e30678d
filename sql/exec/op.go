package exec

import (
	"context"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// op is one running operator of a plan (pull-based: Next returns the next
// row, or nil at the end).
type op interface {
	Next(ctx context.Context) ([]types.Datum, error)
	Close()
}

// runner builds and runs the operators of one statement. The query
// operators extend it; the DML operators (dml.go) build their inputs
// through it.
type runner struct {
	x *Context
	p *plan.Plan
}
