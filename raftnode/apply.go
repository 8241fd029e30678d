package raftnode

// Offloaded applies: a group whose committed entries of one Ready are
// large (a bulk batch of a COPY, an SST to ingest) is applied by a worker
// instead of inside the round, so that its apply, which can take seconds,
// holds neither the node's lock nor the rounds of the other groups (their
// proposals, heartbeats and transaction heartbeats included), and so that
// the large applies of several groups run side by side. The group's Ready
// is advanced only once the worker's batch has committed; until then no
// round takes the group's next Ready (doc.go, invariants 5 and 6).

import (
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/storage"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// defaultApplyOffloadBytes is Config.ApplyOffloadBytes's default: far
// above an OLTP write's batch (a few hundred bytes to a few KiB, which
// the round applies in microseconds, and whose proposer a worker's
// hand-off would make wait for the next round's sync as well), and far
// below a bulk batch (a COPY's proposal per tablet is hundreds of KiB to
// MiBs, applied in tens to hundreds of milliseconds).
const defaultApplyOffloadBytes = 64 << 10

// applyJob is one group's offloaded apply: the committed entries of the
// Ready rd, which the group's round persisted and sent but did not
// advance.
type applyJob struct {
	r       *Replica
	rd      raft.Ready
	entries []*pb.Entry // to apply: rd's committed entries past r.applied
	done    chan struct{}

	// mu orders the worker's start against RemoveReplica: a job cancelled
	// before it runs never runs; one running is waited for.
	mu                 sync.Mutex
	running, cancelled bool
	err                error
}

// offload returns the entries of rd that a worker is to apply instead of
// the round (nil: the round applies them). Only normal entries go to a
// worker: a configuration change is applied to the RawNode, under the
// node's lock, and a snapshot replaces the state in the round's persist
// batch. n.mu is held.
func (n *Node) offload(r *Replica, rd *raft.Ready) []*pb.Entry {
	if n.cfg.ApplyOffloadBytes < 0 || !raft.IsEmptySnap(rd.Snapshot) {
		return nil
	}
	bs, _ := r.sm.(BatchSplitter)
	var ents []*pb.Entry
	size, ingests := 0, false
	for _, e := range rd.CommittedEntries {
		if e.GetIndex() <= r.applied {
			continue
		}
		if e.GetType() != pb.EntryType_EntryNormal {
			return nil
		}
		size += len(e.GetData())
		ingests = ingests || (bs != nil && len(e.GetData()) > 0 && bs.NeedsEmptyBatch(e))
		ents = append(ents, e)
	}
	if len(ents) == 0 || (size < n.cfg.ApplyOffloadBytes && !ingests) {
		return nil
	}
	return ents
}

// applyNormal applies the normal entry e of r into *b, first committing
// *b (and starting another) when the state machine needs the batch empty
// for e (BatchSplitter). The caller records the applied index in *b
// after; unrecorded says that *b holds entries of r before e whose
// applied index (r.applied, e's predecessor) it does not hold yet, which
// a split then records before its commit.
func (n *Node) applyNormal(b **storage.Batch, r *Replica, e *pb.Entry, unrecorded bool) error {
	if len(e.GetData()) == 0 {
		return nil
	}
	bs, ok := r.sm.(BatchSplitter)
	ingests := ok && bs.NeedsEmptyBatch(e)
	if ingests && unrecorded {
		if err := n.putApplied(*b, r.TabletID, e.GetIndex()-1); err != nil {
			return err
		}
	}
	if ingests && !(*b).Empty() {
		// Not synced, like the apply batch's own commit.
		if err := (*b).CommitNoSync(); err != nil {
			return fmt.Errorf("raftnode: applying a round: %w", err)
		}
		(*b).Close()
		*b = n.eng.NewWriteOnlyBatch()
	}
	start := time.Now()
	apply := r.sm.Apply
	if sl, ok := r.sm.(Sideloader); ok {
		// A side-loaded entry's payload is in a file already: the state
		// machine may link it rather than write it again.
		path, side, err := r.log.SideloadedFile(e)
		if err != nil {
			return fmt.Errorf("raftnode: tablet %d: applying entry %d: %w", r.TabletID, e.GetIndex(), err)
		}
		if side {
			n.SideloadedApplies.Add(1)
			apply = func(b *storage.Batch, e *pb.Entry) error { return sl.ApplySideloaded(b, e, path) }
		}
	}
	if err := apply(*b, e); err != nil {
		return fmt.Errorf("raftnode: tablet %d: applying entry %d: %w", r.TabletID, e.GetIndex(), err)
	}
	if ingests {
		n.stats.IngestNanos.Add(int64(time.Since(start)))
	}
	return nil
}

// runApply is a worker's apply of j: every entry into a batch of its
// own, with its applied index, committed without a sync (as the round's
// apply batch is: invariant 2 holds because the round committed the
// group's raft state before it started j). It does not take the node's
// lock; the next round advances the group (advanceCompletedLocked).
func (n *Node) runApply(j *applyJob) {
	defer n.applyWG.Done()
	n.applySem <- struct{}{}
	j.mu.Lock()
	run := !j.cancelled
	j.running = run
	j.mu.Unlock()
	if run {
		start := time.Now()
		j.err = n.applyJobEntries(j)
		n.stats.OffloadedApplies.Add(1)
		n.stats.OffloadedApplyNanos.Add(int64(time.Since(start)))
	}
	<-n.applySem
	close(j.done)
	n.completedMu.Lock()
	n.completed = append(n.completed, j)
	n.completedMu.Unlock()
	n.signal()
}

func (n *Node) applyJobEntries(j *applyJob) error {
	b := n.eng.NewWriteOnlyBatch()
	defer func() { b.Close() }()
	for i, e := range j.entries {
		// The applied index once, after the last entry (or before a
		// split: applyNormal), as in the round.
		if err := n.applyNormal(&b, j.r, e, i > 0); err != nil {
			return err
		}
	}
	if err := n.putApplied(b, j.r.TabletID, j.entries[len(j.entries)-1].GetIndex()); err != nil {
		return err
	}
	if err := b.CommitNoSync(); err != nil {
		return fmt.Errorf("raftnode: tablet %d: applying entries %d to %d: %w", j.r.TabletID, j.entries[0].GetIndex(), j.entries[len(j.entries)-1].GetIndex(), err)
	}
	return nil
}

// advanceCompletedLocked advances the groups whose offloaded apply has
// finished: their applied index moves to the job's last entry, raft is
// told the Ready is done, and the entries are added to outs for the
// round's observers. It returns those groups' IDs, or the first job's
// error (the engine failed: the node must stop). A job of a replica
// removed meanwhile is dropped. n.mu is held.
func (n *Node) advanceCompletedLocked(outs map[uint64]*passOut) ([]uint64, error) {
	n.completedMu.Lock()
	done := n.completed
	n.completed = nil
	n.completedMu.Unlock()
	var ids []uint64
	for _, j := range done {
		if j.err != nil {
			return nil, j.err
		}
		r := j.r
		if n.replicas[r.TabletID] != r || r.applying != j {
			continue
		}
		r.applying = nil
		r.applied = j.entries[len(j.entries)-1].GetIndex()
		r.log.AppliedTo(r.applied)
		r.rn.Advance(j.rd)
		n.touchLocked(r)
		outs[r.TabletID] = &passOut{r: r, entries: j.entries}
		ids = append(ids, r.TabletID)
	}
	return ids, nil
}

// cancelApplyLocked makes r's offloaded apply, if any, never start, or
// waits for it to end if it has (RemoveReplica: nothing may write the
// replica's state after it is destroyed). The worker does not take the
// node's lock, so waiting under it is safe. n.mu is held.
func (r *Replica) cancelApplyLocked() {
	j := r.applying
	if j == nil {
		return
	}
	j.mu.Lock()
	j.cancelled = true
	running := j.running
	j.mu.Unlock()
	if running {
		<-j.done
	}
	r.applying = nil
}
