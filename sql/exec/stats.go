package exec

import (
	"context"
	"fmt"
	"time"

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
	// Loops is how many times the node was started.
	Loops int64
	// KVRequests counts KV operations (a Get, a Scan page) the node sent;
	// KVBatches the round trips (kv.Txn.Run calls) carrying them, each
	// fanned out to the tablets it touches in parallel.
	KVRequests int64
	KVBatches  int64
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

// Annotate returns the EXPLAIN ANALYZE line for n, e.g.
// "actual rows=3 time=0.2ms, kv requests=1, batches=1"; "never executed"
// for a node that never ran.
func (s *Stats) Annotate(n plan.Node) string {
	ns := s.Node(n)
	if ns == nil {
		return "never executed"
	}
	out := fmt.Sprintf("actual rows=%d time=%.3fms", ns.Rows, float64(ns.Time.Microseconds())/1000)
	if ns.Loops > 1 {
		out += fmt.Sprintf(" loops=%d", ns.Loops)
	}
	if ns.KVBatches > 0 {
		out += fmt.Sprintf(", kv requests=%d, batches=%d", ns.KVRequests, ns.KVBatches)
	}
	return out
}

func (s *Stats) wrap(n plan.Node, o op) op {
	ns := s.node(n)
	ns.Loops++
	return &statsOp{in: o, ns: ns}
}

type statsOp struct {
	in op
	ns *NodeStats
}

func (o *statsOp) Next(ctx context.Context) ([]types.Datum, error) {
	t := time.Now()
	row, err := o.in.Next(ctx)
	o.ns.Time += time.Since(t)
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
