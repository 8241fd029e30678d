package kv

import (
	"bytes"
	"context"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Bounded-staleness negotiation (CockroachDB's with_max_staleness and
// with_min_timestamp; docs/architecture.md, "AS OF SYSTEM TIME"): a read
// that may use any timestamp from a bound up to now takes the newest one
// the replicas it will be served by can serve without waiting.
//
// For each tablet of the read's spans, the replica a read goes to first
// is this node's own when it has one (LeaseholderSender's routing), else
// the leaseholder. The local leaseholder serves the present; a local
// follower serves up to its applied closed timestamp; a tablet with no
// replica here is read at its leaseholder, which serves the present. The
// read's local resolved timestamp is the minimum of those, and the
// negotiated timestamp that minimum forwarded to the bound: a replica
// that lags the bound sends the read on to the leaseholder, which serves
// it at the bound (waiting for a conflicting intent as any read does).
// Unlike CockroachDB's GetResolvedTimestamp, intents on a follower are not
// looked for: a follower that meets one refuses the read and the
// leaseholder serves it, at the same timestamp.

// BoundedStaleness is the outcome of NegotiateBoundedStaleness.
type BoundedStaleness struct {
	// Timestamp is the read's: Resolved forwarded to the bound.
	Timestamp hlc.Timestamp
	// Resolved is the newest timestamp every nearest replica of the
	// spans serves without waiting (at most the clock's reading).
	Resolved hlc.Timestamp
}

// Satisfied reports whether the nearest replicas serve the bound (the
// read does not have to leave them).
func (b BoundedStaleness) Satisfied() bool { return b.Timestamp == b.Resolved }

// NegotiateBoundedStaleness picks the timestamp of a bounded-staleness
// read of spans whose oldest acceptable timestamp is min. It sends
// nothing but tablet lookups the cache cannot answer.
func (db *DB) NegotiateBoundedStaleness(ctx context.Context, spans []kvpb.Span, min hlc.Timestamp) (BoundedStaleness, error) {
	now := db.clock.Now()
	resolved := now
	for _, sp := range spans {
		key := sp.Key
		for {
			d, err := db.cache.Lookup(ctx, key, false)
			if err != nil {
				return BoundedStaleness{}, err
			}
			if db.opts.Servable != nil {
				if ts := db.opts.Servable(d.TabletID, now); ts.Less(resolved) {
					resolved = ts
				}
			}
			if len(d.EndKey) == 0 || (len(sp.EndKey) != 0 && bytes.Compare(d.EndKey, sp.EndKey) >= 0) {
				break
			}
			key = d.EndKey
		}
	}
	return BoundedStaleness{Timestamp: resolved.Forward(min), Resolved: resolved}, nil
}
