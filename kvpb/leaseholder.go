package kvpb

import "fmt"

// NotLeaseholderError: the replica that received the batch does not hold
// its tablet's lease (it is not the raft leader, or was elected but has not
// yet applied its predecessors' log), so it did not evaluate the batch and
// nothing changed. Leader, when non-zero, is the node this replica believes
// leads the tablet; the router retries there, or on another replica when it
// is zero (an election is under way).
type NotLeaseholderError struct {
	TabletID TabletID `wire:"1"`
	// Replica is the node that refused.
	Replica uint64 `wire:"2"`
	// Leader is the refusing replica's hint of the leaseholder's node.
	Leader uint64 `wire:"3"`
}

func (e *NotLeaseholderError) Error() string {
	if e.Leader == 0 {
		return fmt.Sprintf("node %d does not hold the lease of tablet %d (leader unknown)", e.Replica, e.TabletID)
	}
	return fmt.Sprintf("node %d does not hold the lease of tablet %d (try node %d)", e.Replica, e.TabletID, e.Leader)
}
