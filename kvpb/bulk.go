package kvpb

type (
	// BulkPutRequest writes Value at Key as a committed version at the
	// batch's Header.Timestamp, exactly: the timestamp cache does not move
	// it, no intent or lock is written, and nothing is left to resolve. It
	// is never transactional (a batch with a Txn is refused) and the batch
	// must carry its timestamp.
	//
	// It exists for bulk loads into storage that no other transaction can
	// reach yet: index spans (keyed by a storage ID that is never reused)
	// named only by a descriptor version that the loading transaction
	// writes and that becomes visible when, and only if, it commits. The
	// caller guarantees that; the tablet cannot check it. Under that
	// guarantee, writing below reads the timestamp cache remembers breaks
	// nothing (nobody else read the span) and an aborted load leaves
	// unreachable garbage instead of visible rows.
	//
	// With MustNotExist, the write fails with *ConditionFailedError when
	// Key already has a version or an intent: the uniqueness check of a
	// primary key or unique index entry.
	BulkPutRequest struct {
		Key          []byte `wire:"1"`
		Value        []byte `wire:"2"`
		MustNotExist bool   `wire:"3"`
	}
	// BulkPutResponse is empty.
	BulkPutResponse struct{}
)

func (*BulkPutRequest) Method() Method  { return MethodBulkPut }
func (*BulkPutResponse) Method() Method { return MethodBulkPut }
func (r *BulkPutRequest) Span() Span    { return Span{Key: r.Key} }

type (
	// ClearRangeRequest removes every committed version of every key in
	// [Key, EndKey) outright (a storage range deletion, or a deletion of
	// each entry when the span holds few), below MVCC: a
	// reader at any timestamp then finds nothing there, and nothing is
	// left for GC. Intents (lock records) in the span are not touched;
	// they are resolved as usual. It is never transactional and only
	// table data keys may be cleared.
	//
	// It exists to free storage no descriptor names any more: the old
	// storage of a truncated table, which the committed descriptor
	// version replaced by fresh storage IDs. The caller guarantees that;
	// the tablet cannot check it.
	ClearRangeRequest struct {
		Key    []byte `wire:"1"`
		EndKey []byte `wire:"2"`
	}
	// ClearRangeResponse is empty.
	ClearRangeResponse struct{}
)

func (*ClearRangeRequest) Method() Method  { return MethodClearRange }
func (*ClearRangeResponse) Method() Method { return MethodClearRange }
func (r *ClearRangeRequest) Span() Span    { return Span{Key: r.Key, EndKey: r.EndKey} }

func (r ClearRangeRequest) WithSpan(s Span) Request {
	r.Key, r.EndKey = s.Key, s.EndKey
	return &r
}

type (
	// AddSSTableRequest ingests Data, an SST of committed versions at
	// exactly the batch's Header.Timestamp of keys inside [Key, EndKey)
	// (mvcc.PutSSTVersion builds them), on every replica of the tablet:
	// the SST travels in the raft entry and each replica links it into
	// its engine (storage.Engine.Ingest), skipping the WAL and the
	// memtable. Like BulkPut it is never transactional, ignores the
	// timestamp cache and checks nothing against what the span holds:
	// it is for storage nobody else writes at or below that timestamp
	// (an index backfill's entries at its backfill timestamp, which any
	// concurrent writer's later versions shadow). Only table data may be
	// ingested, and the request must be alone in its batch.
	//
	// The span must lie within one tablet. A caller whose tablet split
	// after it cut the SST gets *TabletKeyMismatchError like any request;
	// kv's DistSender then sends each tablet the part of Data inside it
	// (storage.CutSST).
	AddSSTableRequest struct {
		Key    []byte `wire:"1"`
		EndKey []byte `wire:"2"`
		Data   []byte `wire:"3"`
	}
	// AddSSTableResponse says how many versions were ingested.
	AddSSTableResponse struct {
		Versions int64 `wire:"1"`
	}
)

func (*AddSSTableRequest) Method() Method  { return MethodAddSSTable }
func (*AddSSTableResponse) Method() Method { return MethodAddSSTable }
func (r *AddSSTableRequest) Span() Span    { return Span{Key: r.Key, EndKey: r.EndKey} }
