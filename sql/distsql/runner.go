package distsql

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/hlc"
)

// Runner is a node's distributed execution as SQL sees it: its planner
// and gateway. The node puts it in the context its SQL connections run
// under (WithRunner); the executor finds it there (FromContext), so no
// layer in between needs to know about it.
type Runner struct {
	Planner *Planner
	Gateway *Gateway
	// MaxOffset is the cluster's maximum clock offset: a snapshot's
	// uncertainty limit is its read timestamp plus it.
	MaxOffset time.Duration
}

// SnapshotAt is the snapshot of a transaction reading at ts. Its limit
// is ts plus the maximum offset: at or above the transaction's own
// global limit (taken from its start, not later than ts), so a fragment
// may restart a read the gateway would not have, never the other way
// round (invariant 2).
func (r *Runner) SnapshotAt(ts hlc.Timestamp) Snapshot {
	return Snapshot{ReadTimestamp: ts, UncertaintyLimit: hlc.Timestamp{WallTime: ts.WallTime + int64(r.MaxOffset)}}
}

type runnerKey struct{}

// WithRunner returns ctx carrying r.
func WithRunner(ctx context.Context, r *Runner) context.Context {
	return context.WithValue(ctx, runnerKey{}, r)
}

// FromContext returns the Runner ctx carries, or nil.
func FromContext(ctx context.Context) *Runner {
	r, _ := ctx.Value(runnerKey{}).(*Runner)
	return r
}
