package membership

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config configures a node's membership.
type Config struct {
	// Self is this node's record; Self.NodeID is its node ID.
	Self NodeRecord
	// InitialMembers is, on an initial member, how many there are (the
	// first bootstrap records it; allocated node IDs come after); 0 on a
	// node that joined.
	InitialMembers int
	Engine         *storage.Engine
	Clock          *hlc.Clock
	Raft           *raftnode.Node
	Store          *store.Store
	Registry       *Registry
	// Creds are the node's RPC transport credentials (rpc.Creds; nil:
	// plaintext), for the membership calls it makes to other nodes.
	Creds *rpc.Creds
	// ReplicationFactor is the number of voters each tablet aims for
	// (default 3); a tablet has fewer while fewer nodes are live.
	ReplicationFactor int
	// Domain, if set, names the domain of tablet id: the set of tablets
	// (one index's, such as a hash-sharded index's buckets) whose
	// replicas the replicate queue spreads over the nodes among
	// themselves before it looks at each node's total ("": none). The
	// lease balancer balances leases by the same domains.
	Domain func(tablet uint64) string
	// ZoneReplicas, if set, returns the number of voters tablet id's zone
	// asks for (ALTER ... CONFIGURE ZONE USING num_replicas; package
	// zone), 0 when it sets none and ReplicationFactor applies, or
	// EveryNode for a voter on every eligible node.
	ZoneReplicas func(tablet uint64) int
	// DeadAfter is how long after its last heartbeat a node is declared
	// dead and its replicas replaced (default 60s).
	DeadAfter time.Duration
	// LivenessTTL is how long a heartbeat keeps its node live (default
	// 9s); nodes heartbeat every third of it.
	LivenessTTL time.Duration
	// ScanInterval is how often the replicate queue looks at the tablets
	// this node leads (default 1s).
	ScanInterval time.Duration
	// LearnerTimeout is how long a learner may take to catch up before it
	// is removed and another node tried (default 60s).
	LearnerTimeout time.Duration
	// Version is the node's view of the versions (nil: this build's
	// binary, starting at the oldest cluster version it runs in).
	Version *clusterversion.Handle
	Logger  *slog.Logger
	// BeforeAdmit, if set, runs before the node admits a joining node
	// (handleJoin, past its refusals); an error answers the joiner
	// Unavailable, and it retries. The server stops its node-local
	// catalog generation here: a cluster of one must stop answering
	// statements from memory before a second SQL gateway exists
	// (sql/catalog's localgen.go).
	BeforeAdmit func(ctx context.Context) error
}

func (c *Config) setDefaults() {
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 3
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = 60 * time.Second
	}
	if c.LivenessTTL == 0 {
		c.LivenessTTL = min(9*time.Second, c.DeadAfter/2)
	}
	if c.ScanInterval == 0 {
		c.ScanInterval = time.Second
	}
	if c.LearnerTimeout == 0 {
		c.LearnerTimeout = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Version == nil {
		c.Version = clusterversion.NewHandle(clusterversion.Version{}, clusterversion.Version{})
	}
}

// Member is one node's part in the cluster's membership.
type Member struct {
	cfg Config
	db  *kv.DB

	mu        sync.Mutex
	clusterID string
	epoch     int64
	// learners remembers when the queue first saw each learner
	// ({tablet, node}), to give up on one that never catches up, and
	// when a scan last saw it (forgetMoves drops the ones no scan sees).
	learners map[[2]uint64]learnerSeen
	// considered holds, per tablet, the rebalancing move its scans have
	// found worth making without a break (queue.go's seenLongEnough);
	// movingFrom, per tablet, the voter the move this node started takes
	// the replica from (rule 5 removes that one).
	considered map[uint64]consideredMove
	movingFrom map[uint64]startedMove
	// scans counts the replicate queue's completed scans (Scans).
	scans atomic.Uint64
	// nextRebalance is when this node may start its next rebalancing
	// move (queue.go's rebalance).
	nextRebalance time.Time
	// dead are the nodes the last View found dead (ClockPeers).
	dead map[uint64]bool
	// reports are the live nodes' liveness records as the last View
	// read them (ReportedLeases).
	reports map[uint64]LivenessRecord
	// placeView is the View Place last read, at placeViewAt.
	placeView   *View
	placeViewAt time.Time
	// testingHolds, when set, answers holdsReplica instead of the node
	// asked.
	testingHolds func(node, tablet uint64) bool

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New returns a node's membership; Start begins its work.
func New(cfg Config) *Member {
	cfg.setDefaults()
	if cfg.Self.Status == "" {
		cfg.Self.Status = StatusActive
	}
	cfg.Self = cfg.Self.WithVersion(cfg.Version)
	cfg.Registry.Set(cfg.Self)
	id, _, _ := ReadIdentity(cfg.Engine)
	return &Member{cfg: cfg, clusterID: id.ClusterID, learners: map[[2]uint64]learnerSeen{},
		considered: map[uint64]consideredMove{}, movingFrom: map[uint64]startedMove{}}
}

// NodeID is this node's ID.
func (m *Member) NodeID() uint64 { return m.cfg.Self.NodeID }

// ClusterID is the cluster's ID ("" until known).
func (m *Member) ClusterID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clusterID
}

