package server

// Closed timestamps (tablet/closedts.go; docs/architecture.md, "Reference
// tables: global reads" and "AS OF SYSTEM TIME"): a clustered node closes,
// as leaseholder, the tablets whose zone asks for global reads ahead of
// the clock with raft entries, and every other tablet it leads
// tablet.TrailingTarget behind the clock, sending those closings to the
// followers' nodes in one node-service call per node per interval (the
// side transport, methodSideClosed). Its KV router sends a transaction's
// reads of a tablet to the local replica first when that replica's closed
// timestamp covers them.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/tablet"
)

// methodSideClosed is the node-service method carrying trailing closings
// (store.EncodeSideClosings) to a follower's node.
const methodSideClosed = "SideClosed"

// startCloser runs the store's closer until stopCloser.
func (r *replication) startCloser(s *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	side := &sideTransport{r: r, s: s, clients: map[uint64]*sideClient{},
		sent: &r.sideSent, sentBytes: &r.sideSentBytes, skipped: &r.sideSkipped}
	go func() {
		defer close(done)
		s.store.RunCloser(ctx, store.ClosedTSConfig{
			GlobalSpans: r.zones.cache.GlobalSpans,
			Lead:        store.CloseLead(clusterMaxOffset),
			Logger:      s.log,
			Publish:     side.publish,
			HasFollowers: func(id kvpb.TabletID) bool {
				return len(side.followers(id)) > 0
			},
		})
	}()
	r.stopCloser = func() {
		cancel()
		<-done
		side.close()
	}
}

// handleSideClosed answers methodSideClosed.
func (s *Server) handleSideClosed(_ context.Context, msg []byte) ([]byte, error) {
	start := time.Now()
	defer func() {
		s.repl.sideReceived.Add(1)
		s.repl.sideReceivedBytes.Add(int64(len(msg)))
		s.repl.sideReceiveNanos.Add(int64(time.Since(start)))
	}()
	cs, err := store.DecodeSideClosings(msg)
	if err != nil {
		return nil, err
	}
	if st := s.repl.closedStore.Load(); st != nil {
		st.SideClosed(cs)
	}
	return nil, nil
}

// sideTransport sends each interval's trailing closings to the nodes of
// the tablets' other voters, one call per node, over a connection kept
// per node. A call still in flight when the next interval's closings are
// ready makes that node skip them (the next ones supersede them).
type sideTransport struct {
	r *replication
	s *Server
	// sent, sentBytes and skipped count the calls sent, their messages'
	// bytes and the node-rounds skipped because a call was in flight
	// (/metrics, cairn_closer_*).
	sent, sentBytes, skipped *atomic.Int64
	mu                       sync.Mutex
	// clients by node; busy while a call is in flight.
	clients map[uint64]*sideClient
	wg      sync.WaitGroup
}

type sideClient struct {
	addr string
	c    *rpc.NodeClient
	busy bool
}

func (t *sideTransport) publish(ctx context.Context, cs []store.SideClosing) {
	byNode := map[uint64][]store.SideClosing{}
	for _, c := range cs {
		for _, n := range t.followers(c.Tablet) {
			byNode[n] = append(byNode[n], c)
		}
	}
	for n, list := range byNode {
		addr, err := t.r.registry.Resolve(n)
		if err != nil {
			continue
		}
		t.mu.Lock()
		cl := t.clients[n]
		if cl == nil || cl.addr != addr {
			if cl != nil && !cl.busy {
				_ = cl.c.Close()
			}
			nc, err := rpc.NewNodeClient(t.s.rpcCreds, addr)
			if err != nil {
				t.mu.Unlock()
				continue
			}
			cl = &sideClient{addr: addr, c: nc}
			t.clients[n] = cl
		}
		if cl.busy {
			t.mu.Unlock()
			t.skipped.Add(1)
			continue
		}
		cl.busy = true
		t.mu.Unlock()
		msg := store.EncodeSideClosings(list)
		t.sent.Add(1)
		t.sentBytes.Add(int64(len(msg)))
		t.wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 2*tablet.TrailingTarget)
			_, err := cl.c.Call(cctx, methodSideClosed, msg)
			cancel()
			if err != nil && ctx.Err() == nil {
				t.s.log.Debug("cairn: sending closed timestamps", "node", n, "err", err)
			}
			t.mu.Lock()
			cl.busy = false
			t.mu.Unlock()
		})
	}
}

