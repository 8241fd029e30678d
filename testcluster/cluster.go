package testcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/clockmon"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cairn-db/cairn/store"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ClusterOptions configure a replicated cluster.
type ClusterOptions struct {
	// Nodes is the number of nodes (default 3); every tablet has a replica
	// on each (replication factor = Nodes).
	Nodes int
	// Tick is the raft tick (default 10ms); elections take 10–20 ticks.
	Tick time.Duration
	// MaxOffset is every clock's maximum offset (default 50ms).
	MaxOffset time.Duration
	// LogKeep is raftnode.Config.LogKeep (0: its default): how many
	// applied entries a log keeps for lagging followers.
	LogKeep uint64
	// Store and DB pass through to store.Open and kv.NewDB.
	Store store.Config
	DB    kv.Options
	// Geo, when set, gives the nodes localities, a latency map and lease
	// preferences (geo.go).
	Geo *GeoOptions
	// ClockOffsets skews nodes' physical clocks (node ID → offset; see
	// ClusterNode.SetClockOffset) from their first start.
	ClockOffsets map[uint64]time.Duration
	// ClockInterval is how often each node measures its clock offset
	// from the others (clockmon; default 100ms).
	ClockInterval time.Duration
	// InlineSnapshotLimit is raftnode.Config.InlineSnapshotLimit: images
	// larger than it stream as SSTs (0: the smaller of 1 MiB and an eighth
	// of rpc.MaxBatchSize).
	InlineSnapshotLimit int
	// AfterIngest is raftnode.Config.TestingAfterIngest, told the node.
	AfterIngest func(node, tabletID, index uint64) error
	// LeaseBalancer, when set, runs a store.LeaseBalancer with it on every
	// node (its Node and Region filled in per node): the default
	// placement of cairn start, leases balanced by count, unless its
	// Prefs or ZonePrefs say otherwise. Geo's Leases, when set, win.
	LeaseBalancer *store.LeaseBalancerConfig
	// SplitQueue runs every node's split queue (store.RunSplitQueue, with
	// Store's thresholds).
	SplitQueue bool
	// KVFilter, when set, sees every batch a node's KV server receives
	// from another node before its store does, under the request's
	// context; a batch it fails gets its error instead. Tests hold
	// batches back with it.
	KVFilter func(ctx context.Context, node uint64, ba *kvpb.BatchRequest) error
}

// filteredKV is a node's store as its KV server sees it with
// ClusterOptions.KVFilter.
type filteredKV struct {
	node   uint64
	filter func(ctx context.Context, node uint64, ba *kvpb.BatchRequest) error
	st     kvpb.Sender
}

func (f filteredKV) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if err := f.filter(ctx, f.node, ba); err != nil {
		return nil, err
	}
	return f.st.Send(ctx, ba)
}

// Cluster is several nodes replicating every tablet over gRPC on
// loopback. Each node keeps its in-memory filesystem and RPC address
// across Stop and Restart, as a process restarted on the same disk would.
type Cluster struct {
	tb    testing.TB
	opts  ClusterOptions
	Nodes []*ClusterNode

	mu    sync.Mutex
	addrs map[uint64]string
	// cut holds the directed pairs {from, to} whose raft messages are
	// dropped (Partition).
	cut map[[2]uint64]bool
	// blocked holds the {tablet, to} pairs whose raft messages are
	// dropped (BlockTablet).
	blocked map[[2]uint64]bool
	// slowEntries delays the appends carrying entries of a tablet
	// (DelayEntries).
	slowEntries map[uint64]time.Duration
	// crashed holds the nodes Crash took the disk image of and has not
	// yet stopped: nothing they send leaves (a dead process tells no one
	// of what it did after its disk was taken).
	crashed map[uint64]bool
}

// BlockTablet drops every raft message of tablet's group to node to
// until UnblockTablet.
func (c *Cluster) BlockTablet(tablet kvpb.TabletID, to uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocked[[2]uint64{uint64(tablet), to}] = true
}

// UnblockTablet ends BlockTablet(tablet, to).
func (c *Cluster) UnblockTablet(tablet kvpb.TabletID, to uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.blocked, [2]uint64{uint64(tablet), to})
}