// SetAddrs records the node's SQL and HTTP addresses once it listens (the
// node table shows them; Start writes them).
func (m *Member) SetAddrs(sql, http string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg.Self.SQLAddr, m.cfg.Self.HTTPAddr = sql, http
}

// Start establishes or checks the cluster ID, registers the node in the
// node table, heartbeats once, and starts the heartbeat and replicate
// queue loops. db must be able to reach every tablet.
func (m *Member) Start(ctx context.Context, db *kv.DB) error {
	m.db = db
	if err := m.checkClusterID(ctx); err != nil {
		return err
	}
	if err := m.checkVersion(ctx); err != nil {
		return err
	}
	if err := m.register(ctx); err != nil {
		return err
	}
	if l, ok, err := m.readLiveness(ctx, m.NodeID()); err != nil {
		return err
	} else if ok {
		m.epoch = l.Epoch
	}
	m.epoch++
	if err := m.heartbeat(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	m.wg.Add(4)
	go m.loop(runCtx, m.cfg.LivenessTTL/3, func(ctx context.Context) error { return m.heartbeat(ctx) })
	go m.loop(runCtx, m.cfg.LivenessTTL, m.RefreshVersion)
	go m.loop(runCtx, m.cfg.ScanInterval, m.scan)
	go m.loop(runCtx, m.gcInterval(), func(ctx context.Context) error { m.gcReplicas(ctx); return nil })
	return nil
}

// Stop ends the loops (before the KV client and store close).
func (m *Member) Stop() {
	if m.stop != nil {
		m.stop()
		m.wg.Wait()
		m.stop = nil
	}
}

func (m *Member) loop(ctx context.Context, every time.Duration, f func(context.Context) error) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := f(cctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Debug("membership", "node", m.NodeID(), "err", err)
		}
		cancel()
	}
}

func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkClusterID makes the replicated cluster ID exist (the initial
// members' bootstrap chooses it) and refuses a store recorded for another.
func (m *Member) checkClusterID(ctx context.Context) error {
	var cid string
	err := m.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		v, ok, err := txn.Get(ctx, keys.ClusterID)
		if err != nil {
			return err
		}
		if ok {
			cid = string(v)
			return nil
		}
		if m.cfg.InitialMembers == 0 {
			return errors.New("membership: the cluster has no ID (a node that joined cannot choose it)")
		}
		cid = m.ClusterID()
		if cid == "" {
			cid = newClusterID()
		}
		if err := txn.Put(ctx, keys.ClusterID, []byte(cid)); err != nil {
			return err
		}
		// A new cluster starts at its first nodes' binary version.
		if err := txn.Put(ctx, clusterversion.Key(), []byte(m.cfg.Version.Binary().String())); err != nil {
			return err
		}
		return txn.Put(ctx, keys.InitialMembers, []byte(fmt.Sprint(m.cfg.InitialMembers)))
	})
	if err != nil {
		return fmt.Errorf("membership: establishing the cluster ID: %w", err)
	}
	local := m.ClusterID()
	if local != "" && local != cid {
		return fmt.Errorf("%w: the store is of cluster %s, the nodes it reaches are cluster %s", ErrOtherCluster, local, cid)
	}
	if local == "" {
		if err := WriteIdentity(m.cfg.Engine, Identity{ClusterID: cid}, false); err != nil {
			return err
		}
		m.mu.Lock()
		m.clusterID = cid
		m.mu.Unlock()
	}
	return nil
}

