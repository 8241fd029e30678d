package server

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/clockmon"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/membership"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/tablet"
)

// A node started with Join is replicated (package membership owns the
// rules; this file wires them):
//
//   - If RPCAddr is among the Join addresses, the node is one of a fixed
//     set of initial members (a static bootstrap, as etcd's initial
//     cluster): Join lists every member's RPC address in the same order
//     on every node, a node's ID is its address's position (from 1), and
//     every member bootstraps the first tablet as a raft group of all of
//     them. `--join A --rpc-addr A` is a cluster of one that others can
//     join later.
//   - Otherwise it joins a running cluster: with an empty store it asks
//     the members at the Join addresses for a node ID (a replicated
//     counter) and starts with no tablet; the replicate queues of the
//     tablets' leaseholders then add it to their groups.
//
// An initial member whose store is empty first asks the others whether
// the cluster already runs and knows its ID: then it was wiped, and it
// joins as a new node instead of reusing an ID whose raft votes it lost.
// Every store records the cluster's ID, and a node whose store belongs
// to another cluster is refused.

// membersKey records the member list an initial member's store was
// bootstrapped with (the node ID is membership's node-id key).
var membersKey = keys.StoreLocal("members")

// nodeIDKey is the store's node ID (shared with package membership).
var nodeIDKey = keys.StoreLocal("node-id")

// clusterMaxOffset is the maximum clock offset between the members.
const clusterMaxOffset = 500 * time.Millisecond

// replication is a clustered node's replication half.
type replication struct {
	id        uint64
	transport *rpc.Transport
	raft      *raftnode.Node
	rpc       *rpc.Server
	stopRun   context.CancelFunc
	runDone   chan error
	senders   *rpc.NodeSenders
	member    *membership.Member
	registry  *membership.Registry
	// geo and stopBalancer: simulated geography and lease placement
	// (geo.go); load counts the requests the node's tablets serve by
	// gateway, for leases to follow (nil for a node without a region).
	geo          *rpc.Geography
	stopBalancer func()
	balancer     *store.LeaseBalancer
	load         *store.RequestLoad
	// clock measures this node's clock against the other members' and
	// fences the node when it disagrees with a majority (clockmon).
	clock   *clockmon.Monitor
	pinger  *rpc.ClockPinger
	monDone chan struct{}
	// zones gives the queues each tablet's placement settings (zones.go).
	zones *zones
	// stopCloser stops the closed-timestamp closer (closedts.go).
	stopCloser func()
	// closedStore is the store side-transport closings go to, set once
	// it serves (closedts.go; a call may arrive before).
	closedStore atomic.Pointer[store.Store]
	// The side transport's counters (closedts.go, closerMetrics).
	sideSent, sideSentBytes, sideSkipped              atomic.Int64
	sideReceived, sideReceivedBytes, sideReceiveNanos atomic.Int64
	// faults cuts this node off from chosen peers (nil unless
	// Config.FaultInjection; debug_faults.go).
	faults *rpc.Faults
	// distsql runs other gateways' fragments here; dist starts this
	// node's flows (sql/distsql).
	distsql *distsql.Server
	dist    *distsql.Runner
	// backfill reads pieces of other nodes' index builds here.
	backfill *ddl.BackfillProcessor
}

// memberID returns the position (from 1) of self in join, 0 if absent.
func memberID(join []string, self string) (uint64, error) {
	i := slices.Index(join, self)
	if i < 0 {
		return 0, nil
	}
	if slices.Index(join[i+1:], self) >= 0 {
		return 0, fmt.Errorf("--join lists %s twice", self)
	}
	return uint64(i + 1), nil
}

// checkMembership refuses a store created as another member or for
// another member list, and records both in a new store.
func checkMembership(eng *storage.Engine, id uint64, join []string) error {
	members := []byte(fmt.Sprint(join))
	v, ok, err := eng.Get(storage.MVCCKey{Key: nodeIDKey})
	if err != nil {
		return err
	}
	if ok {
		if len(v) != 8 || binary.BigEndian.Uint64(v) != id {
			return fmt.Errorf("the store belongs to another node of the cluster (node %d), not node %d", binary.BigEndian.Uint64(v), id)
		}
		m, _, err := eng.Get(storage.MVCCKey{Key: membersKey})
		if err != nil {
			return err
		}
		if string(m) != string(members) {
			return fmt.Errorf("the store was created for the cluster %s, not %s: start it with the --rpc-addr and --join it was created with (the same --rpc-addr and no --join if it was started plainly)", m, members)
		}
		return nil
	}
	b := eng.NewWriteOnlyBatch()
	defer b.Close()
	if err := b.Put(storage.MVCCKey{Key: nodeIDKey}, binary.BigEndian.AppendUint64(nil, id)); err != nil {
		return err
	}
	if err := b.Put(storage.MVCCKey{Key: membersKey}, members); err != nil {
		return err
	}
	return b.Commit()
}