// DelayEntries holds every raft append that carries entries of tablet's
// group for d before sending it (0: no more); heartbeats and every other
// message go at once, so leadership and the read lease hold while the
// log crawls: large entries on a loaded machine or a slow link.
func (c *Cluster) DelayEntries(tablet kvpb.TabletID, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slowEntries == nil {
		c.slowEntries = map[uint64]time.Duration{}
	}
	if d == 0 {
		delete(c.slowEntries, uint64(tablet))
	} else {
		c.slowEntries[uint64(tablet)] = d
	}
}

// Partition drops every raft message between node id and the others,
// both ways, until Heal. KV RPCs still flow: a partitioned leaseholder
// must refuse them itself.
func (c *Cluster) Partition(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if n.ID != id {
			c.cut[[2]uint64{id, n.ID}] = true
			c.cut[[2]uint64{n.ID, id}] = true
		}
	}
}

// Heal ends every partition.
func (c *Cluster) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.cut)
}

// filterTransport drops the raft messages of cut pairs.
type filterTransport struct {
	c    *Cluster
	from uint64
	t    *rpc.Transport
}

func (f filterTransport) Send(envs []raftnode.Envelope) {
	f.c.mu.Lock()
	kept := envs[:0:0]
	for _, e := range envs {
		if f.c.crashed[f.from] || f.c.cut[[2]uint64{f.from, e.Msg.GetTo()}] || f.c.blocked[[2]uint64{e.TabletID, e.Msg.GetTo()}] {
			continue
		}
		if d := f.c.slowEntries[e.TabletID]; d > 0 && e.Msg.GetType() == pb.MessageType_MsgApp && len(e.Msg.GetEntries()) > 0 {
			time.AfterFunc(d, func() { f.t.Send([]raftnode.Envelope{e}) })
			continue
		}
		kept = append(kept, e)
	}
	f.c.mu.Unlock()
	if len(kept) > 0 {
		f.t.Send(kept)
	}
}

// SendSnapshot streams a snapshot unless its pair or tablet is cut off,
// as Send drops their messages.
func (f filterTransport) SendSnapshot(ctx context.Context, to uint64, env raftnode.Envelope, image io.Reader) error {
	f.c.mu.Lock()
	cut := f.c.crashed[f.from] || f.c.cut[[2]uint64{f.from, to}] || f.c.blocked[[2]uint64{env.TabletID, to}]
	f.c.mu.Unlock()
	if cut {
		return fmt.Errorf("testcluster: snapshot of tablet %d to node %d cut off", env.TabletID, to)
	}
	return f.t.SendSnapshot(ctx, to, env, image)
}

// ClusterNode is one member: a store whose tablets are raft groups, the
// node's raft scheduler, its RPC server (raft and KV) and a KV client
// that can reach every tablet's leaseholder from here.
type ClusterNode struct {
	c  *Cluster
	ID uint64
	fs *vfs.MemFS
	// disk wraps fs for every start, so that faults can be injected
	// (InjectDiskError).
	disk  *simfs.FS
	Clock *hlc.Clock
	// ClockMonitor measures this node's clock against the others' and
	// fences the node when it disagrees with a majority (clockmon).
	ClockMonitor *clockmon.Monitor
	Engine       *storage.Engine
	Raft         *raftnode.Node
	Store        *store.Store
	DB           *kv.DB
	// Leaseholders routes this node's sub-batches to other nodes.
	Leaseholders *kv.LeaseholderSender
	// Geo is the node's geography (nil without ClusterOptions.Geo).
	Geo *rpc.Geography
	// Load counts the requests its tablets serve by gateway (nil unless
	// GeoOptions.FollowLoad).
	Load *store.RequestLoad
	// Balancer is the node's lease balancer since its last start (nil
	// when it runs none).
	Balancer *store.LeaseBalancer

	stopBalancer func()
	stopSplits   func()

	transport *rpc.Transport
	server    *rpc.Server
	senders   *rpc.NodeSenders
	pinger    *rpc.ClockPinger
	stopRun   context.CancelFunc
	runDone   chan error
	monDone   chan struct{}
	running   atomic.Bool
	// clockOffset is the skew of this node's physical clock, kept
	// across restarts (nanoseconds).
	clockOffset atomic.Int64
}

