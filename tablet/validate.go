package tablet

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// validate refuses malformed batches before they take latches or touch
// the engine (invariant 2: bad input changes nothing). Key placement is
// checked again under latches by checkKeys, since a split may intervene.
func (r *Replica) validate(ba *kvpb.BatchRequest) error {
	if len(ba.Requests) == 0 {
		return invalidArg("empty batch")
	}
	// The clock moves up to what it is told, unless that is further ahead
	// than the maximum offset: then the request is refused. Only the
	// highest of the header's timestamps matters for either (and each
	// Update reads the physical clock, which is not free).
	what, highest := "", hlc.Timestamp{}
	for _, ts := range []struct {
		what string
		ts   hlc.Timestamp
	}{{"header now", ba.Now}, {"header timestamp", ba.Timestamp}, {"txn write timestamp", txnWriteTS(ba.Txn)}} {
		if highest.Less(ts.ts) {
			what, highest = ts.what, ts.ts
		}
	}
	if !highest.IsEmpty() {
		if err := r.clock.Update(highest); err != nil {
			return fmt.Errorf("%w: %w", invalidArg("%s %s is beyond the maximum clock offset", what, highest), err)
		}
	}
	if ba.Txn != nil {
		if ba.Txn.ReadTimestamp.IsEmpty() || ba.Txn.WriteTimestamp.IsEmpty() {
			return invalidArg("transaction %s has no timestamps", ba.Txn.Short())
		}
		if ba.Txn.WriteTimestamp.Less(ba.Txn.ReadTimestamp) {
			return invalidArg("transaction %s writes at %s below its reads at %s", ba.Txn.Short(), ba.Txn.WriteTimestamp, ba.Txn.ReadTimestamp)
		}
	}
	for i, req := range ba.Requests {
		if req == nil {
			return invalidArg("request %d is nil", i)
		}
		if err := r.validateRequest(ba, i, req); err != nil {
			return err
		}
	}
	return checkKeys(ba, r.Desc())
}

func txnWriteTS(txn *kvpb.Transaction) hlc.Timestamp {
	if txn == nil {
		return hlc.Timestamp{}
	}
	return txn.WriteTimestamp
}

func (r *Replica) validateRequest(ba *kvpb.BatchRequest, i int, req kvpb.Request) error {
	m := req.Method()
	s := req.Span()
	if len(s.Key) == 0 {
		return invalidArg("%s: empty key", m)
	}
	if len(s.EndKey) > 0 && bytes.Compare(s.Key, s.EndKey) >= 0 {
		return invalidArg("%s: empty span %s", m, s)
	}
	switch m {
	case kvpb.MethodScan, kvpb.MethodDeleteRange, kvpb.MethodResolveIntentRange, kvpb.MethodGC, kvpb.MethodClearRange, kvpb.MethodAddSSTable:
		if len(s.EndKey) == 0 {
			return invalidArg("%s: missing end key", m)
		}
	}
	switch req := req.(type) {
	case *kvpb.PutRequest:
		if len(req.Value) > r.cfg.MaxValueSize {
			return invalidArg("%s: value of %d bytes exceeds the limit of %d", m, len(req.Value), r.cfg.MaxValueSize)
		}
	case *kvpb.ConditionalPutRequest:
		if len(req.Value) > r.cfg.MaxValueSize {
			return invalidArg("%s: value of %d bytes exceeds the limit of %d", m, len(req.Value), r.cfg.MaxValueSize)
		}
	case *kvpb.EndTxnRequest:
		if i != len(ba.Requests)-1 {
			return invalidArg("EndTxn must be the last request of its batch")
		}
		for _, ls := range req.LockSpans {
			if len(ls.Key) == 0 || (len(ls.EndKey) > 0 && bytes.Compare(ls.Key, ls.EndKey) >= 0) {
				return invalidArg("EndTxn: bad lock span %s", ls)
			}
		}
	case *kvpb.PushTxnRequest:
		if !bytes.Equal(req.Key, req.Pushee.Key) {
			return invalidArg("PushTxn: key %q is not the pushee's anchor %q", req.Key, req.Pushee.Key)
		}
	case *kvpb.QueryTxnRequest:
		if !bytes.Equal(req.Key, req.Txn.Key) {
			return invalidArg("QueryTxn: key %q is not the transaction's anchor %q", req.Key, req.Txn.Key)
		}
	case *kvpb.GCRequest:
		if r.clock.Now().Less(req.Threshold) {
			return invalidArg("GC threshold %s is in the future", req.Threshold)
		}
	case *kvpb.SplitRequest:
		return invalidArg("Split is a store operation and must be sent to the store alone")
	case *kvpb.SpreadLeaseRequest:
		return invalidArg("SpreadLease is a store operation and must be sent to the store alone")
	case *kvpb.PlacementRequest:
		return invalidArg("Placement is a store operation and must be sent to the store alone")
	}
	switch m {
	case kvpb.MethodEndTxn, kvpb.MethodHeartbeatTxn, kvpb.MethodRefresh:
		if ba.Txn == nil {
			return invalidArg("%s requires a transaction", m)
		}
		if (m == kvpb.MethodEndTxn || m == kvpb.MethodHeartbeatTxn) && len(ba.Txn.Key) > 0 && !bytes.Equal(s.Key, ba.Txn.Key) {
			return invalidArg("%s: key %q is not the transaction's anchor %q", m, s.Key, ba.Txn.Key)
		}
	case kvpb.MethodPushTxn, kvpb.MethodQueryTxn, kvpb.MethodResolveIntent, kvpb.MethodResolveIntentRange, kvpb.MethodGC, kvpb.MethodIncrement, kvpb.MethodClearRange, kvpb.MethodAddSSTable:
		if ba.Txn != nil {
			return invalidArg("%s cannot run in a transaction", m)
		}
	}
	if ba.Txn != nil && m.IsTxnWrite() {
		if len(ba.Txn.Key) == 0 {
			return invalidArg("transaction %s writes without an anchor key", ba.Txn.Short())
		}
		if ba.Txn.Status != kvpb.Pending {
			return &kvpb.TransactionStatusError{Txn: ba.Txn.TxnMeta, Status: ba.Txn.Status, Msg: "cannot write in a finished transaction"}
		}
	}
	return nil
}

// checkKeys reports the first key of ba outside desc. Transaction-record
// requests are placed by their anchor key; EndTxn lock spans may lie
// anywhere (those outside are resolved asynchronously).
func checkKeys(ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor) error {
	for _, req := range ba.Requests {
		s := req.Span()
		if !desc.ContainsSpan(s) {
			if desc.ContainsKey(s.Key) {
				return keyMismatch(s.EndKey, desc)
			}
			return keyMismatch(s.Key, desc)
		}
	}
	return nil
}