// joinTimeout bounds how long a new node waits for a running cluster to
// admit it (the members may still be starting).
const joinTimeout = 60 * time.Second

// identify decides this node's ID and whether it is an initial member
// (whose first tablet starts with the initial members as its voters),
// joining through the Join addresses when it must, and fills registry.
func (s *Server) identify(ctx context.Context, registry *membership.Registry) (id uint64, peers []uint64, err error) {
	cfg := s.cfg
	pos, err := memberID(cfg.Join, cfg.RPCAddr)
	if err != nil {
		return 0, nil, err
	}
	ident, joined, err := membership.ReadIdentity(s.eng)
	if err != nil {
		return 0, nil, err
	}
	if ident.NodeID == 0 {
		if err := refuseUnreplicatedStore(s.eng); err != nil {
			return 0, nil, err
		}
	}
	self := membership.NodeRecord{RPCAddr: cfg.RPCAddr, Locality: cfg.Locality, StoreProfile: s.cfg.StoreProfile}.WithVersion(s.version)
	others := slices.DeleteFunc(slices.Clone(cfg.Join), func(a string) bool { return a == cfg.RPCAddr })
	initial := func() []uint64 {
		ps := make([]uint64, len(cfg.Join))
		for i, a := range cfg.Join {
			ps[i] = uint64(i + 1)
			registry.Set(membership.NodeRecord{NodeID: uint64(i + 1), RPCAddr: a})
		}
		return ps
	}
	cached := func() error {
		recs, err := membership.CachedNodes(s.eng)
		for _, r := range recs {
			registry.Set(r)
		}
		return err
	}
	adopt := func(resp membership.JoinResponse) {
		for _, r := range resp.Nodes {
			registry.Set(r)
		}
	}
	switch {
	case ident.NodeID != 0 && joined:
		// A node that joined, restarting: its peers confirm it belongs.
		if err := cached(); err != nil {
			return 0, nil, err
		}
		resp, err := membership.Join(ctx, s.rpcCreds, append(others, addrsOf(registry, ident.NodeID)...), membership.JoinRequest{ClusterID: ident.ClusterID, NodeID: ident.NodeID, Node: self})
		switch {
		case errors.Is(err, membership.ErrRefused):
			return 0, nil, err
		case err != nil:
			s.log.Warn("cairn: no member reachable to confirm this node; starting from its cached node table", "err", err)
		default:
			adopt(resp)
		}
		return ident.NodeID, nil, nil
	case ident.NodeID != 0:
		// An initial member restarting.
		if pos == 0 {
			return 0, nil, fmt.Errorf("the store is initial member %d's, but --rpc-addr %s is not among the --join addresses %v", ident.NodeID, cfg.RPCAddr, cfg.Join)
		}
		if err := checkMembership(s.eng, pos, cfg.Join); err != nil {
			return 0, nil, err
		}
		peers := initial()
		if err := cached(); err != nil {
			return 0, nil, err
		}
		return pos, peers, nil
	case pos != 0:
		// An empty store of an initial member: the first start, or a
		// wiped node if the cluster already runs and its ID is taken.
		running, err := s.clusterRuns(ctx, others)
		if err != nil {
			return 0, nil, err
		}
		if running {
			resp, err := s.join(ctx, others, membership.JoinRequest{InitialMember: pos, Node: self})
			if err != nil {
				return 0, nil, err
			}
			adopt(resp)
			if resp.NodeID != pos {
				s.log.Info("cairn: the cluster runs and this node's ID is taken: this (wiped) node joins as a new node", "was", pos, "node", resp.NodeID)
				if err := membership.WriteIdentity(s.eng, membership.Identity{ClusterID: resp.ClusterID, NodeID: resp.NodeID}, true); err != nil {
					return 0, nil, err
				}
				return resp.NodeID, nil, nil
			}
			if err := membership.WriteIdentity(s.eng, membership.Identity{ClusterID: resp.ClusterID}, false); err != nil {
				return 0, nil, err
			}
		}
		if err := checkMembership(s.eng, pos, cfg.Join); err != nil {
			return 0, nil, err
		}
		return pos, initial(), nil
	default:
		// An empty store joining a running cluster.
		if ident.ClusterID != "" {
			return 0, nil, fmt.Errorf("the store has cluster %s's ID but no node ID", ident.ClusterID)
		}
		resp, err := s.join(ctx, cfg.Join, membership.JoinRequest{Node: self})
		if err != nil {
			return 0, nil, err
		}
		adopt(resp)
		if err := membership.WriteIdentity(s.eng, membership.Identity{ClusterID: resp.ClusterID, NodeID: resp.NodeID}, true); err != nil {
			return 0, nil, err
		}
		s.log.Info("cairn: joined the cluster", "node", resp.NodeID, "cluster", resp.ClusterID)
		return resp.NodeID, nil, nil
	}
}

