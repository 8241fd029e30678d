package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
)

// RaftConfig makes a store's tablets raft groups (issue #4).
type RaftConfig struct {
	// Node is this node's multi-raft, over the store's engine. The caller
	// runs it (Node.Run) and stops it after Store.Close.
	Node *raftnode.Node
	// Peers are the voters a tablet starts with when it has no raft state
	// yet: every node of a new cluster opens the bootstrap tablet with the
	// same peers (one node: itself, replication factor 1).
	Peers []uint64
	// Membership says replicas come and go (package membership adds and
	// removes them): the store opens only the tablets this node holds
	// raft state for, does not require them to tile the keyspace, never
	// bootstraps a store that was bootstrapped before, and creates and
	// destroys replicas as raft messages and configuration changes
	// arrive (member.go). With Peers empty the node joined a running
	// cluster: it starts with no tablet at all.
	Membership bool
	// LeaseEligible, if set, reports whether a node may take leases now
	// (not dead, decommissioning or fenced by its clock; the lease
	// balancer's Eligible). A SpreadLeaseRequest spreads over the
	// eligible voters only (nil: every voter).
	LeaseEligible func(node uint64) bool
	// Place, if set, makes at most one configuration change of tablet
	// towards the placement of the bucket at ordinal, and returns the
	// node its lease belongs on and whether the voters are placed
	// (membership.Member.Place; a SpreadLeaseRequest with Place). nil:
	// the voters stay, only the lease is spread.
	Place func(ctx context.Context, tablet uint64, ordinal int) (lease uint64, placed bool, err error)
	// MoveReplica, if set, makes one step of moving a tablet's replica
	// from one node to another on its leaseholder (membership.Member.
	// MoveReplica; kvpb.PlacementRequest). nil: a Placement asking for a
	// move is refused.
	MoveReplica func(ctx context.Context, tablet, from, to uint64) (done, refused bool, err error)
}

// raftGroup adapts a raftnode replica to tablet.Raft.
type raftGroup struct {
	node *raftnode.Node
	rep  *raftnode.Replica
}

func (g raftGroup) Lease() (uint64, uint64)   { return g.rep.Lease() }
func (g raftGroup) ReadLease() (uint64, bool) { return g.rep.ReadLease() }
func (g raftGroup) ReadMark() int64           { return g.rep.ReadMark() }
func (g raftGroup) ReadConfirmed(mark int64) (uint64, bool) {
	return g.rep.ReadConfirmed(mark)
}
func (g raftGroup) NodeID() uint64 { return g.rep.NodeID() }
func (g raftGroup) Propose(done <-chan struct{}, term uint64, data []byte) error {
	return g.node.ProposeAt(done, g.rep.TabletID, term, data)
}

// ProposeHanded implements tablet.HandingRaft.
func (g raftGroup) ProposeHanded(done <-chan struct{}, term uint64, data []byte, refuse tablet.Refuser) (tablet.Withdrawer, error) {
	h, err := g.node.ProposeHanded(done, g.rep.TabletID, term, data, refuse)
	if h == nil {
		// Not a typed nil: the tablet tells a hand-off by a non-nil one.
		return nil, err
	}
	return h, err
}

// joinGroup opens r's raft group on this node (bootstrapping it with
// peers if it has no raft state) and makes r serve through it. A group
// whose only voter is this node elects it at once; campaign asks for an
// election in any case (the leader of a split's left side does, so the
// right side gets a leader without waiting for a timeout).
func (s *Store) joinGroup(r *tablet.Replica, peers []uint64, campaign bool) error {
	n := s.cfg.Raft.Node
	id := uint64(r.Desc().TabletID)
	rep, err := n.AddReplica(id, peers, r.StateMachine())
	if err != nil {
		return fmt.Errorf("store: raft group of tablet %d: %w", id, err)
	}
	r.SetRaft(raftGroup{node: n, rep: rep})
	voters := n.Config(id).GetVoters()
	if campaign || (len(voters) == 1 && voters[0] == rep.NodeID()) {
		if err := n.Campaign(id); err != nil {
			return fmt.Errorf("store: campaigning for tablet %d: %w", id, err)
		}
	}
	return nil
}

// onSplit wires the right-hand replica of a split applied from the log
// on this node to its own raft group, with the left's voters, and
// registers it. If this node leads the left side it campaigns for the
// right, which every replica starts alike (raftnode's bootstrap of a new
// group), so the right side has a leader at once.
func (s *Store) onSplit(left, right *tablet.Replica) {
	if s.cfg.Raft == nil {
		s.register(right)
		return
	}
	n := s.cfg.Raft.Node
	lid := uint64(left.Desc().TabletID)
	voters := slices.Clone(n.Config(lid).GetVoters())
	lease := uint64(0)
	if rep := n.Replica(lid); rep != nil {
		lease, _ = rep.Lease()
	}
	rid := right.Desc().TabletID
	if lease != 0 {
		// This node leads the left side and counted its requests: the
		// right side, which it leads too (it campaigns below), starts
		// with half of them.
		s.cfg.Load.Split(lid, uint64(rid))
	}
	if s.cfg.Raft.Membership && n.Replica(uint64(rid)) != nil {
		// The right group's leader reached this node before it applied
		// the split, and the message created the replica (empty, to be
		// filled by that leader's snapshot): keep it.
		right.Close()
		return
	}
	if rep := n.Replica(lid); rep != nil && rep.Shared() {
		// The right side holds data other nodes may have served: its
		// leases must wait out the clock offset even with one voter.
		if err := raftnode.MarkShared(s.eng, uint64(rid)); err != nil {
			s.mu.Lock()
			s.mu.raftErr = err
			s.mu.Unlock()
			return
		}
	}
	if err := s.joinGroup(right, voters, lease != 0); err != nil {
		// Only an engine failure gets here, and the engine refuses every
		// later write: the node is done. The right side stays unserved
		// here rather than served without replication.
		s.mu.Lock()
		s.mu.raftErr = err
		s.mu.Unlock()
		return
	}
	// Tablet IDs must not be reused by a split this node leads later.
	if err := s.bumpTabletID(rid); err != nil {
		s.mu.Lock()
		s.mu.raftErr = err
		s.mu.Unlock()
	}
	s.register(right)
}

