package tablet

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// IntentResolver settles a finished (or pushed) transaction's intents on
// whichever tablets hold them, one batch per tablet, through a Sender. It
// is what a pusher uses after its push found the holder finished, and what
// a commit uses for intents outside its record's tablet.
type IntentResolver struct {
	sender kvpb.Sender
	lookup LookupFunc
	clock  *hlc.Clock
}

// NewIntentResolver returns a resolver sending through sender and finding
// tablet boundaries with lookup.
func NewIntentResolver(sender kvpb.Sender, lookup LookupFunc, clock *hlc.Clock) *IntentResolver {
	return &IntentResolver{sender: sender, lookup: lookup, clock: clock}
}

func (r *Replica) resolver() *IntentResolver {
	return NewIntentResolver(r.cfg.Sender, r.cfg.Lookup, r.clock)
}

// resolveTries bounds retries when a split races with resolution.
const resolveTries = 8

// ResolveIntents resolves txn's intents on keys to status. ignored are
// the transaction's rolled back sequence numbers (its record's
// IgnoredSeqNums), whose values a commit discards.
func (ir *IntentResolver) ResolveIntents(ctx context.Context, txn kvpb.TxnMeta, status kvpb.TxnStatus, keyList [][]byte, ignored ...kvpb.SeqRange) error {
	reqs := make([]kvpb.Request, len(keyList))
	for i, k := range keyList {
		reqs[i] = &kvpb.ResolveIntentRequest{Key: k, Txn: txn, Status: status, IgnoredSeqNums: ignored}
	}
	return ir.sendGrouped(ctx, reqs)
}

// ResolveSpans resolves txn's intents in spans to status; ignored as for
// ResolveIntents.
func (ir *IntentResolver) ResolveSpans(ctx context.Context, txn kvpb.TxnMeta, status kvpb.TxnStatus, spans []kvpb.Span, ignored ...kvpb.SeqRange) error {
	var reqs []kvpb.Request
	for _, s := range spans {
		if len(s.EndKey) == 0 {
			reqs = append(reqs, &kvpb.ResolveIntentRequest{Key: s.Key, Txn: txn, Status: status, IgnoredSeqNums: ignored})
			continue
		}
		reqs = append(reqs, &kvpb.ResolveIntentRangeRequest{Key: s.Key, EndKey: s.EndKey, Txn: txn, Status: status, IgnoredSeqNums: ignored})
	}
	return ir.sendGrouped(ctx, reqs)
}

// sendGrouped cuts range requests at tablet boundaries and sends one batch
// per tablet. Without a lookup every request goes alone, routed by key, and
// so does a key the lookup cannot place: the lookup is the node's own
// directory, which may not hold a tablet whose replica just moved off the
// node while a waiter pushed its intent's holder (an INSERT then answered
// XX000 "no tablet holds the key"); the sender routes cluster-wide.
func (ir *IntentResolver) sendGrouped(ctx context.Context, reqs []kvpb.Request) error {
	var lastErr error
	for range resolveTries {
		groups, err := ir.group(ctx, reqs)
		if err != nil {
			return err
		}
		var retry []kvpb.Request
		for _, g := range groups {
			ba := &kvpb.BatchRequest{Header: kvpb.Header{TabletID: g.tablet, Now: ir.clock.Now()}, Requests: g.reqs}
			if _, err := ir.sender.Send(ctx, ba); err != nil {
				var mismatch *kvpb.TabletKeyMismatchError
				var notFound *kvpb.TabletNotFoundError
				if errors.As(err, &mismatch) || errors.As(err, &notFound) {
					// Stale boundaries (a split): look up again.
					retry = append(retry, g.reqs...)
					lastErr = err
					continue
				}
				return fmt.Errorf("tablet: resolve intents on tablet %d: %w", g.tablet, err)
			}
		}
		if len(retry) == 0 {
			return nil
		}
		reqs = retry
	}
	return fmt.Errorf("tablet: resolve intents: %w", lastErr)
}

type resolveGroup struct {
	tablet kvpb.TabletID
	reqs   []kvpb.Request
}

func (ir *IntentResolver) group(ctx context.Context, reqs []kvpb.Request) ([]resolveGroup, error) {
	if ir.lookup == nil {
		out := make([]resolveGroup, len(reqs))
		for i, req := range reqs {
			out[i] = resolveGroup{reqs: []kvpb.Request{req}}
		}
		return out, nil
	}
	byTablet := make(map[kvpb.TabletID]int)
	var out []resolveGroup
	add := func(id kvpb.TabletID, req kvpb.Request) {
		i, ok := byTablet[id]
		if !ok {
			i = len(out)
			byTablet[id] = i
			out = append(out, resolveGroup{tablet: id})
		}
		out[i].reqs = append(out[i].reqs, req)
	}
	for _, req := range reqs {
		switch req := req.(type) {
		case *kvpb.ResolveIntentRangeRequest:
			start := req.Key
			for bytes.Compare(start, req.EndKey) < 0 {
				desc, err := ir.lookup(ctx, start, false)
				if err != nil {
					if ctx.Err() != nil {
						return nil, fmt.Errorf("tablet: look up tablet of %q: %w", start, err)
					}
					// The node's directory does not know where start is
					// (a replica moved away meanwhile): the rest goes
					// alone, routed by key by the sender, which knows
					// the cluster.
					piece := *req
					piece.Key = start
					out = append(out, resolveGroup{reqs: []kvpb.Request{&piece}})
					break
				}
				end := minKey(desc.EndKey, req.EndKey)
				piece := *req
				piece.Key, piece.EndKey = start, end
				add(desc.TabletID, &piece)
				start = end
			}
		default:
			desc, err := ir.lookup(ctx, req.Span().Key, false)
			if err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("tablet: look up tablet of %q: %w", req.Span().Key, err)
				}
				// As for a range above: routed by key, alone.
				out = append(out, resolveGroup{reqs: []kvpb.Request{req}})
				continue
			}
			add(desc.TabletID, req)
		}
	}
	return out, nil
}

// resolveAsync resolves a finished transaction's intents outside this
// tablet in the background, then deletes its record (invariant 8).
// Failure is not an error for anyone: an intent left behind is found and
// cleaned up by the next reader or writer that meets it (its push finds
// the final record), and the record by the GC queue (CleanupTxnRecord).
func (r *Replica) resolveAsync(a AsyncResolve) {
	r.asyncMu.Lock()
	defer r.asyncMu.Unlock()
	if r.asyncClosed {
		return
	}
	r.async.Add(1)
	go func() {
		defer r.async.Done()
		if err := r.resolver().ResolveSpans(r.ctx, a.Txn, a.Status, a.Spans, a.IgnoredSeqNums...); err != nil {
			return
		}
		_ = GCTxnRecord(r.ctx, r.cfg.Sender, r.clock, a.Txn)
	}()
}

// GCTxnRecord deletes txn's final record, through sender (to the
// leaseholder of its anchor), once every intent it names is resolved.
func GCTxnRecord(ctx context.Context, sender kvpb.Sender, clock *hlc.Clock, txn kvpb.TxnMeta) error {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Now: clock.Now()}}
	ba.Add(&kvpb.GCRequest{Key: txn.Key, EndKey: keys.Next(txn.Key), TxnRecords: []kvpb.TxnMeta{txn}})
	if _, err := sender.Send(ctx, ba); err != nil {
		return fmt.Errorf("tablet: delete the record of %s: %w", txn.Short(), err)
	}
	return nil
}
