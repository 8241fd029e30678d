package raftnode

// Snapshots too large for a raft message (issue #4). A MsgSnap carries the
// snapshot's metadata and its state machine's image: inline, in the
// message, when the image is at most Config.InlineSnapshotLimit bytes;
// otherwise the message carries only a header (the descriptor) and the
// image, an SST of the tablet's replicated spans, streams separately
// (Config.SendSnapshot: rpc's snapshot stream). The receiver writes the
// image to a file (ReceiveSnapshot), steps the MsgSnap into raft, and,
// once raft has accepted it (the next Ready holds it), applies it in
// three steps, each durable before the next:
//
//  1. an intent record (store-local, synced): the snapshot's index and
//     the batch of raft state that step 3 writes (the log's new start and
//     configuration, the hard state with the commit index at the
//     snapshot's, the applied index, the state machine's header writes:
//     directory entries, awaiting-snapshot marks);
//  2. the ingest of the image (Pebble ingests atomically and durably: the
//     manifest or, when it overlaps the memtable, a WAL record, is synced
//     before Ingest returns), which replaces the descriptor's replicated
//     spans, the applied index among them, which the image holds at the
//     snapshot's index;
//  3. the round's persist batch (synced) with that same raft state and
//     the deletion of the intent.
//
// Why this order: the data must never be older than what the raft state
// claims. Raft state first and the image second would leave, after a
// crash between them, a replica whose log starts after an index whose
// data it does not have, and which may already have acknowledged entries
// after it. Image first, raft state second leaves, after a crash between,
// data newer than the raft state says: the applied index (in the image) is
// past the hard state's commit and the log's start, which raft refuses at
// restart, and the descriptor learned from the snapshot is lost. The
// intent closes that gap: RecoverSnapshots, run before the store opens
// its replicas, finds the intent and, if the image's applied index is the
// intent's (the ingest happened: before it the applied index was below,
// since raft accepts only a snapshot past its commit index), writes the
// intent's batch (step 3 for that replica); otherwise it drops the intent
// (the ingest never happened; the leader sends a snapshot again).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// SnapshotStreamer is implemented by a StateMachine whose image may be too
// large for a raft message (the tablet).
type SnapshotStreamer interface {
	// SnapshotUpTo is Snapshot's image if it is at most limit bytes (ok
	// false otherwise).
	SnapshotUpTo(limit int) (data []byte, ok bool, err error)
	// SnapshotStream captures the state as of the last applied entry
	// (under the node's lock): header goes in the MsgSnap's Data, write
	// makes the image as an SST at path (later, on another goroutine),
	// release frees the capture.
	SnapshotStream() (header []byte, write func(path string) error, release func(), err error)
	// IsStreamHeader reports whether a snapshot's Data is a header
	// whose image streams separately. ApplySnapshot gets such a snapshot
	// only after its image was ingested.
	IsStreamHeader(data []byte) bool
}

// defaultInlineSnapshotLimit is Config.InlineSnapshotLimit's default.
const defaultInlineSnapshotLimit = 1 << 20

// snapshotTimeout bounds one snapshot stream, sending and applying: a
// receiver that never answers must not hold the follower's progress in
// raft's snapshot state for good (raft sends it nothing else meanwhile).
const snapshotTimeout = 10 * time.Minute

// snapshotRetry is how long a failed snapshot stream waits before raft
// is told (and may try again): a receiver that refuses would otherwise be
// sent one per heartbeat.
const snapshotRetry = 500 * time.Millisecond

// pendingSnap is a streamed snapshot's image received and waiting for
// raft's next Ready of its replica.
type pendingSnap struct {
	index uint64
	path  string
	done  chan error
}

// ErrSnapshotFromStream is Step's refusal of a MsgSnap whose Data is a
// stream header: such a snapshot is only taken through ReceiveSnapshot.
var ErrSnapshotFromStream = errors.New("raftnode: a streamed snapshot's header arrived without its image")

func intentKey(tabletID uint64) storage.MVCCKey {
	return storage.MVCCKey{Key: binary.BigEndian.AppendUint64(keys.StoreLocal(intentSuffix), tabletID)}
}

// intentSuffix starts the store-local keys of snapshot intents, one per
// tablet (see the file comment).
const intentSuffix = "snapi"