// register writes this node's record, keeping a status set by others (a
// decommissioned node is refused).
func (m *Member) register(ctx context.Context) error {
	m.mu.Lock()
	self := m.cfg.Self
	m.mu.Unlock()
	return m.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		v, ok, err := txn.Get(ctx, keys.NodeRecord(self.NodeID))
		if err != nil {
			return err
		}
		if ok {
			old, err := decodeRecord[NodeRecord](v)
			if err != nil {
				return err
			}
			if old.Status == StatusDecommissioned {
				return fmt.Errorf("%w: node %d was decommissioned", ErrRefused, self.NodeID)
			}
			self.Status = old.Status
		}
		return txn.Put(ctx, keys.NodeRecord(self.NodeID), encodeRecord(self))
	})
}

// heartbeat extends this node's liveness record and reports its replica
// and leader counts.
func (m *Member) heartbeat(ctx context.Context) error {
	now := m.cfg.Clock.Now().WallTime
	l := LivenessRecord{NodeID: m.NodeID(), Epoch: m.epoch, Updated: now, Expiration: now + int64(m.cfg.LivenessTTL), Members: map[uint64]int{}}
	tablets := m.cfg.Raft.Tablets()
	held := map[string]int{}
	for _, id := range tablets {
		if d := m.domainOf(id); d != "" {
			held[d]++
		}
	}
	for _, id := range tablets {
		l.Replicas++
		rep := m.cfg.Raft.Replica(id)
		if rep == nil {
			continue
		}
		if term, _ := rep.Lease(); term == 0 {
			continue
		}
		l.Leaders++
		cs := m.cfg.Raft.Config(id)
		d := m.domainOf(id)
		if held[d] < 2 {
			d = ""
		}
		for _, n := range append(slices.Clone(cs.GetVoters()), cs.GetLearners()...) {
			l.Members[n]++
			if d != "" {
				if l.Domains == nil {
					l.Domains = map[string]map[uint64]int{}
				}
				if l.Domains[d] == nil {
					l.Domains[d] = map[uint64]int{}
				}
				l.Domains[d][n]++
			}
		}
	}
	return m.db.Put(ctx, keys.Liveness(m.NodeID()), encodeRecord(l))
}

// domainOf is Config.Domain's answer for tablet id ("" without one).
// Not cached: a split changes a tablet's domain (a new table's buckets
// are split off tablets that held none), and counts reported from a
// cache lagging it set off moves that the corrected counts undid.
func (m *Member) domainOf(id uint64) string {
	if m.cfg.Domain == nil {
		return ""
	}
	return m.cfg.Domain(id)
}

func (m *Member) readLiveness(ctx context.Context, id uint64) (LivenessRecord, bool, error) {
	v, ok, err := m.db.Get(ctx, keys.Liveness(id))
	if err != nil || !ok {
		return LivenessRecord{}, false, err
	}
	l, err := decodeRecord[LivenessRecord](v)
	return l, err == nil, err
}

// View reads the node table and liveness records, and refreshes the
// registry from them.
func (m *Member) View(ctx context.Context) (*View, error) {
	lo, hi := keys.NodeRecordSpan()
	rows, err := m.db.Scan(ctx, lo, hi, 0)
	if err != nil {
		return nil, fmt.Errorf("membership: reading the node table: %w", err)
	}
	v := &View{Now: time.Unix(0, m.cfg.Clock.Now().WallTime), Nodes: map[uint64]NodeRecord{}, Liveness: map[uint64]LivenessRecord{}, DeadAfter: m.cfg.DeadAfter}
	var recs []NodeRecord
	for _, r := range rows {
		rec, err := decodeRecord[NodeRecord](r.Value)
		if err != nil {
			return nil, err
		}
		v.Nodes[rec.NodeID] = rec
		recs = append(recs, rec)
	}
	lo, hi = keys.LivenessSpan()
	if rows, err = m.db.Scan(ctx, lo, hi, 0); err != nil {
		return nil, fmt.Errorf("membership: reading liveness: %w", err)
	}
	for _, r := range rows {
		l, err := decodeRecord[LivenessRecord](r.Value)
		if err != nil {
			return nil, err
		}
		v.Liveness[l.NodeID] = l
	}
	changed := false
	for _, rec := range recs {
		if old, ok := m.cfg.Registry.Get(rec.NodeID); !ok || old != rec {
			changed = true
			m.cfg.Registry.Set(rec)
		}
	}
	if changed {
		_ = cacheNodes(m.cfg.Engine, m.cfg.Registry.Nodes())
	}
	dead := map[uint64]bool{}
	for id := range v.Nodes {
		if v.State(id) == Dead {
			dead[id] = true
		}
	}
	reports := map[uint64]LivenessRecord{}
	for id, l := range v.Liveness {
		if v.State(id) == Live {
			reports[id] = l
		}
	}
	m.mu.Lock()
	m.dead = dead
	m.reports = reports
	m.mu.Unlock()
	return v, nil
}

