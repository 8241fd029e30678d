// Package raftnode is Cairn's multi-raft: every tablet replica on a node is
// one etcd raft group (go.etcd.io/raft/v3 RawNode), and the node drives all
// of them. This first part owns a replica's durable raft state in the
// node's engine (LogStore): its log entries, hard state and the metadata of
// the snapshot the log was truncated at, under the tablet's node-local keys
// (keys.TabletLocal), which are never replicated; and the files beside the
// log that hold side-loaded payloads (sideload.go: an SST an entry carries
// is kept in <engine dir>/sideload/t<tablet>/, not in the WAL, under its
// rules S1–S4).
//
// It must not interpret entries (the tablet evaluates and applies the
// write batches they carry, and says which bytes of an entry are a
// payload to side-load: Sideloader) and must not touch replicated or user
// keys.
//
// # Writes go into the caller's batch
//
// LogStore's writing methods (Append, SetHardState, ApplySnapshot, Compact)
// add to a storage.Batch the caller gives them, so that the node's
// scheduler can persist the Ready of many groups with one synced commit.
// They update the store's cached bounds at once; the caller must commit
// the batch before anything reads the store again. That is the contract of
// etcd raft's Ready loop (persist a Ready's entries and hard state, then
// Advance), where every read of raft.Storage happens inside a RawNode call
// made after the previous Ready was persisted.
//
// # The entry cache
//
// Raft hands a Ready's entries to Append and, once they commit (for a
// leader, after they are durable, i.e. in a later Ready), reads them
// back through Entries to apply them, and their terms through Term.
// LogStore keeps the entries appended and not yet applied (at most
// entryCacheBytes per replica; the node calls AppliedTo as it applies)
// and serves those reads from them, so they cost no read of the engine
// and, for a side-loaded entry, no read of its file. Rule, cited by the
// test:
//
//	C1. An entry served from the cache is the entry the log holds at
//	    its index: every change of the log at an index changes the
//	    cache there in the same call (Append drops the cached tail it
//	    replaces; Compact, ApplySnapshot and Destroy drop what they
//	    remove), and an entry the cache does not hold is read from the
//	    engine (TestLogStoreEntryCache).
//
// # The round (Node.ProcessReady)
//
// A round takes the Ready of every group with work, under the node's
// lock, and keeps these invariants (numbered for the tests and comments
// that cite them):
//
//  1. Group commit: the round's raft state of every group (entries, hard
//     states, snapshots) goes into one batch, committed with one sync
//     when any of it must be durable (raft.MustSync, or a snapshot), so a
//     node pays one sync per round however many of its tablets wrote.
//  2. A committed entry is applied, with its applied index in the same
//     batch, only after the round's raft state is committed, so the
//     applied index never passes the durable log.
//  3. A message that promises durability (raft's msgsAfterAppend: an
//     acknowledgement of an append, MsgAppResp, and the votes, MsgVoteResp
//     and MsgPreVoteResp) goes out only after that commit, and so does a
//     snapshot (made from the applied state); every other message (a
//     leader's appends and heartbeats, a candidate's vote requests) goes
//     out before it, so followers sync a leader's entries while the
//     leader syncs them (Raft thesis §10.2.1; sendsBeforeSync). This is
//     safe because raft counts the leader's own copy of an entry, and a
//     candidate's own vote, only at Advance, after the sync: an entry
//     commits before its leader's sync only on a quorum of followers'
//     durable copies (TestAppendsLeaveBeforeTheSync, and TestSimulation's
//     crashes in the middle of a round).
//  4. Raft reads its storage (LogStore) only in RawNode calls made after
//     the previous round's commit: the lock is held from Ready to the
//     commit of the round's raft state, so no step or proposal runs
//     while it is being persisted.
//  5. A large apply leaves the round (apply.go): a group's committed
//     entries of one Ready whose data add up to Config.ApplyOffloadBytes
//     (64 KiB), or one of which ingests an SST (BatchSplitter), and
//     among which there is no configuration change (applied to the
//     RawNode, under the lock) and no snapshot, are applied by a worker,
//     outside the node's lock, at most Config.ApplyWorkers at once. The
//     worker starts after the round committed the group's raft state and
//     commits the entries' effects with their applied index in a batch of
//     its own, split where BatchSplitter asks as in the round (invariant
//     2 holds per group). The group's Ready is advanced, and its applied
//     index moved, by the first round after that commit; until then no
//     round takes the group's next Ready, so a group's entries are
//     applied one at a time in log order, while steps, ticks and
//     proposals go on into its RawNode (raft allows them between Ready
//     and Advance) and every other group's rounds go on: a bulk batch of
//     one tablet holds neither the node's lock nor another tablet's
//     heartbeats (TestSlowApplyHoldsNoOtherGroup), and the large applies
//     of several tablets run side by side.
//  6. A group's Apply and its observer never overlap and keep log order:
//     Applied reports a group's entries after the batch holding them
//     committed, and before that group's next offloaded apply starts
//     (ProcessReady starts a round's workers after its observers).
//     Different groups' Apply and observers may run at once, so a
//     StateMachine's Apply touches only its own replica's state and
//     keys (the tablet's does: its keys, its list of applied commands,
//     the engine's ingestion).
//  7. Nothing writes a removed replica's state: RemoveReplica cancels
//     its offloaded apply not yet started and waits for one running; the
//     round drops a finished apply of a replica no longer there, whose
//     entries are not observed.
//  8. A held group keeps its leader: while a worker applies its entries
//     (invariant 5) the group's own queued messages wait in its Ready,
//     so the node sends for it, outside the round, a leader's heartbeat
//     to every other voter each tick, and a follower's answer to its
//     leader's heartbeat (heldbeat.go). Both carry no durability promise
//     (invariant 3 sends them before the sync anyway); without them an
//     apply longer than an election timeout on every replica, as a bulk
//     batch is, cost the group its leader and lease
//     (TestHeldApplyKeepsLeadership).
//  9. A stalled scheduler serves no lease: when the node's scheduler has
//     run neither a tick nor a round for longer than an election timeout
//     (Node.Stalled: a round held in a sync on a disk that stopped
//     answering, a Pebble write stall, the process stopped), a replica
//     of a group with another voter reports no lease and no leader hint
//     naming itself (servableLease), and a proposal still waiting for the
//     node's lock (or handed to the scheduler and not yet taken) gives up
//     unproposed (proposeWaiting, ErrNotLeader; a ProposeHanded proposal
//     is refused so by the stall watcher, refuseHandedStalled), so
//     requests go to the replicas that elect the next leader instead of
//     waiting for the disk or for the disk-stall fence to end the
//     process. The lease term is kept: once the scheduler runs again the
//     replica serves under it unless a round finds it lost. Safety does
//     not rest on this (writes commit through raft, reads need the read
//     lease or a confirmed heartbeat round); a sole voter keeps its lease
//     (TestStalledLeaderServesNoLease), and its proposals wait for the
//     lock however long the stall lasts, or until their proposer gives
//     up (ErrProposerGone, unproposed: a cancelled statement is not left
//     waiting on the disk; TestStalledSoleVoterProposes): no other
//     replica can take them, and a refusal came back to the
//     same replica until the gateway gave up ("no leaseholder found
//     within 10s" on a cluster of one whose syncs outlasted an election
//     timeout). Each time the watcher finds the
//     scheduler stalled it counts it (RoundStats.SchedulerStalls,
//     /metrics cairn_raft_scheduler_stalls_total), so a stall with no
//     disk fault behind it (a starved CPU, a long round) shows, and
//     each proposal that gave up or, to a sole voter, waited through
//     one (StallRefusals, SoleStallWaits).
//  10. A hard state that differs from the one last written in its commit
//     index alone is not written (commitOnly; raft.MustSync does not ask
//     for it either): a round's second pass had one for each group it
//     applied, a write and an engine commit of their own every round.
//     The written commit index may so lag the applied index, and the
//     log's open raises it to the applied index (LogStore.RaiseCommit:
//     every applied entry was committed, and raft refuses an applied
//     index past its commit); raft relearns the rest from its leader, or
//     as a sole voter by committing its new term's first entry
//     (TestRestartPastWrittenCommit). A term or vote, and any hard state
//     of a Ready with a snapshot, is written as before. A round's
//     batches are write-only, and its apply batch records a group's
//     applied index once, after its last entry (or before a split's
//     commit): a sole voter's round of one proposal is 2 engine commits
//     and 3 writes besides the truncation's (TestRoundWrites; 3 and 4
//     before).
//
// A round therefore waits for the apply of small writes only (OLTP
// writes: microseconds each, and handing them to a worker would make
// their proposer wait for the next round's sync as well), and a replica's
// applied index (Replica.Applied) can lag its engine state while a worker
// applies.
//
// # Why a round is not pipelined
//
// A proposal that arrives while a round syncs waits for the node's lock
// (invariant 4), i.e. for the rest of that sync, and then for its own
// round's: under pgbench's simple-update with 4 clients 1.8–2 syncs per
// commit. Etcd raft's AsyncStorageWrites (or releasing the lock
// during the sync) would let the next round's append start while the
// last one syncs, but both rounds commit through the engine's one WAL,
// and Pebble's log writer runs one fdatasync at a time: the next append
// would wait at the WAL for the same rest of the same sync. Measured
// (Stats, bench/pgbench/commit_path.sh; bench/README.md, "Issue 22,
// 2026-11-30 (branch h-raftpipe)"): of a round's time the sync is
// 91–97%, and Pebble's own fdatasync 94–97% of that; the round's work
// around it (Readies, sends, apply, Advance, the second pass, the
// observers) is 40–65 µs; a proposal's time in raft before its round
// starts is 11–33 µs. A pipelined round could save that, not a sync.
// What could save a sync is a log whose syncs overlap (this disk runs
// fdatasyncs of one file side by side: bench/walsync), which Pebble's
// WAL is not.
//
// What a round can do for the proposals that wait for it is take them
// all: a proposal that finds the lock held under Run is handed to the
// scheduler (Node.proposeWaiting), which lets it into raft before the
// round releases the lock, so the next round takes it. Each used to wait
// for the lock and take it in turn once the round ended, while the
// scheduler's next round competed for it; under pgbench's simple-update
// at scale 10 with 16 clients 16–26% of the proposals lost (RoundStats.
// ProposalsLate) and waited out that next round's sync as well, and the
// wait for the lock averaged 1.3–1.6 rounds. Handed over: 0.0% late,
// 0.7–0.9 of a round (TestWaitingProposalsJoinTheNextRound; bench/README.md,
// "Issue 22, twenty-second session: the proposals that wait for a round").
//
// A proposer that learns its outcome elsewhere (the tablet waits for its
// entry's apply) hands its proposal over with ProposeHanded and is not
// woken when the scheduler proposes it: only a refusal (the scheduler's,
// or the stall watcher's for a group with another voter) is sent to it,
// through its Refuser, and a proposal is either proposed or refused,
// never both; a proposer that gives up withdraws it if not yet taken
// (Handoff.Withdraw), else its outcome is unknown, as for any proposal in
// raft (TestHandedProposalsWaitForNoLock,
// TestHandedProposalsRefusedOnStall). Each woken proposer used to wait for
// a CPU, run for microseconds and wait again for the apply (bench/README.md,
// "Issue 22, twenty-fifth session: the commit's END").
//
// # Keys (suffixes of keys.TabletLocal(tabletID, ...))
//
//	rfth              the HardState (term, vote, commit; the commit as of
//	                  the last change of term or vote: invariant 10)
//	rfts              the SnapshotMetadata the log starts after: index and
//	                  term of the last entry folded into the state machine
//	                  image, and its ConfState
//	rftc              the ConfState as of the applied index, once a change
//	                  was applied after the snapshot
//	rftl <index BE8>  the entry at index (a side-loaded one's record: a 0
//	                  byte, the payload's place, length and CRC-32C, then
//	                  the entry without it; sideload.go)
//	rfto <index BE8>  the term of the side-loaded entry at index (its
//	                  file's name), for the open's check of the files
//	rftx              present once another node may have led the group
//	                  (LogStore.Shared: its leases wait out the clock
//	                  offset even with one voter)
//
// In the tablet's replicated state (keys.TabletReplicated(tabletID, ...)),
// rfta holds the applied index: 8 bytes big endian, preceded from cluster
// version 1.1 by a format version byte (node.go, putApplied).
//
// And one store-local key per tablet (keys.StoreLocal): snapi <tablet BE8>,
// the intent of a streamed snapshot being applied (snapshot.go), whose
// image is ingested between the intent and the raft state.
package raftnode
