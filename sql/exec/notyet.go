package exec

import (
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/jackc/pgerrcode"
)

// Temporary: operators not written yet (this file goes away).

func notYet(what string) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, "exec: %s is not supported yet", what)
}
func (r *runner) buildVirtualScan(n *plan.VirtualScan) (op, error) {
	return nil, notYet("VirtualScan")
}
func (r *runner) buildJoin(n *plan.Join) (op, error)       { return nil, notYet("Join") }
func (r *runner) buildGroupBy(n *plan.GroupBy) (op, error) { return nil, notYet("GroupBy") }
func (r *runner) buildWindow(n *plan.Window) (op, error)   { return nil, notYet("Window") }
func (r *runner) buildSetOp(n *plan.SetOp) (op, error)     { return nil, notYet("SetOp") }
func (r *runner) buildRecursiveCTE(n *plan.RecursiveCTE) (op, error) {
	return nil, notYet("RecursiveCTE")
}
func (r *runner) buildWorkTable(n *plan.WorkTable) (op, error)   { return nil, notYet("WorkTable") }
func (r *runner) buildCTEScan(n *plan.CTEScan) (op, error)       { return nil, notYet("CTEScan") }
func (r *runner) buildProjectSet(n *plan.ProjectSet) (op, error) { return nil, notYet("ProjectSet") }
