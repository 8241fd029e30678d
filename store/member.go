package store

// Replicas that come and go (RaftConfig.Membership): the membership
// package adds this node to a tablet's group, the group's leader sends it
// raft messages, and the first of them creates an empty replica here that
// the leader's snapshot fills; a configuration without this node destroys
// the replica.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
)

// placeholderDesc is the descriptor of a replica created for a raft
// message before its snapshot arrived: an empty span at the end of the
// keyspace, so it holds and is routed no key. The snapshot's descriptor
// replaces it.
func placeholderDesc(id kvpb.TabletID) kvpb.TabletDescriptor {
	return kvpb.TabletDescriptor{TabletID: id, StartKey: keys.Max, EndKey: keys.Max}
}

func placeholder(d kvpb.TabletDescriptor) bool { return bytes.Equal(d.StartKey, d.EndKey) }

// memberTablets picks, from the directory, the tablets a member opens:
// those it holds raft state for, those awaiting their snapshot, and the
// bootstrap tablet of a store bootstrapped now or whose bootstrap tablet
// never had raft state (a crash between the two batches). An empty store
// of a node with Peers is bootstrapped; one without (a node joining a
// running cluster) starts with no tablet.
func (s *Store) memberTablets(descs []kvpb.TabletDescriptor) ([]kvpb.TabletDescriptor, error) {
	_, initialized, err := s.eng.Get(storage.MVCCKey{Key: nextTabletIDKey})
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if !initialized && len(descs) == 0 && len(s.cfg.Raft.Peers) > 0 {
		d, err := s.bootstrap()
		if err != nil {
			return nil, err
		}
		return []kvpb.TabletDescriptor{d}, nil
	}
	// The directory lists what this node's replicas wrote, but a snapshot
	// of the tablet holding it (or its removal from this node) replaces or
	// clears it: the descriptors recorded by PersistDescriptors fill in,
	// the later generation of the two winning.
	recorded, err := readDescriptors(s.eng)
	if err != nil {
		return nil, err
	}
	byID := map[kvpb.TabletID]kvpb.TabletDescriptor{}
	for _, d := range append(descs, recorded...) {
		if old, ok := byID[d.TabletID]; !ok || d.Generation > old.Generation {
			byID[d.TabletID] = d
		}
	}
	var out []kvpb.TabletDescriptor
	for _, d := range byID {
		ls, err := raftnode.OpenLogStore(s.eng, uint64(d.TabletID))
		if err != nil {
			return nil, fmt.Errorf("store: open tablet %s: %w", &d, err)
		}
		wait, err := tablet.AwaitsSnapshot(s.eng, d.TabletID)
		if err != nil {
			return nil, err
		}
		hs, _, _ := ls.InitialState()
		fresh := d.TabletID == firstTabletID && d.Generation == 0 && hs == nil && len(s.cfg.Raft.Peers) > 0
		if raftnode.HasState(ls) || wait || fresh {
			out = append(out, d)
		}
	}
	return out, nil
}

// CreateReplica opens an empty replica of tablet id, to be filled by its
// group leader's snapshot (raftnode.Config.OnUnknownTablet). It does
// nothing if the replica exists or the store is closed.
func (s *Store) CreateReplica(id kvpb.TabletID) {
	// No store lock is held while joining the group: this runs on an RPC
	// stream's goroutine, and a split waiting for its entry to apply may
	// need that stream's next message. The raft node's map is what makes
	// one replica per tablet (AddReplica refuses a second).
	s.mu.RLock()
	closed := s.mu.closed
	s.mu.RUnlock()
	n := s.cfg.Raft.Node
	if closed || n.Replica(uint64(id)) != nil {
		return
	}
	r, err := tablet.New(s.eng, s.clock, placeholderDesc(id), s.tabletConfig())
	if err == nil {
		err = s.joinGroup(r, nil, false)
	}
	if err != nil && n.Replica(uint64(id)) != nil {
		// A split applied here at the same moment made it.
		r.Close()
		return
	}
	if err != nil {
		s.mu.Lock()
		s.mu.raftErr = fmt.Errorf("store: creating a replica of tablet %d: %w", id, err)
		s.mu.Unlock()
		return
	}
	if err := s.bumpTabletID(id); err != nil {
		s.mu.Lock()
		s.mu.raftErr = err
		s.mu.Unlock()
	}
	s.register(r)
}

