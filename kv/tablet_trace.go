package kv

import (
	"context"
	"sync"

	"github.com/cairn-db/cairn/kvpb"
)

// TabletTrace records which tablets the requests sent under a context
// reached, for EXPLAIN ANALYZE's "tablets touched". Safe for concurrent
// use (a batch fans out to its tablets in parallel).
type TabletTrace struct {
	mu      sync.Mutex
	tablets map[kvpb.TabletID]struct{}
}

type tabletTraceKey struct{}

// WithTabletTrace returns ctx under which every sub-batch DistSender sends
// to a tablet is recorded in tr.
func WithTabletTrace(ctx context.Context, tr *TabletTrace) context.Context {
	return context.WithValue(ctx, tabletTraceKey{}, tr)
}

func traceTablet(ctx context.Context, id kvpb.TabletID) {
	if tr, ok := ctx.Value(tabletTraceKey{}).(*TabletTrace); ok && tr != nil {
		tr.mu.Lock()
		if tr.tablets == nil {
			tr.tablets = map[kvpb.TabletID]struct{}{}
		}
		tr.tablets[id] = struct{}{}
		tr.mu.Unlock()
	}
}

// Tablets returns the tablets recorded so far, in no particular order.
func (tr *TabletTrace) Tablets() []kvpb.TabletID {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]kvpb.TabletID, 0, len(tr.tablets))
	for id := range tr.tablets {
		out = append(out, id)
	}
	return out
}
