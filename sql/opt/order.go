package opt

import "github.com/cairn-db/cairn/sql/plan"

func (o *optimizer) orderings(n plan.Node) plan.Node { return n }
