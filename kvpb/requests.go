package kvpb

import (
	"bytes"

	"github.com/cairn-db/cairn/hlc"
)

// Method names a request type.
type Method int8

// The request methods. Their order is not persisted.
const (
	MethodGet Method = iota
	MethodScan
	MethodPut
	MethodConditionalPut
	MethodDelete
	MethodDeleteRange
	MethodEndTxn
	MethodHeartbeatTxn
	MethodPushTxn
	MethodQueryTxn
	MethodResolveIntent
	MethodResolveIntentRange
	MethodGC
	MethodSplit
	MethodRefresh
	MethodIncrement
	MethodLock
	MethodBulkPut
	MethodClearRange
	MethodSpreadLease
	MethodAddSSTable
	MethodPlacement
	numMethods
)

var methodNames = [numMethods]string{
	"Get", "Scan", "Put", "ConditionalPut", "Delete", "DeleteRange", "EndTxn",
	"HeartbeatTxn", "PushTxn", "QueryTxn", "ResolveIntent", "ResolveIntentRange",
	"GC", "Split", "Refresh", "Increment", "Lock", "BulkPut", "ClearRange", "SpreadLease",
	"AddSSTable", "Placement",
}

func (m Method) String() string {
	if m >= 0 && m < numMethods {
		return methodNames[m]
	}
	return "Method(?)"
}

// IsWrite reports whether requests of this method write (and so take write
// latches and are proposed to the tablet's log).
func (m Method) IsWrite() bool {
	switch m {
	case MethodGet, MethodScan, MethodQueryTxn, MethodRefresh:
		return false
	}
	return true
}

// IsTxnWrite reports whether the method writes user data that, in a
// transaction, becomes an intent (a Lock's is an intent without a value,
// but it is tracked, sequenced and resolved like the others).
func (m Method) IsTxnWrite() bool {
	switch m {
	case MethodPut, MethodConditionalPut, MethodDelete, MethodDeleteRange, MethodLock:
		return true
	}
	return false
}

// Request is one operation of a batch.
type Request interface {
	Method() Method
	// Span is the keys the request touches (EndKey empty for one key).
	Span() Span
}

// SplittableRequest is a ranged request that a DistSender may split at
// tablet boundaries. WithSpan returns a copy of it over s, a part of its
// own span; the receiver is not changed (it may be shared).
type SplittableRequest interface {
	Request
	WithSpan(s Span) Request
}

// Response answers one Request.
type Response interface{ Method() Method }

// KeyValue is one row of a read.
type KeyValue struct {
	Key       []byte        `wire:"1"`
	Value     []byte        `wire:"2"`
	Timestamp hlc.Timestamp `wire:"3"`
}

