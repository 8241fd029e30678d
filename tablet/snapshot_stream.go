package tablet

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	pb "go.etcd.io/raft/v3/raftpb"
)

// The streamed form of a replica snapshot (raftnode.SnapshotStreamer):
// the raft message carries only a header, and the image, an SST of the
// descriptor's replicated spans (WriteSnapshot: a range deletion of each
// span then its keys), travels on rpc's snapshot stream and is ingested
// by the receiver before the message is stepped into raft. The header
// holds what the receiver must know before it reads the image: the
// descriptor, and the tablets the sender's split records list (the
// receiver finds among them the ones split off in the part of its old
// span the snapshot's lost, as the inline form finds them among its keys).
//
// Encoding: snapshotStreamVersion, uvarint(len) descriptor, then each
// split record's descriptor, uvarint(len)-prefixed.
const snapshotStreamVersion = 2

// SnapshotUpTo is Snapshot's inline image if it is at most limit bytes;
// ok is false otherwise (the scan stops there, so a large tablet costs no
// more than limit bytes to find out).
func (m *RaftStateMachine) SnapshotUpTo(limit int) (data []byte, ok bool, err error) {
	return m.snapshotInline(limit)
}

// IsStreamHeader reports whether a snapshot's Data is a streamed header
// (its image comes separately).
func (m *RaftStateMachine) IsStreamHeader(data []byte) bool {
	return len(data) > 0 && data[0] == snapshotStreamVersion
}

// SnapshotStream captures the replica's state as of its last applied
// entry (an engine snapshot, taken now, under the raft node's lock) for
// the streamed form: header goes in the raft message, write makes the
// image as an SST at path on the engine's filesystem (later, on another
// goroutine), release frees the engine snapshot.
func (m *RaftStateMachine) SnapshotStream() (header []byte, write func(path string) error, release func(), err error) {
	r := m.r
	snap := r.eng.NewSnapshot()
	desc, err := r.snapshotDesc(snap)
	if err != nil {
		snap.Close()
		return nil, nil, nil, err
	}
	header = []byte{snapshotStreamVersion}
	enc := EncodeDescriptor(nil, desc)
	header = binary.AppendUvarint(header, uint64(len(enc)))
	header = append(header, enc...)
	splits := keys.TabletReplicated(uint64(desc.TabletID), splitRecordSuffix)
	it, err := snap.NewIter(storage.IterOptions{LowerBound: splits, UpperBound: keys.PrefixEnd(splits)})
	if err != nil {
		snap.Close()
		return nil, nil, nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.UnsafeValue()
		if err != nil {
			it.Close()
			snap.Close()
			return nil, nil, nil, err
		}
		header = binary.AppendUvarint(header, uint64(len(v)))
		header = append(header, v...)
	}
	err = it.Err()
	it.Close()
	if err != nil {
		snap.Close()
		return nil, nil, nil, err
	}
	write = func(path string) error {
		w, err := r.eng.NewSSTWriter(path)
		if err != nil {
			return err
		}
		if _, err := WriteSnapshot(snap, desc, w); err != nil {
			w.Abort()
			return err
		}
		return w.Finish()
	}
	return header, write, snap.Close, nil
}

// applyStreamedHeader is ApplySnapshot for the streamed form. The image
// has already been ingested (raftnode does that before it writes b): its
// range deletions replaced the descriptor's replicated spans and its keys
// are the sender's. What remains is the rest of what the inline form
// writes: the directory entries of the descriptor and of the tablets split
// off it that lie outside its span (those inside came with the image,
// which the inline form also lets win), and the awaiting-snapshot marks.
func (m *RaftStateMachine) applyStreamedHeader(b *storage.Batch, snap *pb.Snapshot) error {
	r := m.r
	old := r.Desc()
	sr := &snapReader{d: snap.GetData()[1:], tablet: old.TabletID, what: "snapshot header"}
	desc, err := sr.descriptor()
	if err != nil {
		return err
	}
	var rights []kvpb.TabletDescriptor
	for sr.more() {
		v, err := sr.next()
		if err != nil {
			return err
		}
		e, err := DecodeDescriptor(v)
		if err != nil {
			return fmt.Errorf("tablet %d: snapshot's split record: %w", old.TabletID, err)
		}
		if lostSpan(old, desc, e) {
			rights = append(rights, e)
		}
	}
	for _, e := range append([]kvpb.TabletDescriptor{desc}, rights...) {
		if k := keys.Directory(e.EndKey); bytes.Compare(desc.StartKey, k) <= 0 && bytes.Compare(k, desc.EndKey) < 0 {
			continue
		}
		if err := WriteDescriptor(b, e); err != nil {
			return err
		}
	}
	for _, e := range rights {
		if err := b.Put(awaitSnapshotKey(e.TabletID), nil); err != nil {
			return err
		}
	}
	r.raft.snapDesc, r.raft.snapRights = &desc, rights
	return nil
}