// ErrUnreplicatedStore refuses to replicate a store an unreplicated node
// created, and ErrReplicatedStore to open a replicated node's store
// unreplicated.
var (
	ErrUnreplicatedStore = errors.New("the store was created by an unreplicated node")
	ErrReplicatedStore   = errors.New("the store belongs to a node of a replicated cluster")
)

// refuseUnreplicatedStore refuses a store that holds tablets but no node
// ID: an unreplicated node's (a plain `cairn start` before a plain start
// made a one-node cluster, or --unreplicated). Its tablets have no raft
// state, and turning them into raft groups in place is not built: such a
// store stays unreplicated (a dump and restore moves its data into a
// cluster).
func refuseUnreplicatedStore(eng *storage.Engine) error {
	descs, err := tablet.ReadDirectory(eng)
	if err != nil {
		return err
	}
	if len(descs) > 0 {
		return fmt.Errorf("%w (it has %d tablets and no node ID; stores made by a plain `cairn start` before one-node clusters could grow are such): start it with --unreplicated, or dump it (pg_dump) and restore into a new cluster", ErrUnreplicatedStore, len(descs))
	}
	return nil
}

// refuseReplicatedStore refuses to open a replicated node's store as an
// unreplicated node: it would ignore the raft state and serve what may be
// a stale replica as the truth.
func refuseReplicatedStore(eng *storage.Engine) error {
	ident, joined, err := membership.ReadIdentity(eng)
	if err != nil {
		return err
	}
	if ident.NodeID != 0 {
		how := "with its --rpc-addr (and the --join it was started with, if any)"
		if joined {
			how = "with --join and its --rpc-addr"
		}
		return fmt.Errorf("%w (node %d): start it without --unreplicated, %s", ErrReplicatedStore, ident.NodeID, how)
	}
	return nil
}

