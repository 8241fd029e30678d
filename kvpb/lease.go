package kvpb

// SpreadLeaseRequest asks the leaseholder of the tablet holding Key to
// hand its lease to the voter at place Ordinal (modulo their number) of
// the tablet's voters in ascending node ID order. Sent with consecutive
// ordinals over the bucket tablets of a new hash-sharded index (or
// hash-partitioned table), it spreads their leases round-robin over the
// nodes before the index takes writes (issue 16). With Node set it hands
// the lease to that voter instead (the shard rebalancer's moves,
// sql/rebalance). With Place set it first moves the tablet's replicas to
// the placement of the bucket at Ordinal over the live nodes, and then
// its lease to that placement's leaseholder (membership.Member.Place):
// on more nodes than the replication factor a new index's buckets, split
// off one tablet, start on that tablet's voters. It is a store operation,
// alone in its batch, routed to the leaseholder like a write.
type SpreadLeaseRequest struct {
	Key     []byte `wire:"1"`
	Ordinal int    `wire:"2"`
	Node    uint64 `wire:"3"`
	Place   bool   `wire:"4"`
}

// SpreadLeaseResponse says where the lease stands. Done: the replica that
// answered holds the lease and is the wanted node (or there is nothing to
// spread: one voter, or no replication). Otherwise a transfer to Target
// was started, or could not be yet (Target not caught up); the caller
// asks again until Done or its time runs out. Refused: Node is not a
// voter of the tablet, or may take no lease (dead, decommissioning or
// clock-fenced), so asking again is pointless; the shard rebalancer skips
// that move.
type SpreadLeaseResponse struct {
	Done    bool   `wire:"1"`
	Target  uint64 `wire:"2"`
	Refused bool   `wire:"3"`
}

func (*SpreadLeaseRequest) Method() Method  { return MethodSpreadLease }
func (*SpreadLeaseResponse) Method() Method { return MethodSpreadLease }
func (r *SpreadLeaseRequest) Span() Span    { return Span{Key: r.Key} }
