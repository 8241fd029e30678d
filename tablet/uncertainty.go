package tablet

import (
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Observed timestamps and the local uncertainty limit (docs/architecture.md,
// "Observed timestamps"). A transactional batch arriving at a leaseholder
// whose clock the transaction has not observed yet gets this node's clock
// reading stamped into its transaction before evaluation; the response's
// transaction carries it back to the coordinator, which keeps the first
// per node. Evaluation then bounds the transaction's uncertainty on this
// node by kvpb.Transaction.LocalUncertaintyLimit: no value acknowledged
// before the transaction started can have a local timestamp above this
// node's reading or, for a lease another node may have held before, above
// the lease's start.
//
// Only a replicated replica stamps: it knows its node ID, which names the
// clock. An unreplicated one (node 0) keeps the global limit.

// nodeID is the node the replica lives on; 0 without raft.
func (r *Replica) nodeID() uint64 {
	if r.raft.group == nil {
		return 0
	}
	return r.raft.group.NodeID()
}

// stampObservation records this node's clock in ba's transaction if it
// carries none for this node. ba is Send's own copy; its Txn is replaced by
// a copy, never written through (the caller's may be shared).
func (r *Replica) stampObservation(ba *kvpb.BatchRequest) {
	node := r.nodeID()
	if ba.Txn == nil || node == 0 {
		return
	}
	if _, ok := ba.Txn.ObservedTimestamp(node); ok {
		return
	}
	txn := ba.Txn.Clone()
	// After validate's Update: the reading is at or above everything the
	// batch told the clock, and (being taken now) after the transaction
	// started.
	txn.UpdateObservedTimestamp(node, r.clock.Now())
	ba.Txn = txn
	r.metrics.ObservedTimestampsStamped.Add(1)
}

// latestLeaseStart is the start of the last lease this replica took up
// (zero when it never waited for one).
func (r *Replica) latestLeaseStart() hlc.Timestamp {
	r.raft.mu.Lock()
	defer r.raft.mu.Unlock()
	return r.raft.leaseStart
}

// pushTo is the timestamp a reader needs a conflicting writer pushed above:
// its read timestamp, or its uncertainty limit on this node when it has
// one. The local limit, not the global one: a writer pushed to the global
// limit (up to the maximum offset ahead of every clock) would commit in the
// future and hold its answer in commitWait for that long, while everything
// behind it queues. The local limit is at most this node's clock (an
// observation of it, or a lease start it has passed). Should the lease
// change before the reader evaluates again, a larger limit there only means
// meeting the intent again and pushing once more.
func (r *Replica) pushTo(ba *kvpb.BatchRequest) hlc.Timestamp {
	if ba.Txn == nil {
		return ba.Timestamp
	}
	return ba.Txn.ReadTimestamp.Forward(ba.Txn.LocalUncertaintyLimit(r.nodeID(), r.latestLeaseStart()))
}
