package exec

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// Stats collects EXPLAIN ANALYZE figures per plan node: rows produced,
// time spent in the node and its inputs (inclusive, as PostgreSQL
// reports it), and the KV traffic the node itself caused. A node run
// several times (the inside of a correlated subquery or a LATERAL join)
// accumulates over its runs (loops). The zero value is ready to use; set
// Context.Stats to a *Stats to collect. Not safe for concurrent use (a
// plan runs on one goroutine).
type Stats struct {
	nodes map[plan.Node]*NodeStats
}

// NodeStats are one node's figures.
type NodeStats struct {
	Rows int64
	Time time.Duration
	// FirstRow is the time until each run's first row, summed over runs
	// (PostgreSQL's startup time).
	FirstRow time.Duration
	// Loops is how many times the node was started.
	Loops int64
	// KVRequests counts KV operations (a Get, a Scan page) the node sent;
	// KVBatches the round trips (kv.Txn.Run calls) carrying them, each
	// fanned out to the tablets it touches in parallel.
	KVRequests int64
	KVBatches  int64
	// KVKeys and KVBytes are the keys and bytes (keys and values) the
	// node's reads returned; Tablets how many distinct tablets its
	// requests reached.
	KVKeys, KVBytes int64
	Tablets         int
	tablets         map[kvpb.TabletID]struct{}
	// Fragments are the fragments a distributed scan ran (distsql.go),
	// FragmentStats what each reported at its end.
	Fragments     []distsql.Fragment
	FragmentStats []distsql.FragmentStats
	// FragmentRows: the fragments shipped rows (they ran SQL,
	// distsql_plan.go), not KVs.
	FragmentRows bool
	// DistJoin says how a distributed join ran (distsql_join.go).
	DistJoin string
	// Remote: the node ran inside its plan's distributed fragments, not
	// at the gateway (its figures are its fragments', on the node above).
	Remote bool
}

// Node returns n's figures (nil if n never ran).
func (s *Stats) Node(n plan.Node) *NodeStats {
	if s == nil {
		return nil
	}
	return s.nodes[n]
}

func (s *Stats) node(n plan.Node) *NodeStats {
	if s.nodes == nil {
		s.nodes = map[plan.Node]*NodeStats{}
	}
	ns := s.nodes[n]
	if ns == nil {
		ns = &NodeStats{}
		s.nodes[n] = ns
	}
	return ns
}

// addKV records one round trip of requests KV operations for n. Safe on
// a nil Stats (statistics off).
func (s *Stats) addKV(n plan.Node, requests int) {
	if s == nil || n == nil {
		return
	}
	ns := s.node(n)
	ns.KVRequests += int64(requests)
	ns.KVBatches++
}

// trace returns ctx recording the tablets the node's next requests reach
// (ctx and nil when statistics are off).
func (s *Stats) trace(ctx context.Context) (context.Context, *kv.TabletTrace) {
	if s == nil {
		return ctx, nil
	}
	tr := &kv.TabletTrace{}
	return kv.WithTabletTrace(ctx, tr), tr
}

// addRead records what one round trip of reads returned to n: its keys,
// their bytes and the tablets tr saw. Safe on a nil Stats.
func (s *Stats) addRead(n plan.Node, tr *kv.TabletTrace, results []kv.Result) {
	if s == nil || n == nil {
		return
	}
	ns := s.node(n)
	for i := range results {
		for _, kvp := range results[i].Rows {
			ns.KVKeys++
			ns.KVBytes += int64(len(kvp.Key) + len(kvp.Value))
		}
	}
	if tr == nil {
		return
	}
	if ns.tablets == nil {
		ns.tablets = map[kvpb.TabletID]struct{}{}
	}
	for _, id := range tr.Tablets() {
		ns.tablets[id] = struct{}{}
	}
	ns.Tablets = len(ns.tablets)
}

// Annotate returns n's EXPLAIN ANALYZE figures as PostgreSQL prints them
// on the node's line, "(actual time=0.012..0.020 rows=3 loops=1)" (per
// run averages, as PostgreSQL reports a node run several times), then on a
// line of its own what Cairn adds: "KV: 1 request in 1 round trip" for a
// node that read or wrote KV itself. "(never executed)" for a node that
// never ran. plan.Explain appends a first line that starts with "(" to
// the node's title and prints the rest as detail lines.
func (s *Stats) Annotate(n plan.Node) string {
	ns := s.Node(n)
	if ns != nil && ns.Remote && ns.Loops == 0 {
		return "(in distributed fragments)"
	}
	if ns == nil || ns.Loops == 0 {
		return "(never executed)"
	}
	loops := float64(ns.Loops)
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 / loops }
	out := fmt.Sprintf("(actual time=%.3f..%.3f rows=%.0f loops=%d)", ms(ns.FirstRow), ms(ns.Time), float64(ns.Rows)/loops, ns.Loops)
	if ns.KVBatches > 0 {
		out += fmt.Sprintf("\nKV: %d %s in %d round %s", ns.KVRequests, plural(ns.KVRequests, "request", "requests"),
			ns.KVBatches, plural(ns.KVBatches, "trip", "trips"))
		if ns.Tablets > 0 {
			out += fmt.Sprintf(" to %d %s", ns.Tablets, plural(int64(ns.Tablets), "tablet", "tablets"))
		}
		if ns.KVKeys > 0 || ns.tablets != nil {
			out += fmt.Sprintf(", read %d %s (%s)", ns.KVKeys, plural(ns.KVKeys, "key", "keys"), byteSize(ns.KVBytes))
		}
	}
	return out + annotateDist(ns)
}

// byteSize prints n bytes as PostgreSQL's EXPLAIN prints memory: bytes
// below 1 kB, else whole kB.
func byteSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%dkB", (n+1023)/1024)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (s *Stats) wrap(n plan.Node, o op) op {
	ns := s.node(n)
	ns.Loops++
	return &statsOp{in: o, ns: ns}
}

type statsOp struct {
	in op
	ns *NodeStats
	// sinceStart is the time this run has spent so far, until its first
	// row (then FirstRow has it).
	sinceStart time.Duration
	started    bool
}

func (o *statsOp) Next(ctx context.Context) ([]types.Datum, error) {
	t := time.Now()
	row, err := o.in.Next(ctx)
	d := time.Since(t)
	o.ns.Time += d
	if !o.started {
		o.sinceStart += d
		if row != nil || err != nil {
			o.started = true
			o.ns.FirstRow += o.sinceStart
		}
	}
	if row != nil {
		o.ns.Rows++
	}
	return row, err
}

func (o *statsOp) Close() { o.in.Close() }

// RowsAffected passes a DML root's count through the wrapper.
func (o *statsOp) RowsAffected() int64 {
	if a, ok := o.in.(affecter); ok {
		return a.RowsAffected()
	}
	return o.ns.Rows
}