// ReportedLeases is node id's lease count as its liveness record, when
// the last View read it live, reports it, and when it was written (id's
// clock): all its leases (domain ""), or
// those of domain's tablets (0 when it holds fewer than two replicas of
// the domain: the record leaves such domains out). ok false without a
// live record. A record is up to a heartbeat old. The lease balancer
// compares counts by it (store.LeaseBalancerConfig.Reported): a node
// sees another's leases only over the tablets it holds a replica of.
func (m *Member) ReportedLeases(id uint64, domain string) (n int, at time.Time, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.reports[id]
	if !ok {
		return 0, time.Time{}, false
	}
	at = time.Unix(0, l.Updated)
	if domain == "" {
		return l.Leaders, at, true
	}
	// The record counts, per domain, the replicas of the groups the node
	// leads: its own entry is the groups it leads.
	return l.Domains[domain][id], at, true
}

// ReportingNodes are the nodes whose liveness records the last View read
// live (those ReportedLeases answers for), in ID order.
func (m *Member) ReportingNodes() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.reports))
}

// LeadsWith reports whether node id's liveness record, as the last View
// read it live, says it leads a tablet of domain ("": any tablet) that
// peer holds a replica of: id could hand peer one of the domain's leases
// itself (store.LeaseBalancerConfig.LeadsWith). Like the counts, up to a
// heartbeat old.
func (m *Member) LeadsWith(id, peer uint64, domain string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.reports[id]
	if !ok || id == peer {
		return false
	}
	if domain == "" {
		return l.Members[peer] > 0
	}
	return l.Domains[domain][peer] > 0
}

// OnlyNode reports whether the node table, read through db, names no node
// but self (an empty table, before the first node registers, counts).
func OnlyNode(ctx context.Context, db *kv.DB, self uint64) (bool, error) {
	lo, hi := keys.NodeRecordSpan()
	rows, err := db.Scan(ctx, lo, hi, 0)
	if err != nil {
		return false, fmt.Errorf("membership: reading the node table: %w", err)
	}
	for _, r := range rows {
		rec, err := decode[NodeRecord](r.Value)
		if err != nil {
			return false, err
		}
		if rec.NodeID != self {
			return false, nil
		}
	}
	return true, nil
}

// ClockPeers lists the nodes this node's clock is checked against
// (clockmon): those not decommissioned, less those the last View found
// dead. A dead node has no fresh measurement and would count against
// the majority; without this, the IDs of nodes replaced long ago (a
// wiped node rejoins under a new ID) would pile up until every node
// fenced itself.
func (m *Member) ClockPeers() []uint64 {
	ids := m.cfg.Registry.IDs()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := ids[:0]
	for _, id := range ids {
		if !m.dead[id] {
			out = append(out, id)
		}
	}
	return out
}

// SetStatus changes node id's status in the node table (decommissioning
// moves its replicas off; decommissioned excludes it for good).
func (m *Member) SetStatus(ctx context.Context, id uint64, st string) error {
	return m.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		v, ok, err := txn.Get(ctx, keys.NodeRecord(id))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("membership: no node %d", id)
		}
		rec, err := decodeRecord[NodeRecord](v)
		if err != nil {
			return err
		}
		if rec.Status == StatusDecommissioned && st != StatusDecommissioned {
			return fmt.Errorf("membership: node %d is decommissioned", id)
		}
		rec.Status = st
		return txn.Put(ctx, keys.NodeRecord(id), encodeRecord(rec))
	})
}