// SetClockOffset skews this node's physical clock by d from now on, and
// after restarts (hlc.Clock.SetPhysicalOffset): a node with a bad clock.
func (n *ClusterNode) SetClockOffset(d time.Duration) {
	n.clockOffset.Store(int64(d))
	if n.Clock != nil {
		n.Clock.SetPhysicalOffset(d)
	}
}

// InjectDiskError makes every write and sync of this node's filesystem
// fail with err from now on (a full or failing disk); nil heals it. The
// injection survives Stop and Restart until healed.
func (n *ClusterNode) InjectDiskError(err error) { n.disk.InjectWriteError(err) }

// StartCluster starts a cluster and stops it when the test ends.
func StartCluster(tb testing.TB, o ClusterOptions) *Cluster {
	tb.Helper()
	c, err := OpenCluster(o, nil)
	if err != nil {
		tb.Fatal(err)
	}
	c.tb = tb
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

func (c *Cluster) resolve(id uint64) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.addrs[id]
	if !ok {
		return "", fmt.Errorf("no node %d", id)
	}
	return a, nil
}

func (c *Cluster) peers() []uint64 {
	out := make([]uint64, c.opts.Nodes)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

func (n *ClusterNode) start(ln net.Listener) error {
	c := n.c
	n.Clock = hlc.NewClock(hlc.UnixNano, c.opts.MaxOffset)
	n.Clock.SetPhysicalOffset(time.Duration(n.clockOffset.Load()))
	if n.disk == nil || n.disk.Unwrap() != n.fs {
		var injected error
		if n.disk != nil {
			injected = n.disk.Injected()
		}
		n.disk = simfs.New(n.fs, simfs.Options{})
		n.disk.InjectWriteError(injected)
	}
	eng, err := storage.Open("", storage.Options{FS: n.disk})
	if err != nil {
		return err
	}
	n.Engine = eng
	n.Geo = n.geography()
	n.transport = rpc.NewTransport(rpc.TransportConfig{Resolve: c.resolve, Geo: n.Geo})
	ft := filterTransport{c: c, from: n.ID, t: n.transport}
	inline := c.opts.InlineSnapshotLimit
	if inline == 0 {
		inline = min(1<<20, rpc.MaxBatchSize/8)
	}
	n.Raft = raftnode.NewNode(raftnode.Config{
		NodeID: n.ID, LogKeep: c.opts.LogKeep,
		// The side-loaded log is what the tests check (server turns
		// it off with CAIRN_RAFT_SIDELOAD=off).
		Sideload:            true,
		SendSnapshot:        ft.SendSnapshot,
		InlineSnapshotLimit: inline,
		// Raft messages must fit the transport's frames.
		MaxSizePerMsg: uint64(min(1<<20, rpc.MaxBatchSize/8)),
		TestingAfterIngest: func(tablet, index uint64) error {
			if f := c.opts.AfterIngest; f != nil {
				return f(n.ID, tablet, index)
			}
			return nil
		},
	}, eng, ft)
	ls := &kv.LateSender{}
	scfg := c.opts.Store
	scfg.Sender = ls
	scfg.Raft = &store.RaftConfig{Node: n.Raft, Peers: c.peers()}
	n.Load = n.requestLoad()
	scfg.Load = n.Load
	st, err := store.Open(context.Background(), eng, n.Clock, scfg)
	if err != nil {
		n.transport.Close()
		_ = eng.Close()
		return err
	}
	n.Store = st
	n.senders = rpc.NewNodeSenders(n.transport, n.ID, st)
	n.Leaseholders = kv.NewLeaseholderSender(kv.LeaseholderConfig{
		LocalNode: n.ID,
		Node:      n.senders.Sender,
		Replicas: func(t kvpb.TabletID) []uint64 {
			return slices.Clone(n.Raft.Config(uint64(t)).GetVoters())
		},
		AllNodes: c.peers,
	})
	n.pinger = rpc.NewClockPinger(c.resolve)
	n.ClockMonitor = clockmon.New(clockmon.Config{
		NodeID:   n.ID,
		Clock:    n.Clock,
		Peers:    c.peers,
		Pinger:   n.pinger,
		Interval: c.opts.ClockInterval,
		Fence:    func(err error) { n.Raft.Fence("clock", err) },
		Unfence:  func() { n.Raft.Unfence("clock") },
		Logger:   slog.New(slog.DiscardHandler),
	})
	dbOpts := c.opts.DB
	dbOpts.NodeID = n.ID // the gateway observes its own clock
	dbOpts.Leaseholder = n.Leaseholders.Leaseholder
	n.DB = kv.NewDB(clockmon.Guard(n.Leaseholders, n.ClockMonitor), st, n.Clock, dbOpts)
	ls.Set(n.DB)
	raftNode := n.Raft
	var kvServed kvpb.Sender = st
	if c.opts.KVFilter != nil {
		kvServed = filteredKV{node: n.ID, filter: c.opts.KVFilter, st: st}
	}
	n.server = rpc.Serve(ln, func(env raftnode.Envelope) { _ = raftNode.Step(env) }, func(ctx context.Context, env raftnode.Envelope, image io.Reader) error {
		return raftNode.ReceiveSnapshot(ctx, env, image)
	}, rpc.WithKV(kvServed), rpc.WithGeography(n.Geo), rpc.WithClock(n.Clock.PhysicalNow))
	ctx, cancel := context.WithCancel(context.Background())
	n.stopRun, n.runDone, n.monDone = cancel, make(chan error, 1), make(chan struct{})
	go func() { n.runDone <- n.Raft.Run(ctx, c.opts.Tick) }()
	n.startBalancer()
	n.startSplitQueue()
	go func() { defer close(n.monDone); n.ClockMonitor.Run(ctx) }()
	n.running.Store(true)
	return nil
}

// Stop stops the node as a crash would look to the others (its RPC
// server goes first), then closes its parts; its filesystem is kept for
// Restart.
func (n *ClusterNode) Stop() error {
	if n.stopBalancer != nil {
		n.stopBalancer()
		n.stopBalancer = nil
	}
	if n.stopSplits != nil {
		n.stopSplits()
		n.stopSplits = nil
	}
	n.server.Stop()
	n.DB.Close()
	n.Store.Close()
	n.stopRun()
	err := <-n.runDone
	<-n.monDone
	n.pinger.Close()
	n.transport.Close()
	n.senders.Close()
	if cerr := n.Engine.Close(); err == nil {
		err = cerr
	}
	n.running.Store(false)
	return err
}

// Crash stops the node as a power loss would: its filesystem keeps only
// what was synced (and a random part of the rest) when it is restarted.
//
// The node's raft messages stop leaving before its disk image is taken:
// the node runs on until Stop, and an append it acknowledged after the
// image (synced after it) would be an acknowledgement the restarted node
// no longer backs, which no real crash can produce (the leader would
// count a copy that is gone, and heartbeat a commit index past the
// node's log forever).
func (n *ClusterNode) Crash(seed uint64) error {
	n.c.mu.Lock()
	if n.c.crashed == nil {
		n.c.crashed = map[uint64]bool{}
	}
	n.c.crashed[n.ID] = true
	n.c.mu.Unlock()
	crashed := n.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: int(seed % 101), RNG: rand.New(rand.NewPCG(seed, 1))})
	err := n.Stop()
	n.fs = crashed
	n.c.mu.Lock()
	delete(n.c.crashed, n.ID)
	n.c.mu.Unlock()
	return err
}

// Restart starts a stopped node again on its filesystem and address.
func (n *ClusterNode) Restart() error {
	addr, _ := n.c.resolve(n.ID)
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("relistening on %s: %w", addr, err)
	}
	return n.start(ln)
}

// Running reports whether the node is started.
func (n *ClusterNode) Running() bool { return n.running.Load() }

// Leader returns the node whose replica of tablet holds the lease, as
// the running nodes see it (0: none yet).
func (c *Cluster) Leader(tablet kvpb.TabletID) uint64 {
	for _, n := range c.Nodes {
		if !n.running.Load() {
			continue
		}
		if r := n.Raft.Replica(uint64(tablet)); r != nil {
			if term, _ := r.Lease(); term != 0 {
				return n.ID
			}
		}
	}
	return 0
}

// WaitLeader waits until some running node holds tablet's lease and
// returns it.
func (c *Cluster) WaitLeader(tablet kvpb.TabletID, timeout time.Duration) uint64 {
	c.tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.Leader(tablet); l != 0 {
			return l
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.tb.Fatalf("testcluster: no leaseholder of tablet %d within %s", tablet, timeout)
	return 0
}
