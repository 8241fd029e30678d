package raftnode

import (
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/storage"
)

// RoundStats count where a node's proposals and rounds spend their time,
// cumulatively, so that a rate over two reads gives the mean cost of each
// step of a replicated write (/metrics; bench/README.md, "Issue 22:
// the replicated write path"). A proposal's commit latency is the sum of
//
//	lock wait    Propose waiting for the node's lock (a round holds it)
//	queue        in raft, until the next round takes it (Run's wake-up)
//	pre-sync     that round's Readies, batch and early sends
//	sync         the round's synced commit of the raft state
//	post-sync    the sends, the apply batch, Advance and the second pass
//	observe      the observers, which answer the proposers
//
// and the proposer's wake-up, which only the tablet sees. The counters are
// read without the lock: a read in the middle of a round may see one
// counter of it and not another.
type RoundStats struct {
	// Proposals counts proposals let into raft (Propose, ProposeAt);
	// ProposeLockNanos is the time they waited for the node's lock, and
	// ProposeQueueNanos the time from then to the start of the round
	// that took them.
	Proposals, ProposeLockNanos, ProposeQueueNanos atomic.Int64
	// ProposalsLate counts proposals taken by a round later than the one
	// after the round in progress when they asked for the lock: they
	// waited out a whole round more than they had to (the lock went to
	// the next round before them).
	ProposalsLate atomic.Int64
	// Rounds counts rounds with work, SyncedRounds those whose raft
	// state was committed with a sync (in the first pass).
	Rounds, SyncedRounds atomic.Int64
	// PreSyncNanos, SyncNanos and PostSyncNanos split the rounds' time
	// under the lock at the first pass's commit of the raft state (synced
	// or not); ObserveNanos is the observers' time after it.
	PreSyncNanos, SyncNanos, PostSyncNanos, ObserveNanos atomic.Int64
	// ApplyNanos is the part of PostSyncNanos spent applying committed
	// entries in the rounds (the apply batches and their commits);
	// IngestNanos the state machines' Apply of entries that ingest an SST
	// (BatchSplitter), in rounds or workers. OffloadedApplies counts the
	// applies done by workers off the rounds (apply.go), and
	// OffloadedApplyNanos their time, which no round waits for.
	ApplyNanos, IngestNanos, OffloadedApplies, OffloadedApplyNanos atomic.Int64
	// HeldHeartbeats counts the heartbeats and answers the node sent
	// itself for groups whose Ready a worker's apply held (heldbeat.go).
	HeldHeartbeats atomic.Int64
	// SecondPassNanos is the part of PostSyncNanos spent in the rounds'
	// second passes (their Readies, commits, applies), CompactNanos the
	// part spent truncating logs (its batch and commit).
	SecondPassNanos, CompactNanos atomic.Int64
	// StallNanos and PublishNanos are, over the rounds' commits (raft
	// state, apply, truncation), Pebble's write stalls (memtables, L0)
	// and its wait for publication behind the batches committed before
	// (a worker's large apply batch among them) plus the WAL sync.
	StallNanos, PublishNanos atomic.Int64
	// Commits counts the rounds' engine commits (raft state, apply,
	// truncation), and CommittedKeys the writes they held, each one
	// memtable insertion: what a round costs Pebble besides its sync.
	Commits, CommittedKeys atomic.Int64
	// SchedulerStalls counts the times the stall watcher found the
	// scheduler stalled (no tick and no round for an election timeout:
	// invariant 9, the node's replicas of shared groups then serve no
	// lease), so that a stall without a disk fault (CPU starvation, a
	// long round) shows in /metrics.
	SchedulerStalls atomic.Int64
	// StallRefusals counts the proposals to shared groups that gave up
	// waiting for the node's lock because the scheduler was found
	// stalled (ErrNotLeader: their gateways look for the next leader);
	// SoleStallWaits the proposals to sole voters' groups that found it
	// stalled and waited for it, having no other replica to go to
	// (proposeWaiting).
	StallRefusals, SoleStallWaits atomic.Int64
	// QueuedProposals counts the proposals that found the node's lock
	// held under Run and were handed to the scheduler, which proposed
	// them under its own hold of the lock (proposeWaiting).
	QueuedProposals atomic.Int64
}

// noteCommit adds a round's committed batch, its writes and its waits in
// Pebble to the stats.
func (n *Node) noteCommit(b *storage.Batch) {
	n.stats.Commits.Add(1)
	n.stats.CommittedKeys.Add(int64(b.Count()))
	st := b.CommitStats()
	n.stats.StallNanos.Add(int64(st.MemTableWriteStallDuration + st.L0ReadAmpWriteStallDuration))
	n.stats.PublishNanos.Add(int64(st.CommitWaitDuration))
}

// Stats returns the node's counters (their values change as it runs).
func (n *Node) Stats() *RoundStats { return &n.stats }

// proposedLocked records a proposal let into raft at now, whose lock wait
// began at asked. n.mu is held.
// ended is the count of rounds ended when the proposal asked.
func (n *Node) proposedLocked(asked, now time.Time, ended int64) {
	n.stats.Proposals.Add(1)
	n.stats.ProposeLockNanos.Add(int64(now.Sub(asked)))
	n.proposedAt = append(n.proposedAt, proposed{now, ended})
}

// proposed is a proposal no round took yet: when it entered raft, and
// how many rounds had ended when it asked for the lock.
type proposed struct {
	at    time.Time
	ended int64
}

// roundStartedLocked charges the queue time of the proposals waiting for
// this round, which takes them all. n.mu is held.
func (n *Node) roundStartedLocked(now time.Time) {
	var q time.Duration
	// This round is the (started)th; a proposal that asked while round
	// ended+1 ran belongs in round ended+2 at the latest.
	started := n.stats.Rounds.Load() + 1
	for _, p := range n.proposedAt {
		q += now.Sub(p.at)
		if started > p.ended+2 {
			n.stats.ProposalsLate.Add(1)
		}
	}
	n.stats.ProposeQueueNanos.Add(int64(q))
	n.proposedAt = n.proposedAt[:0]
}

// roundTimes are one round's marks: its start (the lock taken), and the
// first pass's commit of the raft state.
type roundTimes struct {
	start, commit, committed time.Time
	synced                   bool
}

// countRound adds a finished round's times to the stats (at its end,
// still under the lock). A round that failed before its commit counts
// its whole time as pre-sync.
func (n *Node) countRound(tm *roundTimes) {
	end := time.Now()
	if tm.commit.IsZero() {
		tm.commit, tm.committed = end, end
	}
	if tm.committed.IsZero() {
		tm.committed = end
	}
	n.stats.Rounds.Add(1)
	if tm.synced {
		n.stats.SyncedRounds.Add(1)
	}
	n.stats.PreSyncNanos.Add(int64(tm.commit.Sub(tm.start)))
	n.stats.SyncNanos.Add(int64(tm.committed.Sub(tm.commit)))
	n.stats.PostSyncNanos.Add(int64(end.Sub(tm.committed)))
}
