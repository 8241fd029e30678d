package server

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
)

// tabletMetrics appends the node's tablet metrics to /metrics: this
// node's replica and leader counts, per-tablet batch counters and sizes
// (a Prometheus rate() over the counters gives the UI's reads and writes
// per second), node totals of the replicas' other counters, and the
// colocation tablets over --colocation-warn-size at the last check.
func (s *Server) tabletMetrics(w io.Writer) {
	self := int(s.nodeID())
	descs := s.store.Tablets()
	var replicas, leaders int
	var onePC, intents, pushes, deadlocks, lockTimeouts, lockCanceled, lockWaiting, ssts, sstBytes int64
	type tabletLine struct {
		id          uint64
		reads, wrts int64
		size        uint64
	}
	lines := make([]tabletLine, 0, len(descs))
	for _, d := range descs {
		r := s.store.Replica(d.TabletID)
		if r == nil {
			continue
		}
		replicas++
		if _, _, leader := s.placement(d.TabletID); leader == self {
			leaders++
		}
		m := r.Metrics()
		onePC += m.OnePhaseCommits.Load()
		intents += m.IntentsWritten.Load()
		pushes += m.PushesWaited.Load()
		deadlocks += m.DeadlocksBroken.Load()
		lockTimeouts += m.LockTimeouts.Load()
		lockCanceled += m.LockWaitsCanceled.Load()
		lockWaiting += m.LockWaiting.Load()
		ssts += m.SSTsIngested.Load()
		sstBytes += m.SSTBytesIngested.Load()
		size, _ := s.eng.EstimateDiskUsage(d.StartKey, d.EndKey)
		lines = append(lines, tabletLine{uint64(d.TabletID), m.ReadBatches.Load(), m.WriteBatches.Load(), size})
	}
	scalar := func(name, typ, help string, v any) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s{node=\"%d\"} %v\n", name, help, name, typ, name, self, v)
	}
	scalar("cairn_replicas", "gauge", "Tablet replicas on this node.", replicas)
	scalar("cairn_leaders", "gauge", "Tablets whose raft leader is this node (all of them on a single node).", leaders)
	scalar("cairn_tablet_one_phase_commits_total", "counter", "Transactions this node's replicas committed in one phase (no intents).", onePC)
	scalar("cairn_tablet_intents_written_total", "counter", "Intents laid down by this node's replicas.", intents)
	scalar("cairn_tablet_ssts_ingested_total", "counter", "SSTs this node's replicas ingested (AddSSTable: index backfills, sorted bulk loads).", ssts)
	scalar("cairn_tablet_sst_bytes_ingested_total", "counter", "Bytes of the SSTs this node's replicas ingested.", sstBytes)
	scalar("cairn_tablet_pushes_waited_total", "counter", "Pushes that waited in a replica's transaction wait queue.", pushes)
	scalar("cairn_tablet_deadlocks_broken_total", "counter", "Deadlocks broken by this node's replicas.", deadlocks)
	scalar("cairn_tablet_lock_timeouts_total", "counter", "Lock waits on this node's replicas that ran past the waiter's lock_timeout.", lockTimeouts)
	scalar("cairn_tablet_lock_waits_canceled_total", "counter", "Lock waits on this node's replicas ended by the waiter's statement timeout, cancel or disconnect.", lockCanceled)
	scalar("cairn_tablet_lock_waiters", "gauge", "Batches waiting for a lock on this node's replicas now.", lockWaiting)
	sq := s.store.SplitQueueStats()
	scalar("cairn_split_queue_splits_by_size_total", "counter", "Tablets this node split because they exceeded --tablet-split-size.", sq.BySize)
	scalar("cairn_split_queue_splits_by_load_total", "counter", "Tablets this node split because they exceeded --tablet-split-qps.", sq.ByLoad)
	scalar("cairn_split_queue_errors_total", "counter", "Splits the split queue attempted or planned that failed (each backs the tablet off).", sq.Errors)
	gq := s.store.GCQueueStats()
	scalar("cairn_gc_queue_scans_total", "counter", "Tablet scans the GC queue made to plan a collection.", gq.Scans)
	scalar("cairn_gc_queue_runs_total", "counter", "Tablets the GC queue sent GC requests for.", gq.Runs)
	scalar("cairn_gc_queue_versions_removed_total", "counter", "Old versions the GC queue removed.", gq.Versions)
	scalar("cairn_gc_queue_bytes_removed_total", "counter", "Key and value bytes of the versions the GC queue removed.", gq.Bytes)
	scalar("cairn_gc_queue_errors_total", "counter", "GC queue plans and requests that failed.", gq.Errors)
	scalar("cairn_gc_txn_intents_resolved_total", "counter", "Intents of transactions older than the cleanup age that the GC queue resolved after pushing their transaction.", gq.TxnCleanup.IntentsResolved)
	scalar("cairn_gc_txn_records_removed_total", "counter", "Final transaction records the GC queue deleted after resolving their intents.", gq.TxnCleanup.RecordsRemoved)
	scalar("cairn_gc_txn_aborted_total", "counter", "Abandoned transactions the GC queue's pushes aborted.", gq.TxnCleanup.Aborted)
	scalar("cairn_gc_compactions_total", "counter", "Tablet spans the GC queue compacted after removing many versions from them, so reads stop stepping over their tombstones.", gq.Compactions)
	scalar("cairn_gc_rows_repacked_total", "counter", "Rows kept as a packed row plus column entries that GC folded into one packed row, or packed under an older schema version that GC rewrote under the current one.", gq.Repacked)
	scalar("cairn_gc_bulk_loads_swept_total", "counter", "Failed bulk loads whose storage this node's sweep cleared because their transaction ended without clearing it (their process died).", s.gc.bulkSwept.Load())
	scalar("cairn_gc_live_bytes", "gauge", "Bytes of the newest non-deleted version of each key, over the tablets this node leads, as of the GC queue's last scan of each.", gq.LiveBytes)
	scalar("cairn_gc_total_bytes", "gauge", "Bytes of every version, over the tablets this node leads, as of the GC queue's last scan of each (minus what it removed since).", gq.TotalBytes)
	scalar("cairn_colocation_tablets_over_warn_size", "gauge", "Colocation tablets this node leads that were larger than --colocation-warn-size at the last check.", s.colocationOverWarn())
	for _, m := range []struct {
		name, typ, help string
		v               func(tabletLine) any
	}{
		{"cairn_tablet_read_batches_total", "counter", "Read-only batches a tablet's replica on this node evaluated.", func(l tabletLine) any { return l.reads }},
		{"cairn_tablet_write_batches_total", "counter", "Writing batches a tablet's replica on this node evaluated.", func(l tabletLine) any { return l.wrts }},
		{"cairn_tablet_size_bytes", "gauge", "Estimated size on disk of a tablet's span (flushed data).", func(l tabletLine) any { return l.size }},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.typ)
		for _, l := range lines {
			fmt.Fprintf(w, "%s{node=\"%d\",tablet=\"%d\"} %v\n", m.name, self, l.id, m.v(l))
		}
	}
}