// makeSnapshot fills m, a MsgSnap raft asked for, with the replica's
// state as of its last applied entry. When the image is too large for m
// it returns a function that streams it (the message must then not be
// sent: the stream carries it): stream(true) starts the stream,
// stream(false) abandons it (the round failed).
func (n *Node) makeSnapshot(r *Replica, m *pb.Message) (stream func(start bool), err error) {
	term, err := r.log.Term(r.applied)
	if err != nil {
		return nil, err
	}
	index := r.applied
	meta := &pb.SnapshotMetadata{Index: &index, Term: &term, ConfState: proto.Clone(r.conf).(*pb.ConfState)}
	ss, ok := r.sm.(SnapshotStreamer)
	if !ok || n.cfg.SendSnapshot == nil {
		data, err := r.sm.Snapshot()
		if err != nil {
			return nil, err
		}
		m.Snapshot = &pb.Snapshot{Data: data, Metadata: meta}
		return nil, nil
	}
	data, fits, err := ss.SnapshotUpTo(n.cfg.InlineSnapshotLimit)
	if err != nil {
		return nil, err
	}
	if fits {
		m.Snapshot = &pb.Snapshot{Data: data, Metadata: meta}
		return nil, nil
	}
	header, write, release, err := ss.SnapshotStream()
	if err != nil {
		return nil, err
	}
	m.Snapshot = &pb.Snapshot{Data: header, Metadata: meta}
	env := Envelope{TabletID: r.TabletID, Msg: m}
	ctx := n.runCtx
	to := m.GetTo()
	return func(start bool) {
		if !start {
			release()
			return
		}
		n.snapWG.Add(1)
		go func() {
			defer n.snapWG.Done()
			err := n.streamSnapshot(ctx, env, write, release)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(snapshotRetry):
				}
			} else {
				n.SnapshotsStreamed.Add(1)
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if cur := n.replicas[r.TabletID]; cur == r {
				st := raft.SnapshotFinish
				if err != nil {
					st = raft.SnapshotFailure
				}
				r.rn.ReportSnapshot(to, st)
				n.touchLocked(r)
				n.signal()
			}
		}()
	}, nil
}

// streamSnapshot writes the image to a file and sends it.
func (n *Node) streamSnapshot(ctx context.Context, env Envelope, write func(string) error, release func()) error {
	path := n.eng.SSTPath(fmt.Sprintf("snap-out-%d-%d-%x.sst", env.TabletID, env.Msg.GetSnapshot().GetMetadata().GetIndex(), rand.Uint64()))
	err := write(path)
	release()
	defer func() { _ = n.eng.RemoveFile(path) }()
	if err != nil {
		return fmt.Errorf("raftnode: tablet %d: writing a snapshot image: %w", env.TabletID, err)
	}
	f, err := n.eng.OpenFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	return n.cfg.SendSnapshot(ctx, env.Msg.GetTo(), env, f)
}

// ReceiveSnapshot takes a streamed snapshot (rpc's SnapshotReceiver):
// env's MsgSnap (metadata and the state machine's header) and its image.
// It writes the image to a file, steps the message into raft and waits
// until raft has applied it (image ingested, raft state written) or
// declined it (raft needed no snapshot: its answer tells the leader).
func (n *Node) ReceiveSnapshot(ctx context.Context, env Envelope, image io.Reader) error {
	if to := env.Msg.GetTo(); to != n.cfg.NodeID {
		return fmt.Errorf("raftnode: a snapshot for node %d reached node %d", to, n.cfg.NodeID)
	}
	index := env.Msg.GetSnapshot().GetMetadata().GetIndex()
	path, err := n.eng.WriteFile(fmt.Sprintf("snap-in-%d-%d-%x.sst", env.TabletID, index, rand.Uint64()), image)
	if err != nil {
		return fmt.Errorf("raftnode: tablet %d: receiving a snapshot: %w", env.TabletID, err)
	}
	ps := &pendingSnap{index: index, path: path, done: make(chan error, 1)}
	if err := n.stepStreamed(env, ps); err != nil {
		_ = n.eng.RemoveFile(path)
		return err
	}
	select {
	case err := <-ps.done:
		return err
	case <-ctx.Done():
		// The round still takes the image up or removes it.
		return ctx.Err()
	}
}

// stepStreamed steps a streamed snapshot's MsgSnap with its image
// waiting in ps. A nil error with ps.done already answered means raft
// declined it.
func (n *Node) stepStreamed(env Envelope, ps *pendingSnap) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[env.TabletID]
	if r == nil && n.cfg.OnUnknownTablet != nil {
		n.mu.Unlock()
		n.cfg.OnUnknownTablet(env.TabletID)
		n.mu.Lock()
		r = n.replicas[env.TabletID]
	}
	if r == nil {
		return fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, env.TabletID)
	}
	if n.failed.Load() {
		return fmt.Errorf("raftnode: node %d failed", n.cfg.NodeID)
	}
	if r.pendingSnap != nil {
		return fmt.Errorf("raftnode: tablet %d: a snapshot is already waiting to be applied", env.TabletID)
	}
	if ss, ok := r.sm.(SnapshotStreamer); !ok || !ss.IsStreamHeader(env.Msg.GetSnapshot().GetData()) {
		return fmt.Errorf("raftnode: tablet %d: a streamed snapshot without a stream header", env.TabletID)
	}
	r.pendingSnap = ps
	n.touchLocked(r)
	if err := r.rn.Step(env.Msg); err != nil {
		r.pendingSnap = nil
		return fmt.Errorf("raftnode: tablet %d: stepping a snapshot: %w", env.TabletID, err)
	}
	if !r.rn.HasReady() {
		// Declined without an answer (an old term's leader).
		r.pendingSnap = nil
		_ = n.eng.RemoveFile(ps.path)
		ps.done <- nil
		return nil
	}
	n.signal()
	return nil
}