// RemoveReplica destroys this node's replica of tablet id after its group
// dropped the node (raftnode.Config.OnRemoved): it stops serving, its raft
// state goes (but for the term and vote) and its data is cleared.
func (s *Store) RemoveReplica(id kvpb.TabletID) error {
	s.mu.Lock()
	r := s.mu.replicas[id]
	closed := s.mu.closed
	if r != nil && !closed {
		delete(s.mu.replicas, id)
		s.publishRoutesLocked()
	}
	s.mu.Unlock()
	if closed {
		return nil
	}
	if r != nil {
		r.Close()
	}
	if err := s.cfg.Raft.Node.RemoveReplica(uint64(id)); err != nil {
		return err
	}
	if r == nil {
		return nil
	}
	b := s.eng.NewBatch()
	defer b.Close()
	if d := r.Desc(); !placeholder(d) {
		for _, sp := range tablet.ReplicatedSpans(d) {
			if err := b.ClearRange(sp.Key, sp.EndKey); err != nil {
				return err
			}
		}
	}
	if err := b.Delete(storage.MVCCKey{Key: keys.TabletLocal(uint64(id), "snapw")}); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("store: clearing the removed replica of tablet %d: %w", id, err)
	}
	return nil
}

// LocalTablet returns the descriptor of this node's replica whose span
// holds key (with reverse: StartKey < key <= EndKey), if it has one. A
// member that does not hold every tablet answers lookups this way rather
// than from its directory, which lists only what its own replicas wrote.
func (s *Store) LocalTablet(key []byte, reverse bool) (kvpb.TabletDescriptor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.mu.replicas {
		d := r.Desc()
		if placeholder(d) {
			continue
		}
		if reverse {
			if bytes.Compare(d.StartKey, key) < 0 && bytes.Compare(key, d.EndKey) <= 0 {
				return d, true
			}
		} else if d.ContainsKey(key) {
			return d, true
		}
	}
	return kvpb.TabletDescriptor{}, false
}

// IsPlaceholder reports whether this node's replica of tablet id is
// still empty, awaiting its first snapshot.
func (s *Store) IsPlaceholder(id kvpb.TabletID) bool {
	r := s.Replica(id)
	return r != nil && placeholder(r.Desc())
}

// ReplicaCount is the number of replicas this store holds (placeholders
// awaiting their snapshot included).
func (s *Store) ReplicaCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.mu.replicas)
}

// replicaDescsKey records the descriptors of this store's replicas
// (node-local): a member opens its tablets from them and the directory.
var replicaDescsKey = keys.StoreLocal("replica-descs")

// PersistDescriptors records the descriptors of this store's replicas
// (but placeholders) if they changed since it last did. The membership
// loop calls it every scan and Close once more; a crash loses at most the
// changes since, which the directory entries that splits and snapshots
// write cover unless a snapshot of the directory's tablet replaced them
// in that moment.
func (s *Store) PersistDescriptors() error {
	s.descMu.Lock()
	defer s.descMu.Unlock()
	descs := s.Tablets()
	slices.SortFunc(descs, func(a, b kvpb.TabletDescriptor) int { return cmp.Compare(a.TabletID, b.TabletID) })
	var enc []byte
	for _, d := range descs {
		e := tablet.EncodeDescriptor(nil, d)
		enc = binary.AppendUvarint(enc, uint64(len(e)))
		enc = append(enc, e...)
	}
	if s.lastDescs != nil && bytes.Equal(enc, s.lastDescs) {
		return nil
	}
	b := s.eng.NewWriteOnlyBatch()
	defer b.Close()
	if err := b.Put(storage.MVCCKey{Key: replicaDescsKey}, enc); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("store: recording replica descriptors: %w", err)
	}
	s.lastDescs = enc
	return nil
}

func readDescriptors(eng *storage.Engine) ([]kvpb.TabletDescriptor, error) {
	v, ok, err := eng.Get(storage.MVCCKey{Key: replicaDescsKey})
	if err != nil || !ok {
		return nil, err
	}
	var out []kvpb.TabletDescriptor
	for len(v) > 0 {
		n, k := binary.Uvarint(v)
		if k <= 0 || n > uint64(len(v)-k) {
			return nil, fmt.Errorf("store: corrupt replica descriptors")
		}
		d, err := tablet.DecodeDescriptor(v[k : k+int(n)])
		if err != nil {
			return nil, fmt.Errorf("store: replica descriptors: %w", err)
		}
		out = append(out, d)
		v = v[k+int(n):]
	}
	return out, nil
}