type (
	// GetRequest reads the newest visible value of Key.
	GetRequest struct {
		Key []byte `wire:"1"`
	}
	// GetResponse holds it; Value is nil when the key has no visible value.
	GetResponse struct {
		Value     []byte        `wire:"1"`
		Timestamp hlc.Timestamp `wire:"2"`
	}

	// ScanRequest reads the visible values in [Key, EndKey), forward or
	// reverse, stopping after MaxKeys rows or MaxBytes of keys and values
	// (zero means no limit; at least one row is returned when any exists).
	//
	// With CountTags the scan counts instead (mvcc.ScanOptions.CountTags):
	// the visible values whose first byte is one of CountTags, returned
	// as ScanResponse.Count, with no rows; MaxKeys bounds the visible
	// values examined. A node that predates the field ignores it and
	// returns the rows: a reader takes Count plus the tagged values of
	// Rows (CountOf), which is right for either answer.
	//
	// ReadsOnTo, when above EndKey, says that the caller reads on from
	// EndKey to it in order (a scan cut at a tablet's end by the router,
	// which walks the next tablets after): a node may read the files of
	// that span ahead while it answers (storage.IterOptions.ScanEnd). It
	// changes no answer; a node that predates it ignores it.
	ScanRequest struct {
		Key       []byte `wire:"1"`
		EndKey    []byte `wire:"2"`
		Reverse   bool   `wire:"3"`
		MaxKeys   int64  `wire:"4"`
		MaxBytes  int64  `wire:"5"`
		CountTags []byte `wire:"6"`
		ReadsOnTo []byte `wire:"7"`
	}
	// ScanResponse holds the rows in scan order; ResumeSpan is the part of
	// the span not yet read when a limit stopped the scan (nil otherwise).
	// Count answers a scan with CountTags; DiskBytes is then what the
	// count read from outside the tablet's block cache
	// (mvcc.ScanResult.DiskBytes; 0 from a node that predates it).
	ScanResponse struct {
		Rows       []KeyValue `wire:"1"`
		ResumeSpan *Span      `wire:"2"`
		Count      int64      `wire:"3"`
		DiskBytes  int64      `wire:"4"`
	}

	// PutRequest writes Value at Key.
	PutRequest struct {
		Key   []byte `wire:"1"`
		Value []byte `wire:"2"`
	}
	// PutResponse is empty.
	PutResponse struct{}

	// ConditionalPutRequest writes Value at Key if the current visible value
	// equals Expected (ExpectExists) or there is none (!ExpectExists);
	// otherwise it fails with *ConditionFailedError.
	ConditionalPutRequest struct {
		Key          []byte `wire:"1"`
		Value        []byte `wire:"2"`
		Expected     []byte `wire:"3"`
		ExpectExists bool   `wire:"4"`
	}
	// ConditionalPutResponse is empty.
	ConditionalPutResponse struct{}

	// DeleteRequest writes a tombstone at Key.
	DeleteRequest struct {
		Key []byte `wire:"1"`
	}
	// DeleteResponse reports whether a visible value was deleted.
	DeleteResponse struct {
		Found bool `wire:"1"`
	}

	// DeleteRangeRequest writes tombstones over every visible key in
	// [Key, EndKey).
	DeleteRangeRequest struct {
		Key    []byte `wire:"1"`
		EndKey []byte `wire:"2"`
	}
	// DeleteRangeResponse lists the deleted keys.
	DeleteRangeResponse struct {
		Keys [][]byte `wire:"1"`
	}

	// EndTxnRequest commits or aborts the header's transaction. Key is the
	// transaction's anchor (its record's key). LockSpans are the spans it
	// wrote; they are stored in the final record and their intents resolved.
	// A batch holding all of a transaction's writes followed by EndTxn on
	// one tablet commits in one phase (no intents, no record).
	EndTxnRequest struct {
		Key       []byte `wire:"1"`
		Commit    bool   `wire:"2"`
		LockSpans []Span `wire:"3"`
		// MayMoveCommit: the coordinator takes a commit timestamp above
		// the batch's, its reads needing no refresh (READ COMMITTED). A
		// one-phase commit that a later read of one of its keys would
		// push then commits above that read instead of failing, once its
		// writes have passed their checks at the batch's timestamp.
		MayMoveCommit bool `wire:"4"`
	}
	// EndTxnResponse is empty; the final transaction is in BatchResponse.Txn.
	EndTxnResponse struct{}

	// HeartbeatTxnRequest proves the coordinator of the header's transaction
	// is alive; it creates the pending record if there is none yet.
	HeartbeatTxnRequest struct {
		Key []byte        `wire:"1"`
		Now hlc.Timestamp `wire:"2"`
	}
	// HeartbeatTxnResponse returns the record (which may be aborted).
	HeartbeatTxnResponse struct {
		Txn Transaction `wire:"1"`
	}

	// PushTxnRequest asks the tablet holding Pushee's record to move Pushee
	// out of Pusher's way: abort it (PushAbort), or move its write timestamp
	// above PushTo (PushTimestamp). It succeeds if the pushee is finished,
	// abandoned, or loses on priority; otherwise it fails with
	// *TransactionPushError and the caller waits in the tablet's wait queue.
	PushTxnRequest struct {
		Key      []byte        `wire:"1"` // Pushee.Key: where the record lives
		Pusher   Transaction   `wire:"2"`
		Pushee   TxnMeta       `wire:"3"`
		PushTo   hlc.Timestamp `wire:"4"`
		PushType PushType      `wire:"5"`
	}
	// PushTxnResponse returns the pushee as it now is.
	PushTxnResponse struct {
		Pushee Transaction `wire:"1"`
	}

	// QueryTxnRequest reads a transaction record and the IDs of the
	// transactions waiting on it (for deadlock detection).
	QueryTxnRequest struct {
		Key []byte  `wire:"1"`
		Txn TxnMeta `wire:"2"`
	}
	// QueryTxnResponse answers it. Found is false when no record exists.
	QueryTxnResponse struct {
		Txn         Transaction `wire:"1"`
		Found       bool        `wire:"2"`
		WaitingTxns []TxnMeta   `wire:"3"`
		// AbortReason is why Txn was aborted, when it is and the record's
		// tablet still knows (a waiter aborted as a deadlock victim learns
		// it this way); AbortPushed otherwise.
		AbortReason AbortReason `wire:"4"`
	}

	// ResolveIntentRequest settles Txn's intent on Key: committed intents
	// become values at Txn.WriteTimestamp, aborted ones disappear, a pending
	// status moves the intent up to Txn.WriteTimestamp. A committed intent
	// resolves to its newest value not written at IgnoredSeqNums (the
	// transaction's, from its record), or disappears if every one was.
	ResolveIntentRequest struct {
		Key            []byte     `wire:"1"`
		Txn            TxnMeta    `wire:"2"`
		Status         TxnStatus  `wire:"3"`
		IgnoredSeqNums []SeqRange `wire:"4"`
		// UnreplicatedOnly releases Txn's unreplicated lock on Key
		// (LockRequest.Unreplicated) and leaves storage alone: how a
		// buffered transaction's coordinator frees the locks it took on
		// keys it never wrote.
		UnreplicatedOnly bool `wire:"5"`
	}
	// ResolveIntentResponse is empty.
	ResolveIntentResponse struct{}

	// ResolveIntentRangeRequest does the same for every intent of Txn in
	// [Key, EndKey).
	ResolveIntentRangeRequest struct {
		Key            []byte     `wire:"1"`
		EndKey         []byte     `wire:"2"`
		Txn            TxnMeta    `wire:"3"`
		Status         TxnStatus  `wire:"4"`
		IgnoredSeqNums []SeqRange `wire:"5"`
		// UnreplicatedOnly: as for ResolveIntentRequest, every
		// unreplicated lock of Txn in the span.
		UnreplicatedOnly bool `wire:"6"`
	}
	// ResolveIntentRangeResponse reports how many intents were resolved.
	ResolveIntentRangeResponse struct {
		Resolved int `wire:"1"`
	}

	// GCRequest removes, in [Key, EndKey), every version hidden by a newer
	// version at or below Threshold, and tombstones at or below it.
	// MaxVersions (0: no limit) bounds the versions one request removes:
	// it stops at the next key boundary and returns ResumeKey.
	//
	// A tablet with a row repacker (tablet.Config.Repacker) also folds
	// rows kept as a packed row plus column entries, all at or below
	// Threshold, into one packed row, and drops column entries no read at
	// or above it can see (mvcc invariant 10); MaxVersions then stops at
	// a row boundary.
	//
	// TxnRecords lists transaction records anchored in [Key, EndKey) to
	// delete if they are final (committed or aborted), once every intent
	// they name is resolved; the tablet then refuses to create a record
	// for them again (tablet invariant 8). With a zero Threshold the
	// request removes no version.
	//
	// Census (with a zero Threshold: it removes nothing) instead reports
	// the oldest packed-row format version among every value kept in the
	// span, committed versions and intents (lock records) alike, per row
	// owner (the tablet's row repacker names owners: for SQL, a table's
	// index), so the catalog can forget formats no row uses any more
	// (sql/rowenc invariant 5). MaxVersions bounds it as for GC.
	GCRequest struct {
		Key         []byte        `wire:"1"`
		EndKey      []byte        `wire:"2"`
		Threshold   hlc.Timestamp `wire:"3"`
		MaxVersions int           `wire:"4"`
		TxnRecords  []TxnMeta     `wire:"5"`
		Census      bool          `wire:"6"`
	}
	// GCResponse reports how many versions were removed and their key
	// and value bytes; ResumeKey, when set, is where a bounded request
	// stopped (the rest of the span is untouched).
	// Repacked counts the rows repacked; RemovedBytes is net of the
	// packed rows written.
	// TxnRecordsRemoved counts the records of TxnRecords deleted.
	// Census is a census request's answer, one entry per owner seen.
	GCResponse struct {
		Removed           int            `wire:"1"`
		RemovedBytes      int64          `wire:"2"`
		ResumeKey         []byte         `wire:"3"`
		Repacked          int            `wire:"4"`
		TxnRecordsRemoved int            `wire:"5"`
		Census            []PackedCensus `wire:"6"`
	}
	// PackedCensus is what a census found of one owner's packed rows:
	// the lowest format version among them and how many values it read.
	PackedCensus struct {
		Owner      []byte `wire:"1"`
		MinVersion uint32 `wire:"2"`
		Values     int64  `wire:"3"`
	}

	// SplitRequest splits the tablet holding SplitKey at SplitKey.
	SplitRequest struct {
		SplitKey []byte `wire:"1"`
	}
	// SplitResponse holds the two tablets that result.
	SplitResponse struct {
		Left  TabletDescriptor `wire:"1"`
		Right TabletDescriptor `wire:"2"`
	}

	// RefreshRequest checks that nothing was committed, and no other
	// transaction holds an intent, in [Key, EndKey) (EndKey empty: the key
	// alone) in (From, header Txn.ReadTimestamp]; if so the header
	// transaction's reads at From are still valid at ReadTimestamp, and the
	// timestamp cache records the span as read there. Otherwise it fails
	// with *TransactionRetryError{RetrySerializable}.
	//
	// Strict widens the check to every version above From and every
	// other transaction's intent, whatever their timestamps (kv's
	// commit-time validation of descriptor stamps, kv/txn_validate.go);
	// the timestamp cache still records the span at ReadTimestamp.
	RefreshRequest struct {
		Key    []byte        `wire:"1"`
		EndKey []byte        `wire:"2"`
		From   hlc.Timestamp `wire:"3"`
		Strict bool          `wire:"4"`
	}
	// RefreshResponse is empty.
	RefreshResponse struct{}
)

