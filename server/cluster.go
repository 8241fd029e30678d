package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/cairn-db/cairn/clockmon"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
)

// A node started with Join is one of a fixed set of initial members (a
// static bootstrap, as etcd's initial cluster): Join lists every member's
// RPC address in the same order on every node, a node's ID is its
// address's position (from 1), and every member bootstraps the first
// tablet as a raft group of all of them. Adding nodes to a running
// cluster (node ID allocation, learners, placement) is later work.

// nodeIDKey records the node ID a store was created with, so a store is
// never reopened as another member.
var nodeIDKey = keys.StoreLocal("node-id")

// membersKey records the member list the store was bootstrapped with.
var membersKey = keys.StoreLocal("members")

// clusterMaxOffset is the maximum clock offset between the members.
const clusterMaxOffset = 500 * time.Millisecond

// replication is a clustered node's replication half.
type replication struct {
	id        uint64
	addrs     []string
	transport *rpc.Transport
	raft      *raftnode.Node
	rpc       *rpc.Server
	stopRun   context.CancelFunc
	runDone   chan error
	senders   *rpc.NodeSenders
	// clock measures this node's clock against the other members' and
	// fences the node when it disagrees with a majority (clockmon).
	clock   *clockmon.Monitor
	pinger  *rpc.ClockPinger
	monDone chan struct{}
}

// memberID returns the position (from 1) of self in join.
func memberID(join []string, self string) (uint64, error) {
	i := slices.Index(join, self)
	if i < 0 {
		return 0, fmt.Errorf("--rpc-addr %s is not among the --join addresses %v: every member lists all members, itself included", self, join)
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
			return fmt.Errorf("the store was created for the cluster %s, not %s", m, members)
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

// startReplicated opens the store with every tablet a raft group of the
// members, the RPC server (raft and KV) on ln, and the KV client that
// routes to leaseholders. It sets s.store and s.db.
func (s *Server) startReplicated(ctx context.Context, clock *hlc.Clock, ln net.Listener) error {
	cfg := s.cfg
	id, err := memberID(cfg.Join, cfg.RPCAddr)
	if err != nil {
		return err
	}
	if err := checkMembership(s.eng, id, cfg.Join); err != nil {
		return err
	}
	r := &replication{id: id, addrs: cfg.Join}
	resolve := func(n uint64) (string, error) {
		if n == 0 || n > uint64(len(r.addrs)) {
			return "", fmt.Errorf("no node %d", n)
		}
		return r.addrs[n-1], nil
	}
	r.transport = rpc.NewTransport(rpc.TransportConfig{Resolve: resolve, Logger: s.log})
	r.raft = raftnode.NewNode(raftnode.Config{NodeID: id}, s.eng, r.transport)
	peers := make([]uint64, len(cfg.Join))
	for i := range peers {
		peers[i] = uint64(i + 1)
	}
	ls := &kv.LateSender{}
	s.repl = r
	if s.store, err = store.Open(ctx, s.eng, clock, store.Config{Sender: ls, Raft: &store.RaftConfig{Node: r.raft, Peers: peers}}); err != nil {
		return fmt.Errorf("opening tablets: %w", err)
	}
	r.senders = rpc.NewNodeSenders(r.transport, id, s.store)
	lh := kv.NewLeaseholderSender(kv.LeaseholderConfig{
		LocalNode: id,
		Node:      r.senders.Sender,
		Replicas: func(t kvpb.TabletID) []uint64 {
			return slices.Clone(r.raft.Config(uint64(t)).GetVoters())
		},
		AllNodes: func() []uint64 { return peers },
	})
	r.pinger = rpc.NewClockPinger(resolve)
	r.clock = clockmon.New(clockmon.Config{
		NodeID: id, Clock: clock, Peers: func() []uint64 { return peers }, Pinger: r.pinger,
		Fence:   func(err error) { r.raft.Fence("clock", err) },
		Unfence: func() { r.raft.Unfence("clock") },
		Logger:  s.log,
	})
	s.db = kv.NewDB(clockmon.Guard(lh, r.clock), s.store, clock, cfg.DB)
	ls.Set(s.db)
	r.rpc = rpc.Serve(ln, func(env raftnode.Envelope) { _ = r.raft.Step(env) }, nil, rpc.WithKV(s.store), rpc.WithClock(clock.PhysicalNow))
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
	s.log.Info("cairn: replicating", "node", id, "members", cfg.Join)
	return nil
}

// raftTick is the raft tick of a clustered node: elections after 10–20
// ticks without a leader.
const raftTick = 50 * time.Millisecond

// stop ends the RPC server and the raft scheduler (the store is closed
// before, the engine after).
func (r *replication) stopServing() {
	r.rpc.Stop()
}

func (r *replication) stop() error {
	r.stopRun()
	err := <-r.runDone
	<-r.monDone
	r.pinger.Close()
	r.transport.Close()
	r.senders.Close()
	return err
}
