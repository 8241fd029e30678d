package kv

import (
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Observed timestamps (kvpb.Transaction.ObservedTimestamps;
// docs/architecture.md, "Observed timestamps"). The coordinator keeps the
// first reading per node that leaseholders stamp into its batches, and
// records the gateway's own clock whenever a snapshot starts. The readings
// bound uncertainty only for values acknowledged before the snapshot they
// were taken under started, so a new snapshot with a new global limit
// (READ COMMITTED's next statement, or its rollback of a statement) drops
// them all. A restart keeps them: its global limit stays that of the
// transaction's start, which the readings were taken after.

// observeGatewayLocked records the gateway's reading now, taken as the
// snapshot started: on the gateway's own leaseholders the transaction then
// has no uncertainty at all.
func (t *Txn) observeGatewayLocked(now hlc.Timestamp) {
	if t.db.opts.NodeID != 0 {
		t.mu.proto.UpdateObservedTimestamp(t.db.opts.NodeID, now)
	}
}

// resetObservationsLocked starts a new snapshot's observations: only the
// gateway's, taken now (at or after the snapshot's start). The readings
// are written over in place: nothing but the record holds its slice (a
// batch is sent with a copy, Txn.send), and a new one per snapshot was
// an object of every READ COMMITTED statement, as the first reading of
// every transaction was before it had room in the Txn (Txn.mu.obs;
// TestObservationsAllocs).
func (t *Txn) resetObservationsLocked() {
	t.mu.proto.ObservedTimestamps = t.mu.proto.ObservedTimestamps[:0]
	t.observeGatewayLocked(t.db.clock.Now())
}

// absorbObservationsLocked keeps the observations a response brought back.
func (t *Txn) absorbObservationsLocked(from *kvpb.Transaction) {
	for _, o := range from.ObservedTimestamps {
		t.mu.proto.UpdateObservedTimestamp(o.NodeID, o.Timestamp)
	}
}
