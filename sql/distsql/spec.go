package distsql

import (
	"fmt"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Snapshot is where every fragment of a flow reads (invariant 2): the
// gateway transaction's read timestamp and its global uncertainty limit.
type Snapshot struct {
	ReadTimestamp    hlc.Timestamp `wire:"1"`
	UncertaintyLimit hlc.Timestamp `wire:"2"`
}

// Spec is what a fragment is told to do: scan Span (within tablet
// TabletID, as the planner saw it) at Snapshot, sending BatchRows KVs per
// batch with at most Window batches unconsumed (invariant 3), and at
// most Limit KVs in all (0: no limit).
//
// With Proc set, the fragment runs SQL over its span instead of shipping
// KVs: Proc is the processing (filter, projection, partial aggregation,
// sort, limit) as the node's Processor reads it (sql/exec encodes and
// runs it; this package only carries it), and the batches carry encoded
// rows (Batch.Rows) of at most BatchRows rows each. Limit is then the
// processor's business.
//
// Processor names the node's processor that runs Proc: "" the SQL one
// (sql/exec), any other name one registered with SetProcessorFor (an
// index backfill's reader, sql/ddl). A node that has none by that name
// refuses the fragment (0A000).
//
// Gateway is the node whose client's statement the fragment serves (0:
// the node's own work, or a gateway of an older version): the fragment
// reads under kv.WithClientGateway, so the tablets it reads count its
// requests as that client's gateway's (invariant 8; store/load.go) and
// their leases can follow the client.
type Spec struct {
	// Fragment is the fragment's index in its flow.
	Fragment  int           `wire:"1"`
	TabletID  kvpb.TabletID `wire:"2"`
	Span      kvpb.Span     `wire:"3"`
	Snapshot  Snapshot      `wire:"4"`
	BatchRows int           `wire:"5"`
	Window    int           `wire:"6"`
	Limit     int64         `wire:"7"`
	Proc      []byte        `wire:"8"`
	Processor string        `wire:"9"`
	Gateway   uint64        `wire:"10"`
}

// Defaults of a Spec's batching.
const (
	DefaultBatchRows = 1024
	DefaultWindow    = 4
	// maxWindow bounds what a gateway may ask of a server: the credits
	// one stream may hold.
	maxWindow = 64
)

// Fragment is a Spec placed on a node: the physical plan is a list of
// them.
type Fragment struct {
	Node uint64
	Spec Spec
}

func (f Fragment) String() string {
	return fmt.Sprintf("fragment %d on n%d: scan t%d [%q, %q)", f.Spec.Fragment, f.Node, f.Spec.TabletID, f.Spec.Span.Key, f.Spec.Span.EndKey)
}

// FragmentStats is what a fragment reports when it finishes, for EXPLAIN
// ANALYZE: its node, the KVs and bytes it shipped, the batches, and the
// time from its start to its last batch.
type FragmentStats struct {
	Node    uint64        `wire:"1"`
	Rows    int64         `wire:"2"`
	Bytes   int64         `wire:"3"`
	Batches int64         `wire:"4"`
	Time    time.Duration `wire:"5"`
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }
