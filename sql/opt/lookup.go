package opt

import "github.com/cairn-db/cairn/sql/plan"

func (o *optimizer) lookupJoins(n plan.Node) plan.Node { return n }
