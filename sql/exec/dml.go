package exec

import (
	"errors"

	"github.com/cairn-db/cairn/sql/plan"
)

// PLACEHOLDER bodies: replaced by the DML executor.

func (r *runner) buildInsert(n *plan.Insert) (op, error) {
	return nil, errors.New("exec: INSERT not built yet")
}
func (r *runner) buildUpdate(n *plan.Update) (op, error) {
	return nil, errors.New("exec: UPDATE not built yet")
}
func (r *runner) buildDelete(n *plan.Delete) (op, error) {
	return nil, errors.New("exec: DELETE not built yet")
}
