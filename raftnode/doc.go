// Package raftnode is Cairn's multi-raft: every tablet replica on a node is
// one etcd raft group (go.etcd.io/raft/v3 RawNode), and the node drives all
// of them. This first part owns a replica's durable raft state in the
// node's engine (LogStore): its log entries, hard state and the metadata of
// the snapshot the log was truncated at, under the tablet's node-local keys
// (keys.TabletLocal), which are never replicated.
//
// It must not interpret entries (the tablet evaluates and applies the
// write batches they carry) and must not touch replicated or user keys.
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
// # Keys (suffixes of keys.TabletLocal(tabletID, ...))
//
//	rfth              the HardState (term, vote, commit)
//	rfts              the SnapshotMetadata the log starts after: index and
//	                  term of the last entry folded into the state machine
//	                  image, and its ConfState
//	rftc              the ConfState as of the applied index, once a change
//	                  was applied after the snapshot
//	rftl <index BE8>  the entry at index
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