// PushType says what a push wants.
type PushType int8

const (
	// PushAbort wants the pushee aborted (a writer meeting an intent).
	PushAbort PushType = iota
	// PushTimestamp wants the pushee's writes above PushTo (a reader
	// meeting an intent below its read timestamp).
	PushTimestamp
	// PushTouch only succeeds if the pushee is finished or abandoned.
	PushTouch
)

func (*GetRequest) Method() Method                 { return MethodGet }
func (*ScanRequest) Method() Method                { return MethodScan }
func (*PutRequest) Method() Method                 { return MethodPut }
func (*ConditionalPutRequest) Method() Method      { return MethodConditionalPut }
func (*DeleteRequest) Method() Method              { return MethodDelete }
func (*DeleteRangeRequest) Method() Method         { return MethodDeleteRange }
func (*EndTxnRequest) Method() Method              { return MethodEndTxn }
func (*HeartbeatTxnRequest) Method() Method        { return MethodHeartbeatTxn }
func (*PushTxnRequest) Method() Method             { return MethodPushTxn }
func (*QueryTxnRequest) Method() Method            { return MethodQueryTxn }
func (*ResolveIntentRequest) Method() Method       { return MethodResolveIntent }
func (*ResolveIntentRangeRequest) Method() Method  { return MethodResolveIntentRange }
func (*GCRequest) Method() Method                  { return MethodGC }
func (*SplitRequest) Method() Method               { return MethodSplit }
func (*RefreshRequest) Method() Method             { return MethodRefresh }
func (*GetResponse) Method() Method                { return MethodGet }
func (*ScanResponse) Method() Method               { return MethodScan }
func (*PutResponse) Method() Method                { return MethodPut }
func (*ConditionalPutResponse) Method() Method     { return MethodConditionalPut }
func (*DeleteResponse) Method() Method             { return MethodDelete }
func (*DeleteRangeResponse) Method() Method        { return MethodDeleteRange }
func (*EndTxnResponse) Method() Method             { return MethodEndTxn }
func (*HeartbeatTxnResponse) Method() Method       { return MethodHeartbeatTxn }
func (*PushTxnResponse) Method() Method            { return MethodPushTxn }
func (*QueryTxnResponse) Method() Method           { return MethodQueryTxn }
func (*ResolveIntentResponse) Method() Method      { return MethodResolveIntent }
func (*ResolveIntentRangeResponse) Method() Method { return MethodResolveIntentRange }
func (*GCResponse) Method() Method                 { return MethodGC }
func (*SplitResponse) Method() Method              { return MethodSplit }
func (*RefreshResponse) Method() Method            { return MethodRefresh }

