package kv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// LeaseholderSender sends each sub-batch the DistSender addresses to a
// tablet (BatchRequest.TabletID set) to the node holding that tablet's
// lease, so that any node can be a gateway. It knows nodes only by ID and
// replication only through kvpb.NotLeaseholderError: a replica that does
// not hold the lease refuses without evaluating and names the node it
// believes does, and the sender follows the hint, or tries the tablet's
// other replicas while an election leaves no leader, backing off between
// rounds. It remembers each tablet's leaseholder. Safe for concurrent use.
//
// Retrying on another node is safe exactly when the first did nothing: a
// NotLeaseholderError (not evaluated) or a routing error from the
// transport (not sent). Any other answer, AmbiguousResultError included,
// is returned as it is.
type LeaseholderSender struct {
	cfg LeaseholderConfig

	// leaders caches each tablet's leaseholder (kvpb.TabletID → node ID,
	// a uint64): read by every batch, written when a lease is learned or
	// lost, so a lookup takes no lock (TestLeaseholderCache).
	leaders sync.Map
}

// LeaseholderConfig configures a LeaseholderSender.
type LeaseholderConfig struct {
	// LocalNode is this node's ID; batches without a TabletID (routed by
	// key) go to its sender.
	LocalNode uint64
	// Node returns the sender to a node (the local store for LocalNode, an
	// RPC client for the others).
	Node func(nodeID uint64) kvpb.Sender
	// Replicas lists the nodes holding replicas of a tablet, as far as
	// this node knows (it may be stale or empty: then AllNodes is used).
	Replicas func(kvpb.TabletID) []uint64
	// AllNodes lists every node of the cluster.
	AllNodes func() []uint64
	// FollowerReads, if set, reports whether this node holds a replica of
	// a tablet that may serve reads without the lease (a closed
	// timestamp: tablet/closedts.go). A transaction's plain reads of such
	// a tablet go to that local replica first; it answers or refuses
	// (NotLeaseholderError) without a round trip, and a refusal is routed
	// as usual. need is the timestamp the replica's closed timestamp
	// must reach to serve the batch (its read timestamp or, above it, its
	// uncertainty limit): an AS OF SYSTEM TIME read far enough in the
	// past is served by any tablet's follower (trailing closed
	// timestamps), a present-time one only by a global-reads tablet's.
	FollowerReads func(id kvpb.TabletID, need hlc.Timestamp) bool
	// Timeout bounds how long one batch looks for its leaseholder, from
	// the first refusal (an election takes a few election timeouts).
	// Default 10s.
	Timeout time.Duration
}

// NewLeaseholderSender returns a sender with an empty leaseholder cache.
func NewLeaseholderSender(cfg LeaseholderConfig) *LeaseholderSender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &LeaseholderSender{cfg: cfg}
}

// Leaseholder returns the node cached as tablet's leaseholder (0: none).
// It takes no lock and allocates nothing.
func (s *LeaseholderSender) Leaseholder(tablet kvpb.TabletID) uint64 {
	if v, ok := s.leaders.Load(tablet); ok {
		return v.(uint64)
	}
	return 0
}

// setLeader caches node as tablet's leaseholder (0: forgets it).
func (s *LeaseholderSender) setLeader(tablet kvpb.TabletID, node uint64) {
	if node == 0 {
		s.leaders.Delete(tablet)
		return
	}
	if v, ok := s.leaders.Load(tablet); ok && v.(uint64) == node {
		return
	}
	s.leaders.Store(tablet, node)
}