// handleJoin admits a node (JoinRequest).
func (m *Member) handleJoin(ctx context.Context, in []byte) ([]byte, error) {
	req, err := decode[JoinRequest](in)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cid := m.ClusterID()
	if cid == "" || m.db == nil {
		return nil, status.Error(codes.Unavailable, "this node is not yet part of a running cluster")
	}
	if req.ClusterID != "" && req.ClusterID != cid {
		return nil, refuse("the store belongs to cluster %s, and the node at %s is in cluster %s", req.ClusterID, m.cfg.Self.RPCAddr, cid)
	}
	if err := m.checkJoiner(ctx, req.Node); err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if m.cfg.BeforeAdmit != nil {
		if err := m.cfg.BeforeAdmit(ctx); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
	}
	rec := req.Node
	rec.Status = StatusActive
	resp := JoinResponse{ClusterID: cid}
	switch {
	case req.NodeID != 0:
		v, ok, err := m.db.Get(ctx, keys.NodeRecord(req.NodeID))
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if !ok && req.NodeID > uint64(m.initialMembers(ctx)) {
			return nil, refuse("node %d is not a member of cluster %s", req.NodeID, cid)
		}
		if ok {
			old, err := decodeRecord[NodeRecord](v)
			if err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			if old.Status == StatusDecommissioned {
				return nil, refuse("node %d was decommissioned", req.NodeID)
			}
		}
		resp.NodeID = req.NodeID
	case req.InitialMember != 0 && req.InitialMember <= uint64(m.initialMembers(ctx)):
		_, ok, err := m.db.Get(ctx, keys.NodeRecord(req.InitialMember))
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if !ok {
			// Late to the first start: it is that initial member.
			resp.NodeID = req.InitialMember
			break
		}
		fallthrough
	default:
		id, err := m.allocateNodeID(ctx)
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		rec.NodeID = id
		if err := m.db.Put(ctx, keys.NodeRecord(id), encodeRecord(rec)); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		m.cfg.Registry.Set(rec)
		resp.NodeID = id
	}
	v, err := m.View(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	for _, r := range v.Nodes {
		resp.Nodes = append(resp.Nodes, r)
	}
	return encode(resp), nil
}

func (m *Member) initialMembers(ctx context.Context) int {
	v, ok, err := m.db.Get(ctx, keys.InitialMembers)
	if err != nil || !ok {
		return 0
	}
	var n int
	_, _ = fmt.Sscan(string(v), &n)
	return n
}

// allocateNodeID takes the next node ID from the replicated counter, past
// the initial members and every ID in the node table.
func (m *Member) allocateNodeID(ctx context.Context) (uint64, error) {
	floor := int64(m.initialMembers(ctx))
	lo, hi := keys.NodeRecordSpan()
	rows, err := m.db.Scan(ctx, lo, hi, 0)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		if rec, err := decodeRecord[NodeRecord](r.Value); err == nil {
			floor = max(floor, int64(rec.NodeID))
		}
	}
	v, err := m.db.Inc(ctx, keys.NodeIDCounter, 1)
	if err != nil {
		return 0, fmt.Errorf("membership: allocating a node ID: %w", err)
	}
	if v <= floor {
		// Concurrent allocations each move the counter by their own gap:
		// every result is past floor and distinct.
		if v, err = m.db.Inc(ctx, keys.NodeIDCounter, floor-v+1); err != nil {
			return 0, fmt.Errorf("membership: allocating a node ID: %w", err)
		}
	}
	return uint64(v), nil
}

// handleLookup answers where the tablet holding a key is, from this
// node's own replicas (lookupRequest).
func (m *Member) handleLookup(ctx context.Context, in []byte) ([]byte, error) {
	req, err := decode[lookupRequest](in)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	d, ok := m.cfg.Store.LocalTablet(req.Key, req.Reverse)
	return encode(lookupResponse{Found: ok, Desc: d}), nil
}

type lookupRequest struct {
	Key     []byte `json:"key"`
	Reverse bool   `json:"reverse,omitempty"`
}

type lookupResponse struct {
	Found bool                  `json:"found"`
	Desc  kvpb.TabletDescriptor `json:"desc"`
}

// LookupTablet implements kv.TabletLookup for a node that may not hold
// every tablet: its own replicas first, then the other nodes' (a
// directory lists only what this node's replicas wrote), and the local
// directory last.
func (m *Member) LookupTablet(ctx context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error) {
	if !keys.IsAddressable(key) && !(reverse && bytes.Equal(key, keys.Max)) {
		return m.cfg.Store.LookupTablet(ctx, key, reverse)
	}
	if d, ok := m.cfg.Store.LocalTablet(key, reverse); ok {
		return d, nil
	}
	req := encode(lookupRequest{Key: key, Reverse: reverse})
	for _, rec := range m.cfg.Registry.Nodes() {
		if rec.NodeID == m.NodeID() || rec.Status == StatusDecommissioned {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		out, err := rpc.Call(cctx, m.cfg.Creds, rec.RPCAddr, methodLookup, req)
		cancel()
		if err != nil {
			continue
		}
		resp, err := decode[lookupResponse](out)
		if err == nil && resp.Found {
			return resp.Desc, nil
		}
	}
	return m.cfg.Store.LookupTablet(ctx, key, reverse)
}