// followers lists the nodes other than this one holding replicas of id.
func (t *sideTransport) followers(id kvpb.TabletID) []uint64 {
	cfg := t.r.raft.Config(uint64(id))
	var out []uint64
	for _, n := range slices.Concat(cfg.GetVoters(), cfg.GetLearners()) {
		if n != t.r.id {
			out = append(out, n)
		}
	}
	return out
}

func (t *sideTransport) close() {
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, cl := range t.clients {
		_ = cl.c.Close()
	}
	t.clients = nil
}

// followerReads is kv.LeaseholderConfig.FollowerReads: this node has a
// replica of tablet that does not hold the lease and whose applied closed
// timestamp covers need, or is a global-reads tablet's (which a
// present-time read waits a little for, when its closer is late).
func followerReads(st *store.Store) func(kvpb.TabletID, hlc.Timestamp) bool {
	return func(id kvpb.TabletID, need hlc.Timestamp) bool {
		rep := st.Replica(id)
		if rep == nil || rep.HoldsLease() {
			return false
		}
		c := rep.ClosedTimestamp()
		return !c.IsEmpty() && (need.LessEq(c) || rep.ClosedLeads())
	}
}

// servable is kv.Options.Servable: the newest timestamp the replica a
// read of tablet goes to first serves without waiting. That is this
// node's replica when it has one (LeaseholderSender tries it first): the
// present if it holds the lease, else its applied closed timestamp (no
// later than now: a global-reads tablet's runs ahead of the clock, and
// zero when it has none, so the read waits for the leaseholder). Without
// a local replica the leaseholder serves the read, at the present.
func servable(st *store.Store) func(kvpb.TabletID, hlc.Timestamp) hlc.Timestamp {
	return func(id kvpb.TabletID, now hlc.Timestamp) hlc.Timestamp {
		rep := st.Replica(id)
		if rep == nil || rep.HoldsLease() {
			return now
		}
		c := rep.ClosedTimestamp()
		if now.Less(c) {
			return now
		}
		return c
	}
}

// globalFollowerReads is distsql.Planner.Local: this node has a replica
// of a global-reads tablet that does not hold the lease, so a fragment
// reading it at the present runs here.
func globalFollowerReads(st *store.Store) func(kvpb.TabletID) bool {
	return func(id kvpb.TabletID) bool {
		rep := st.Replica(id)
		return rep != nil && !rep.HoldsLease() && rep.ClosedLeads()
	}
}

// closerMetrics appends the closed-timestamp closer's counters to
// /metrics: its rounds and their time on this node as leaseholder, the
// side-transport calls it sent, and those it received as follower (what
// follower reads cost a node: bench/closer).
func (s *Server) closerMetrics(w io.Writer) {
	if s.repl == nil {
		return
	}
	st := s.store.CloserStats()
	r := s.repl
	for _, m := range []struct {
		name, help string
		v          float64
	}{
		{"cairn_closer_rounds_total", "Trailing closer rounds (one per interval).", float64(st.Rounds)},
		{"cairn_closer_tablets_visited_total", "Tablets those rounds looked at (every tablet of the store, each round).", float64(st.Tablets)},
		{"cairn_closer_closings_total", "Trailing closings published (tablets this node leads that have followers, each round).", float64(st.Closed)},
		{"cairn_closer_round_seconds_total", "Wall time of the closer's rounds, encoding the messages included.", float64(st.Nanos) / 1e9},
		{"cairn_closer_lease_skips_total", "Tablets a round skipped because their lease did not hold without waiting.", float64(st.LeaseSkips)},
		{"cairn_closer_side_messages_sent_total", "Side-transport calls sent to followers' nodes (one per node per round).", float64(r.sideSent.Load())},
		{"cairn_closer_side_bytes_sent_total", "Bytes of those calls' messages.", float64(r.sideSentBytes.Load())},
		{"cairn_closer_side_rounds_skipped_total", "Node-rounds skipped because the previous call to that node was still in flight.", float64(r.sideSkipped.Load())},
		{"cairn_closer_side_messages_received_total", "Side-transport calls received from leaseholders' nodes.", float64(r.sideReceived.Load())},
		{"cairn_closer_side_bytes_received_total", "Bytes of those calls' messages.", float64(r.sideReceivedBytes.Load())},
		{"cairn_closer_side_receive_seconds_total", "Time spent decoding received closings and handing them to the replicas.", float64(r.sideReceiveNanos.Load()) / 1e9},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %g\n", m.name, m.help, m.name, m.name, m.v)
	}
}
