package kvpb

// PlacementRequest asks the leaseholder of the tablet holding Key where
// the tablet's replicas are and how many bytes it holds; with From and To
// set it also moves the replica on node From to node To, one step per
// request (the shard rebalancer's replica moves, sql/rebalance): the
// caller asks again until the answer is Done. It is a store operation,
// alone in its batch, routed to the leaseholder like a write.
//
// A move is made as the replicate queue makes its own (package
// membership): a learner on To, promoted once caught up, then the voter
// on From removed; a leaseholder on From hands its lease to another voter
// first, so it never removes itself.
type PlacementRequest struct {
	Key  []byte `wire:"1"`
	From uint64 `wire:"2"`
	To   uint64 `wire:"3"`
}

// PlacementResponse describes the tablet as its leaseholder sees it:
// its descriptor, voters and learners (ascending node IDs), the
// leaseholder, and its live bytes (the newest version of each key,
// mvcc.SpanStats). Done: To is a voter and From is not (or no move was
// asked). Refused: the move cannot be made (To may hold no replica: it
// is dead, decommissioning or not a member, or From is no voter), so
// asking again is pointless.
type PlacementResponse struct {
	Desc        TabletDescriptor `wire:"1"`
	Voters      []uint64         `wire:"2"`
	Learners    []uint64         `wire:"3"`
	Leaseholder uint64           `wire:"4"`
	LiveBytes   int64            `wire:"5"`
	Done        bool             `wire:"6"`
	Refused     bool             `wire:"7"`
	// TotalBytes is every version, tombstone and lock record of the
	// tablet, counted with LiveBytes; SizeBytes is the leaseholder's
	// estimate of the tablet's flushed bytes on disk.
	TotalBytes int64  `wire:"8"`
	SizeBytes  uint64 `wire:"9"`
}

func (*PlacementRequest) Method() Method  { return MethodPlacement }
func (*PlacementResponse) Method() Method { return MethodPlacement }
func (r *PlacementRequest) Span() Span    { return Span{Key: r.Key} }