// Send implements kvpb.Sender. It names the batch's gateway
// (Header.GatewayNode) unless the batch names one, if ctx is a client's:
// this node (WithClientRequests) or the node whose client a distributed
// fragment reads for (WithClientGateway). Only clients' requests draw
// leases.
func (s *LeaseholderSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if ba.GatewayNode == 0 && s.cfg.LocalNode != 0 {
		if gw := ClientGateway(ctx, s.cfg.LocalNode); gw != 0 {
			c := *ba
			c.GatewayNode = gw
			ba = &c
		}
	}
	if ba.TabletID == 0 {
		return s.cfg.Node(s.cfg.LocalNode).Send(ctx, ba)
	}
	if s.followerRead(ba) {
		br, err := s.cfg.Node(s.cfg.LocalNode).Send(ctx, ba)
		var nle *kvpb.NotLeaseholderError
		var km *kvpb.TabletKeyMismatchError
		var nf *kvpb.TabletNotFoundError
		if err == nil || !(errors.As(err, &nle) || errors.As(err, &km) || errors.As(err, &nf)) {
			// Served here (or failed for a reason no other replica
			// would fix, such as an uncertain value). The leaseholder
			// cache is left alone: this node does not hold the lease.
			// A refusal, or a replica here that has not caught up with
			// a split, sends the batch the usual way.
			return br, err
		}
	}
	cached := s.Leaseholder(ba.TabletID)
	next := cached
	if next == 0 {
		next = s.cfg.LocalNode
	}
	// The first attempt, at the cached leaseholder, is all almost every
	// batch needs. What only a refusal needs is built at the first one:
	// the tablet's replicas (a copy of its raft configuration: 1.5% of
	// the node's CPU under pgbench's point SELECTs when it was built per
	// batch), the set of nodes tried and the deadline, which counts from
	// there.
	var (
		candidates []uint64
		tried      map[uint64]bool
		deadline   time.Time
		lastErr    error
	)
	backoff := 10 * time.Millisecond
	for {
		br, err := s.cfg.Node(next).Send(ctx, ba)
		if err == nil {
			if next != cached || tried != nil {
				s.setLeader(ba.TabletID, next)
			}
			return br, nil
		}
		if tried == nil {
			tried = map[uint64]bool{}
			candidates = s.cfg.Replicas(ba.TabletID)
			if len(candidates) == 0 {
				candidates = s.cfg.AllNodes()
			}
			deadline = time.Now().Add(s.cfg.Timeout)
		}
		var nle *kvpb.NotLeaseholderError
		var nf *kvpb.TabletNotFoundError
		switch {
		case errors.As(err, &nle):
			tried[next] = true
			s.setLeader(ba.TabletID, nle.Leader)
			if nle.Leader != 0 && nle.Leader != next && !tried[nle.Leader] {
				next = nle.Leader
				continue
			}
		case errors.As(err, &nf):
			// Unreachable, or no replica there: someone else may have one.
			tried[next] = true
			s.setLeader(ba.TabletID, 0)
		default:
			return nil, err
		}
		lastErr = err
		if n, ok := untried(candidates, tried); ok {
			next = n
			continue
		}
		// Every replica refused or was unreachable: an election is under
		// way, or the tablet moved. Wait a little and go round again.
		if time.Now().After(deadline) {
			if nf != nil {
				// Let the DistSender evict its descriptor and look again.
				return nil, lastErr
			}
			return nil, fmt.Errorf("kv: no leaseholder found for tablet %d within %s: %w", ba.TabletID, s.cfg.Timeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		clear(tried)
		if l := s.Leaseholder(ba.TabletID); l != 0 {
			next = l
		} else {
			next = candidates[0]
		}
	}
}

// followerRead reports whether ba should try this node's own replica
// first (LeaseholderConfig.FollowerReads): a transaction's plain reads,
// if it has written nothing (no anchor key; a follower may not have its
// intents yet).
func (s *LeaseholderSender) followerRead(ba *kvpb.BatchRequest) bool {
	if s.cfg.FollowerReads == nil || ba.Txn == nil || len(ba.Txn.Key) != 0 || s.Leaseholder(ba.TabletID) == s.cfg.LocalNode {
		return false
	}
	for _, req := range ba.Requests {
		switch req.(type) {
		case *kvpb.GetRequest, *kvpb.ScanRequest:
		default:
			return false
		}
	}
	return s.cfg.FollowerReads(ba.TabletID, ba.Txn.ReadTimestamp.Forward(ba.Txn.GlobalUncertaintyLimit))
}

func untried(nodes []uint64, tried map[uint64]bool) (uint64, bool) {
	for _, n := range nodes {
		if !tried[n] {
			return n, true
		}
	}
	return 0, false
}

// LateSender is a kvpb.Sender whose target is set after it is handed out:
// a node's store sends pushes and resolutions through the node's KV
// client, which is built after (and from) the store. Set must be called
// before the first Send.
type LateSender struct {
	mu sync.RWMutex
	s  kvpb.Sender
}

// Set makes every later Send go to s.
func (l *LateSender) Set(s kvpb.Sender) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s = s
}

// Send implements kvpb.Sender.
func (l *LateSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	l.mu.RLock()
	s := l.s
	l.mu.RUnlock()
	if s == nil {
		return nil, errors.New("kv: LateSender used before Set")
	}
	return s.Send(ctx, ba)
}
