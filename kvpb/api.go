package kvpb

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/hlc"
)

// Sender sends a batch and waits for its answer. The kv client, a store and
// (in a cluster) the RPC transport all implement it.
type Sender interface {
	Send(ctx context.Context, ba *BatchRequest) (*BatchResponse, error)
}

// WaitPolicy says what a request does when it meets another transaction's
// lock.
type WaitPolicy int8

const (
	// WaitBlock waits (pushing the holder) until the lock is released.
	WaitBlock WaitPolicy = iota
	// WaitError fails at once with a *WriteIntentError (SELECT ... NOWAIT).
	WaitError
)

// Header applies to every request of a batch.
type Header struct {
	// Timestamp is where a non-transactional batch reads and writes. Zero
	// means "now" at the tablet. Ignored when Txn is set (invariant 2).
	Timestamp hlc.Timestamp `wire:"1"`
	// Txn is the transaction the batch runs in, or nil.
	Txn *Transaction `wire:"2"`
	// TabletID is the tablet the sender believes holds every key of the
	// batch; the tablet refuses with *TabletKeyMismatchError otherwise.
	// Zero lets a store route by key (single-tablet batches only).
	TabletID TabletID `wire:"3"`
	// WaitPolicy applies to conflicts with other transactions' locks.
	WaitPolicy WaitPolicy `wire:"4"`
	// LockTimeout bounds each wait for one conflicting lock (the session's
	// lock_timeout); zero waits as long as the batch's context allows. A
	// wait that runs out fails with a *WriteIntentError whose LockTimeout
	// is set.
	LockTimeout time.Duration `wire:"5"`
	// Now is the sender's clock reading; the receiver's clock is moved up to
	// it (and refuses it if it is too far ahead).
	Now hlc.Timestamp `wire:"6"`
	// GatewayNode is the node whose DistSender sent the batch for a
	// client (0: unknown, or the node's own work: kv.WithClientRequests);
	// the leaseholder counts requests by it, so that leases can follow
	// where their clients' requests come from (store/load.go).
	GatewayNode uint64 `wire:"7"`
}

// BatchRequest is the one request shape (invariant 1).
type BatchRequest struct {
	Header   `wire:"1"`
	Requests []Request `wire:"2"`
}

// Add appends requests and returns the batch for chaining.
func (ba *BatchRequest) Add(reqs ...Request) *BatchRequest {
	ba.Requests = append(ba.Requests, reqs...)
	return ba
}

// IsReadOnly reports whether no request in the batch writes.
func (ba *BatchRequest) IsReadOnly() bool {
	for _, r := range ba.Requests {
		if r.Method().IsWrite() {
			return false
		}
	}
	return true
}

// BatchResponse answers a BatchRequest.
type BatchResponse struct {
	Responses []Response `wire:"1"`
	// Txn is the transaction as the tablet left it (its WriteTimestamp may
	// have moved forward, its Status changed by EndTxn); nil if Header.Txn
	// was nil.
	Txn *Transaction `wire:"2"`
	// Now is the tablet's clock reading, for the sender's clock.
	Now hlc.Timestamp `wire:"3"`
	// OnePhaseCommit reports that an EndTxn in the batch committed the
	// transaction without writing intents or a record.
	OnePhaseCommit bool `wire:"4"`
}