// join asks the members at addrs to admit this node, retrying while none
// can yet (they may be starting) for up to joinTimeout.
func (s *Server) join(ctx context.Context, addrs []string, req membership.JoinRequest) (membership.JoinResponse, error) {
	deadline := time.Now().Add(joinTimeout)
	for {
		resp, err := membership.Join(ctx, s.rpcCreds, addrs, req)
		if err == nil {
			return resp, nil
		}
		if errors.Is(err, membership.ErrRefused) || time.Now().After(deadline) {
			return resp, fmt.Errorf("joining the cluster at %v: %w", addrs, err)
		}
		if err := s.checkPeers(ctx, addrs); err != nil {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// probeWait bounds one round of asking the other initial members whether
// a cluster runs, and probeRounds how many rounds a silent member (one
// that neither answers nor refuses connections) is waited for.
const (
	probeWait   = 5 * time.Second
	probeRounds = 6
)

// clusterRuns reports whether any node at addrs is part of a running
// cluster. Every node serves the probe as soon as it listens, so a first
// start of all members learns at once that none is; a node that stays
// silent is asked again, and after probeRounds the answer is no (with a
// warning: a wiped member whose peers are all silent cannot tell).
func (s *Server) clusterRuns(ctx context.Context, addrs []string) (bool, error) {
	if len(addrs) == 0 {
		return false, nil
	}
	for round := 1; ; round++ {
		pctx, cancel := context.WithTimeout(ctx, probeWait)
		res := membership.Probe(pctx, s.rpcCreds, addrs)
		cancel()
		if res.ClusterID != "" {
			return true, nil
		}
		if res.Silent == 0 {
			// A peer of the other security would have looked like one
			// with no cluster (its connections close at once).
			return false, s.checkPeers(ctx, addrs)
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if round == probeRounds {
			s.log.Warn("cairn: initial members did not answer whether the cluster runs; starting as a first start", "silent", res.Silent)
			return false, nil
		}
	}
}

// addrsOf lists the RPC addresses the registry knows, but node self's.
func addrsOf(r *membership.Registry, self uint64) []string {
	var out []string
	for _, rec := range r.Nodes() {
		if rec.NodeID != self && rec.RPCAddr != "" {
			out = append(out, rec.RPCAddr)
		}
	}
	return out
}

// startReplicated opens the store with every tablet a raft group, the
// RPC server (raft, KV and the membership methods) on ln, and the KV
// client that routes to leaseholders. It sets s.store and s.db; the
// membership's loops start later (startMembership), once the catalog is
// there.
func (s *Server) startReplicated(ctx context.Context, clock *hlc.Clock, ln net.Listener) error {
	cfg := s.cfg
	// Serve RPC first, with every handler bound late: starting members
	// probe each other before any has its node ID, and each must answer
	// at once.
	r := &replication{geo: newGeography(cfg, 0)}
	// Requests are counted by gateway with or without a region: without
	// one a busy tablet's lease follows its one gateway (store's
	// LeaseBalancer, locality; issue 22).
	r.load = store.NewRequestLoad(0)
	if cfg.FaultInjection {
		r.faults = &rpc.Faults{}
	}
	s.repl = r
	var raftRef atomic.Pointer[raftnode.Node]
	kvRef := &lateStore{}
	svc := &membership.Service{}
	// Fragments read through the node's DB, set once it exists.
	distKV := &kv.LateSender{}
	r.distsql = distsql.NewServer(0, distKV)
	r.rpc = rpc.Serve(ln, func(env raftnode.Envelope) {
		if n := raftRef.Load(); n != nil {
			_ = n.Step(env)
		}
	}, func(ctx context.Context, env raftnode.Envelope, image io.Reader) error {
		n := raftRef.Load()
		if n == nil {
			return errors.New("cairn: not replicating yet")
		}
		return n.ReceiveSnapshot(ctx, env, image)
	}, append([]rpc.ServeOption{rpc.WithKV(kvRef), rpc.WithGeography(r.geo), rpc.WithClock(clock.PhysicalNow), rpc.WithFaults(r.faults), rpc.WithCreds(s.rpcCreds), r.distsql.ServeOption(), rpc.WithMethod(methodCatalogRevoke, s.handleCatalogRevoke), rpc.WithMethod(methodSideClosed, s.handleSideClosed)}, svc.ServeOptions()...)...)
	registry := membership.NewRegistry()
	id, peers, err := s.identify(ctx, registry)
	if err != nil {
		return err
	}
	r.id, r.registry = id, registry
	r.geo.SetSelf(id)
	// unique_rowid's node bits (its low 10) are this node's ID, not the
	// process's random ones: two nodes of a cluster of up to 1024 can then
	// never hand out the same value, where random bits clashed for one
	// pair in 1,024 (an INSERT's generated key then failed with 23505).
	// Nodes sharing a process (testcluster) share one generator, which
	// keeps its values apart by itself.
	builtins.SetUniqueRowIDNode(uint32(id))
	r.transport = rpc.NewTransport(rpc.TransportConfig{Resolve: registry.Resolve, Logger: s.log, Geo: r.geo, Faults: r.faults, Creds: s.rpcCreds})
	var st atomic.Pointer[store.Store]
	r.raft = raftnode.NewNode(raftnode.Config{
		NodeID:   id,
		Version:  s.version,
		Sideload: SideloadEnabled(),
		// Snapshots too large for a raft message stream as SSTs;
		// messages (several to a frame) stay well under the limit.
		SendSnapshot:        r.transport.SendSnapshot,
		InlineSnapshotLimit: min(1<<20, rpc.MaxBatchSize/8),
		MaxSizePerMsg:       uint64(min(1<<20, rpc.MaxBatchSize/8)),
		OnUnknownTablet: func(t uint64) {
			if p := st.Load(); p != nil {
				p.CreateReplica(kvpb.TabletID(t))
			}
		},
		OnRemoved: func(t uint64) {
			if p := st.Load(); p != nil {
				if err := p.RemoveReplica(kvpb.TabletID(t)); err != nil {
					s.log.Error("cairn: removing a replica", "tablet", t, "err", err)
				}
			}
		},
	}, s.eng, r.transport)
	ls := &kv.LateSender{}
	if s.store, err = store.Open(ctx, s.eng, clock, s.gcConfig(s.splitConfig(store.Config{Sender: ls, Observe: s.obs.tabletObservers(), Version: s.version, RowCacheBytes: s.cfg.RowCacheSize, Raft: &store.RaftConfig{Node: r.raft, Peers: peers, Membership: true, LeaseEligible: r.spreadEligible, Place: r.place, MoveReplica: r.moveReplica}, Load: r.load}))); err != nil {
		return fmt.Errorf("opening tablets: %w", err)
	}
	st.Store(s.store)
	r.zones = &zones{st: s.store}
	r.member = membership.New(membership.Config{
		Self:              membership.NodeRecord{NodeID: id, RPCAddr: cfg.RPCAddr, Locality: cfg.Locality, StoreProfile: s.cfg.StoreProfile},
		InitialMembers:    len(peers),
		Engine:            s.eng,
		Clock:             clock,
		Raft:              r.raft,
		Store:             s.store,
		Registry:          registry,
		Creds:             s.rpcCreds,
		ReplicationFactor: cfg.ReplicationFactor,
		ZoneReplicas:      r.zones.replicas,
		Domain:            r.zones.domain,
		DeadAfter:         cfg.DeadAfter,
		LivenessTTL:       cfg.LivenessTTL,
		ScanInterval:      cfg.ReplicateInterval,
		Version:           s.version,
		Logger:            s.log,
		BeforeAdmit:       s.shareCatalog,
	})
	r.senders = rpc.NewNodeSenders(r.transport, id, s.store)
	lh := kv.NewLeaseholderSender(kv.LeaseholderConfig{
		LocalNode: id,
		Node:      r.senders.Sender,
		Replicas: func(t kvpb.TabletID) []uint64 {
			return slices.Clone(r.raft.Config(uint64(t)).GetVoters())
		},
		AllNodes:      registry.IDs,
		FollowerReads: followerReads(s.store),
	})
	r.pinger = rpc.NewClockPinger(registry.Resolve)
	r.pinger.Faults = r.faults
	r.pinger.Creds = s.rpcCreds
	r.clock = clockmon.New(clockmon.Config{
		NodeID: id, Clock: clock, Peers: r.member.ClockPeers, Pinger: r.pinger,
		Fence:   func(err error) { r.raft.Fence("clock", err) },
		Unfence: func() { r.raft.Unfence("clock") },
		Logger:  s.log,
		// A peer unreached this long is presumed dead by the clock check
		// (clockmon's package comment), so the survivor of a two-node
		// cluster serves again.
		DeadAfter: cmp.Or(cfg.DeadAfter, 60*time.Second),
	})
	dbOpts := cfg.DB
	dbOpts.NodeID = id // the gateway observes its own clock (kv.Options.NodeID)
	dbOpts.Leaseholder = lh.Leaseholder
	dbOpts.Servable = servable(s.store)
	s.db = kv.NewDB(s.obs.timed(clockmon.Guard(lh, r.clock)), r.member, clock, dbOpts)
	ls.Set(s.db)
	distKV.Set(s.db)
	r.distsql.SetNode(id)
	gw := distsql.NewGateway(registry.Resolve, s.rpcCreds.DialOptions()...)
	gw.SetNode(id)
	r.dist = &distsql.Runner{
		Planner:   &distsql.Planner{Gateway: id, Tablets: s.db.TabletCache(), Leaseholder: lh.Leaseholder, Avoid: gw.Suspect, Local: globalFollowerReads(s.store)},
		Gateway:   gw,
		MaxOffset: clusterMaxOffset,
	}
	kvRef.p.Store(s.store)
	r.closedStore.Store(s.store)
	raftRef.Store(r.raft)
	svc.Set(r.member)
	runCtx, cancel := context.WithCancel(context.Background())
	r.stopRun, r.runDone, r.monDone = cancel, make(chan error, 1), make(chan struct{})
	go func() {
		err := r.raft.Run(runCtx, raftTick)
		if err != nil {
			// The engine failed (a full or broken disk): the node is
			// fenced and steps no more raft messages; it stops.
			s.log.Error("cairn: raft scheduler stopped; the node stops serving and must be restarted on a healthy disk", "err", err)
			s.fail(err)
		}
		r.runDone <- err
	}()
	go func() { defer close(r.monDone); r.clock.Run(runCtx) }()
	r.zones.start(s)
	r.startCloser(s)
	r.startLeaseBalancer(cfg, s.log)
	s.log.Info("cairn: replicating", "node", id, "join", cfg.Join)
	return nil
}

// startMembership checks the cluster ID, registers the node with its
// addresses and starts heartbeats and the replicate queue.
func (s *Server) startMembership(ctx context.Context) error {
	if s.repl == nil {
		return nil
	}
	s.repl.member.SetAddrs(s.Addr().String(), s.HTTPAddr().String())
	// A node restarting while the cluster still moves the leases its
	// failure left behind can get an ambiguous or unavailable answer (seen
	// as an RPC EOF from a peer in TestClusterProcesses). Every step of
	// Start is idempotent (it re-reads what it writes), so it is retried
	// rather than the process exiting; a refusal or another cluster's
	// store is final.
	deadline := time.Now().Add(membershipStartTimeout)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := startMember(ctx, s.repl.member, s.db)
		if err == nil {
			break
		}
		if errors.Is(err, membership.ErrOtherCluster) || errors.Is(err, membership.ErrRefused) || time.Now().After(deadline) {
			return fmt.Errorf("joining the cluster's membership: %w", err)
		}
		s.log.Warn("cairn: joining the cluster's membership failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("joining the cluster's membership: %w", err)
		case <-time.After(backoff):
		}
	}
	s.SetNodeSource(membershipNodes{s})
	return nil
}

// startMember is membership.Member.Start, a seam for tests.
var startMember = func(ctx context.Context, m *membership.Member, db *kv.DB) error { return m.Start(ctx, db) }

// membershipStartTimeout bounds how long a starting node retries joining
// the membership before it gives up.
const membershipStartTimeout = time.Minute

// raftTick is the raft tick of a clustered node: elections after 10–20
// ticks without a leader.
const raftTick = 50 * time.Millisecond

// stop ends the RPC server and the raft scheduler (the store is closed
// before, the engine after).
func (r *replication) stopServing() {
	if r.stopCloser != nil {
		r.stopCloser()
	}
	if r.zones != nil {
		r.zones.close()
	}
	if r.member != nil {
		r.member.Stop()
	}
	r.rpc.Stop()
}

// lateStore is the KV service's store, set once it is open; before, every
// batch is a routing error (the sender tries another node).
type lateStore struct{ p atomic.Pointer[store.Store] }

func (l *lateStore) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	st := l.p.Load()
	if st == nil {
		return nil, &kvpb.TabletNotFoundError{TabletID: ba.TabletID}
	}
	return st.Send(ctx, ba)
}

func (r *replication) stop() error {
	if r.stopBalancer != nil {
		r.stopBalancer()
	}

	r.stopRun()
	err := <-r.runDone
	<-r.monDone
	r.pinger.Close()
	r.transport.Close()
	r.senders.Close()
	if r.dist != nil {
		r.dist.Gateway.Close()
	}
	return err
}

// SideloadEnabled reports whether the node keeps the SSTs of index builds
// and bulk COPYs in files beside its raft log (raftnode.Config.Sideload):
// on unless the environment sets CAIRN_RAFT_SIDELOAD=off. The tenth
// session left it off after a distributed table's index build measured
// twice as slow with it; the eleventh found the same LSM before the build
// either way and the same CPU, the wall times following the machine's
// load in both orders (bench/README.md, "Issue 18, eleventh session").
// A node that ran with it reads its side-loaded entries either way, and
// writes them only once the cluster version is 1.2.
func SideloadEnabled() bool { return os.Getenv("CAIRN_RAFT_SIDELOAD") != "off" }