func (r *GetRequest) Span() Span                { return Span{Key: r.Key} }
func (r *ScanRequest) Span() Span               { return Span{Key: r.Key, EndKey: r.EndKey} }
func (r *PutRequest) Span() Span                { return Span{Key: r.Key} }
func (r *ConditionalPutRequest) Span() Span     { return Span{Key: r.Key} }
func (r *DeleteRequest) Span() Span             { return Span{Key: r.Key} }
func (r *DeleteRangeRequest) Span() Span        { return Span{Key: r.Key, EndKey: r.EndKey} }
func (r *EndTxnRequest) Span() Span             { return Span{Key: r.Key} }
func (r *HeartbeatTxnRequest) Span() Span       { return Span{Key: r.Key} }
func (r *PushTxnRequest) Span() Span            { return Span{Key: r.Key} }
func (r *QueryTxnRequest) Span() Span           { return Span{Key: r.Key} }
func (r *ResolveIntentRequest) Span() Span      { return Span{Key: r.Key} }
func (r *ResolveIntentRangeRequest) Span() Span { return Span{Key: r.Key, EndKey: r.EndKey} }
func (r *GCRequest) Span() Span                 { return Span{Key: r.Key, EndKey: r.EndKey} }
func (r *SplitRequest) Span() Span              { return Span{Key: r.SplitKey} }
func (r *RefreshRequest) Span() Span            { return Span{Key: r.Key, EndKey: r.EndKey} }

func (r ScanRequest) WithSpan(s Span) Request {
	r.Key, r.EndKey = s.Key, s.EndKey
	return &r
}

func (r DeleteRangeRequest) WithSpan(s Span) Request {
	r.Key, r.EndKey = s.Key, s.EndKey
	return &r
}

func (r ResolveIntentRangeRequest) WithSpan(s Span) Request {
	r.Key, r.EndKey = s.Key, s.EndKey
	return &r
}

func (r GCRequest) WithSpan(s Span) Request {
	r.Key, r.EndKey = s.Key, s.EndKey
	return &r
}

func (r RefreshRequest) WithSpan(s Span) Request {
	r.Key, r.EndKey = s.Key, s.EndKey
	return &r
}

// CountOf is what a scan with CountTags counted: resp.Count, plus the
// values of resp.Rows whose first byte is one of tags (rows a node that
// ignores CountTags returned, or that a transaction's write buffer merged
// into the answer).
func CountOf(resp *ScanResponse, tags []byte) int64 {
	n := resp.Count
	for _, kv := range resp.Rows {
		if len(kv.Value) > 0 && bytes.IndexByte(tags, kv.Value[0]) >= 0 {
			n++
		}
	}
	return n
}