// onSplitBySnapshot opens this node's replicas of the tablets a snapshot
// of left showed it had missed (splits truncated from left's log before
// it could apply them). Each joins its group with no raft state: its
// engine holds what this node had of the pre-split tablet, not the state
// the group started from, so it must wait for its leader's snapshot,
// which replaces that (tablet.RaftStateMachine.ApplySnapshot). Until then
// it is no voter and never leads; a request reaching it is told it is not
// the leaseholder.
func (s *Store) onSplitBySnapshot(left *tablet.Replica, rights []kvpb.TabletDescriptor) {
	for _, d := range rights {
		if s.Replica(d.TabletID) != nil {
			continue
		}
		r, err := tablet.New(s.eng, s.clock, d, s.tabletConfig())
		if err == nil {
			err = s.joinGroup(r, nil, false)
		}
		if err == nil {
			err = s.bumpTabletID(d.TabletID)
		}
		if err != nil {
			// As in onSplit: only an engine failure gets here.
			s.mu.Lock()
			s.mu.raftErr = fmt.Errorf("store: opening tablet %s learned from a snapshot of tablet %d: %w", &d, left.Desc().TabletID, err)
			s.mu.Unlock()
			return
		}
		s.register(r)
	}
}

// bumpTabletID moves the store's tablet ID counter past id.
func (s *Store) bumpTabletID(id kvpb.TabletID) error {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	v, ok, err := s.eng.Get(storage.MVCCKey{Key: nextTabletIDKey})
	if err != nil {
		return err
	}
	if ok && len(v) == 8 && binary.BigEndian.Uint64(v) > uint64(id) {
		return nil
	}
	b := s.eng.NewWriteOnlyBatch()
	defer b.Close()
	if err := b.Put(storage.MVCCKey{Key: nextTabletIDKey}, binary.BigEndian.AppendUint64(nil, uint64(id)+1)); err != nil {
		return err
	}
	return b.Commit()
}

// tabletIDCounterKey is the replicated counter of tablet IDs of a store
// in raft mode: an addressable key (so it lives on, and is replicated
// with, whichever tablet holds it) in the system span, below the
// directory and outside the SQL layer's \x02s keys.
var tabletIDCounterKey = []byte("\x02itablet-id")

// tabletIDBlock is how many tablet IDs one increment of the replicated
// counter reserves. Each increment is a replicated, synced write to one
// key, so taking IDs one at a time serialised the parallel bucket splits
// of a new hash-sharded index on it (issue 16); IDs of a block this node
// never uses are skipped, never reused (invariant 3).
const tabletIDBlock = 64

// allocateReplicatedTabletID takes the next tablet ID from the replicated
// counter (an Increment sent through the store's Sender, so it reaches
// the counter's leaseholder wherever it is), a block at a time. The
// counter holds the last ID handed out minus one (tablet 1 is the
// bootstrap's); a store whose local counter is ahead (it split before it
// was replicated) moves the replicated one past it first.
func (s *Store) allocateReplicatedTabletID(ctx context.Context) (kvpb.TabletID, error) {
	s.idBlock.mu.Lock()
	defer s.idBlock.mu.Unlock()
	if s.idBlock.next == 0 || s.idBlock.next >= s.idBlock.end {
		if err := s.reserveTabletIDs(ctx); err != nil {
			return 0, err
		}
	}
	id := s.idBlock.next
	s.idBlock.next++
	return id, s.bumpTabletID(id)
}

// reserveTabletIDs takes the next block of IDs; s.idBlock.mu is held.
func (s *Store) reserveTabletIDs(ctx context.Context) error {
	sender := s.cfg.Sender
	if sender == nil {
		sender = s
	}
	inc := func(by int64) (int64, error) {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.IncrementRequest{Key: tabletIDCounterKey, Increment: by})
		br, err := sender.Send(ctx, ba)
		if err != nil {
			return 0, fmt.Errorf("store: allocating a tablet ID: %w", err)
		}
		return br.Responses[0].(*kvpb.IncrementResponse).NewValue, nil
	}
	// The counter's values (v-block, v] are this node's: IDs v-block+2
	// .. v+1.
	v, err := inc(tabletIDBlock)
	if err != nil {
		return err
	}
	lo := v - tabletIDBlock + 2
	local, ok, err := s.eng.Get(storage.MVCCKey{Key: nextTabletIDKey})
	if err != nil {
		return err
	}
	if ok && len(local) == 8 {
		if next := int64(binary.BigEndian.Uint64(local)); lo < next {
			// Past the local counter: the values (v, v2] are ours, and
			// the block's lowest ID v2-block+2 = next+block.
			if v, err = inc(next - lo + tabletIDBlock); err != nil {
				return err
			}
			lo = v - tabletIDBlock + 2
		}
	}
	s.idBlock.next, s.idBlock.end = kvpb.TabletID(lo), kvpb.TabletID(v+2)
	return nil
}

// RaftError is the error that left a split's right side unserved on this
// node, if any (the node's engine failed under it).
func (s *Store) RaftError() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.raftErr
}