// raftMetrics appends the raft scheduler's round and proposal timings
// (raftnode.RoundStats) of a replicated node: the rate of each time
// counter over the rate of its count is the mean cost of that step of a
// replicated write.
func (s *Server) raftMetrics(w io.Writer) {
	if s.repl == nil || s.repl.raft == nil {
		return
	}
	st := s.repl.raft.Stats()
	for _, m := range []struct {
		name, help string
		v          int64
	}{
		{"cairn_raft_proposals_total", "Proposals this node let into raft.", st.Proposals.Load()},
		{"cairn_raft_propose_lock_wait_seconds_total", "Time proposals waited for the raft scheduler's lock (held by a round).", st.ProposeLockNanos.Load()},
		{"cairn_raft_propose_queue_seconds_total", "Time proposals waited in raft for the round that took them.", st.ProposeQueueNanos.Load()},
		{"cairn_raft_proposals_late_total", "Proposals taken by a round later than the one after the round in progress when they asked for the scheduler's lock.", st.ProposalsLate.Load()},
		{"cairn_raft_proposals_handed_over_total", "Proposals that found the raft scheduler's lock held and were let into raft by the scheduler, under its hold of the lock.", st.QueuedProposals.Load()},
		{"cairn_raft_rounds_total", "Raft rounds with work.", st.Rounds.Load()},
		{"cairn_raft_synced_rounds_total", "Raft rounds that synced their raft state.", st.SyncedRounds.Load()},
		{"cairn_raft_round_presync_seconds_total", "Rounds' time before the commit of their raft state (Readies, batch, early sends).", st.PreSyncNanos.Load()},
		{"cairn_raft_round_sync_seconds_total", "Rounds' time committing their raft state (synced or not).", st.SyncNanos.Load()},
		{"cairn_raft_round_postsync_seconds_total", "Rounds' time after that commit under the lock (sends, apply, Advance, second pass).", st.PostSyncNanos.Load()},
		{"cairn_raft_round_observe_seconds_total", "Rounds' observers (answering proposers), outside the lock.", st.ObserveNanos.Load()},
		{"cairn_raft_round_apply_seconds_total", "Rounds' time applying committed entries (part of postsync).", st.ApplyNanos.Load()},
		{"cairn_raft_ingest_seconds_total", "State machines' Apply of entries that ingest an SST, in rounds or workers.", st.IngestNanos.Load()},
		{"cairn_raft_offloaded_applies_total", "Applies done by workers off the rounds (large batches, SST ingestion).", st.OffloadedApplies.Load()},
		{"cairn_raft_offloaded_apply_seconds_total", "Workers' time applying off the rounds, which no round waits for.", st.OffloadedApplyNanos.Load()},
		{"cairn_raft_round_second_pass_seconds_total", "Rounds' second passes (part of postsync).", st.SecondPassNanos.Load()},
		{"cairn_raft_round_compact_seconds_total", "Rounds' log truncation (part of postsync).", st.CompactNanos.Load()},
		{"cairn_raft_round_stall_seconds_total", "Rounds' commits waiting in Pebble's write stalls (memtables, L0).", st.StallNanos.Load()},
		{"cairn_raft_round_publish_seconds_total", "Rounds' commits waiting for publication behind earlier batches, and for the WAL sync.", st.PublishNanos.Load()},
		{"cairn_raft_scheduler_stalls_total", "Times the raft scheduler ran neither a tick nor a round for an election timeout (its shared groups' leases not served meanwhile).", st.SchedulerStalls.Load()},
		{"cairn_raft_stall_refused_proposals_total", "Proposals to groups with other voters that gave up waiting for a stalled raft scheduler (their gateways look for the next leader).", st.StallRefusals.Load()},
		{"cairn_raft_stall_sole_waits_total", "Proposals to groups whose only voter is this node that found the raft scheduler stalled and waited for it (no other replica to go to).", st.SoleStallWaits.Load()},
	} {
		v := float64(m.v)
		if m.name != "cairn_raft_proposals_total" && m.name != "cairn_raft_proposals_late_total" && m.name != "cairn_raft_proposals_handed_over_total" && m.name != "cairn_raft_rounds_total" && m.name != "cairn_raft_synced_rounds_total" && m.name != "cairn_raft_offloaded_applies_total" && m.name != "cairn_raft_scheduler_stalls_total" && m.name != "cairn_raft_stall_refused_proposals_total" && m.name != "cairn_raft_stall_sole_waits_total" {
			v /= 1e9
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %g\n", m.name, m.help, m.name, m.name, v)
	}
	// Pebble's own WAL fsync latency: the round's sync less the commit
	// pipeline's work around it and the scheduler's wake-up after it.
	var h dto.Metric
	if fl := s.eng.Metrics().LogWriter.FsyncLatency; fl != nil && fl.Write(&h) == nil && h.GetHistogram() != nil {
		// Pebble observes it in nanoseconds (FsyncLatencyBuckets).
		fmt.Fprintf(w, "# HELP cairn_store_wal_fsyncs_total Fsyncs of the store's write-ahead log (Pebble's LogWriter).\n# TYPE cairn_store_wal_fsyncs_total counter\ncairn_store_wal_fsyncs_total %d\n", h.GetHistogram().GetSampleCount())
		fmt.Fprintf(w, "# HELP cairn_store_wal_fsync_seconds_total Time in those fsyncs.\n# TYPE cairn_store_wal_fsync_seconds_total counter\ncairn_store_wal_fsync_seconds_total %g\n", h.GetHistogram().GetSampleSum()/1e9)
	}
}