// applyStreamed applies a streamed snapshot raft accepted (rd.Snapshot,
// whose image waits in ps): intent, ingest, then its raft state into
// persist (see the file comment). The caller commits persist, synced.
func (n *Node) applyStreamed(r *Replica, rd *raft.Ready, prevHS *pb.HardState, ps *pendingSnap, persist *storage.Batch) error {
	id := r.TabletID
	snap := rd.Snapshot
	index := snap.GetMetadata().GetIndex()
	rec := n.eng.NewBatch()
	defer rec.Close()
	if err := r.log.ApplySnapshot(rec, snap); err != nil {
		return err
	}
	if err := r.sm.ApplySnapshot(rec, snap); err != nil {
		return fmt.Errorf("applying a snapshot: %w", err)
	}
	if err := n.putApplied(rec, id, index); err != nil {
		return err
	}
	// The hard state as raft wants it, but committed only up to the
	// snapshot: entries after it in this Ready are not in the intent.
	src := prevHS
	if !raft.IsEmptyHardState(rd.HardState) {
		src = rd.HardState
	}
	hs := &pb.HardState{}
	if src != nil {
		hs = proto.Clone(src).(*pb.HardState)
	}
	hs.Commit = &index
	if err := r.log.SetHardState(rec, hs); err != nil {
		return err
	}
	repr := rec.Repr()
	intent := n.eng.NewBatch()
	defer intent.Close()
	if err := intent.Put(intentKey(id), append(binary.BigEndian.AppendUint64(nil, index), repr...)); err != nil {
		return err
	}
	if err := intent.Commit(); err != nil {
		return fmt.Errorf("recording a snapshot's intent: %w", err)
	}
	if err := n.eng.Ingest(context.Background(), []string{ps.path}); err != nil {
		return fmt.Errorf("ingesting a snapshot: %w", err)
	}
	if f := n.cfg.TestingAfterIngest; f != nil {
		if err := f(id, index); err != nil {
			return err
		}
	}
	if err := persist.ApplyRepr(repr); err != nil {
		return err
	}
	if err := persist.Delete(intentKey(id)); err != nil {
		return err
	}
	n.SnapshotsIngested.Add(1)
	return nil
}

// RecoverSnapshots finishes the streamed snapshots a crash interrupted
// between their ingest and their raft state (see the file comment) and
// removes the images left behind, and the staging files of SSTs a crash
// caught before their ingest (storage.IngestFilePrefix: their entries
// are applied again from the log). It must run before any replica of the
// engine is opened (the store calls it first).
func RecoverSnapshots(eng *storage.Engine) error {
	if err := eng.RemoveFiles("snap-in-", "snap-out-", storage.IngestFilePrefix); err != nil {
		return err
	}
	lo := keys.StoreLocal(intentSuffix)
	it, err := eng.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: keys.PrefixEnd(lo)})
	if err != nil {
		return err
	}
	type intent struct {
		key     storage.MVCCKey
		tablet  uint64
		index   uint64
		payload []byte
	}
	var found []intent
	for ok := it.First(); ok; ok = it.Next() {
		k := it.UnsafeKey()
		v, err := it.UnsafeValue()
		if err != nil {
			it.Close()
			return err
		}
		if len(k.Key) != len(lo)+8 || len(v) < 8 {
			it.Close()
			return fmt.Errorf("raftnode: malformed snapshot intent %q", k.Key)
		}
		found = append(found, intent{
			key:     storage.MVCCKey{Key: append([]byte(nil), k.Key...)},
			tablet:  binary.BigEndian.Uint64(k.Key[len(lo):]),
			index:   binary.BigEndian.Uint64(v),
			payload: append([]byte(nil), v[8:]...),
		})
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return err
	}
	for _, in := range found {
		applied, err := readApplied(eng, in.tablet)
		if err != nil {
			return err
		}
		b := eng.NewBatch()
		if applied == in.index {
			if err := b.ApplyRepr(in.payload); err != nil {
				b.Close()
				return fmt.Errorf("raftnode: tablet %d: finishing a snapshot: %w", in.tablet, err)
			}
		}
		if err := b.Delete(in.key); err != nil {
			b.Close()
			return err
		}
		err = b.Commit()
		b.Close()
		if err != nil {
			return fmt.Errorf("raftnode: tablet %d: finishing a snapshot: %w", in.tablet, err)
		}
	}
	return nil
}
