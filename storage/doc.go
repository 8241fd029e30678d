// Package storage owns the node's single Pebble instance and the encoding of
// MVCC keys inside it. Every replica on a node reads and writes through it.
//
// It knows nothing of transactions, intents, tablets or SQL: it stores
// versioned keys and plain (unversioned) keys, in batches that commit
// atomically and durably. mvcc builds versions and intents on top of it;
// tablet and raftnode decide what to write. It imports hlc (for Timestamp)
// and Pebble, nothing else of Cairn.
//
// Files, one concern each:
//
//	mvcckey.go   MVCCKey, its encoding, and the Pebble Comparer
//	engine.go    Open, Engine, the Reader/Writer interfaces, Ingest, sizes
//	batch.go     Batch (atomic, synced writes) and Snapshot
//	iterator.go  Iterator over engine keys within user-key bounds
//	reuse.go     ReusingReader: one iterator walks a batch's scans forward
//	iterpool.go  closed engine iterators kept for the next read until a write
//	sst.go       SSTWriter: SSTs built outside the engine, for Ingest
//	sst_mem.go   SSTBuilder: SSTs built in memory, sent as bytes, checked
//	             (CheckSSTPoints), cut (CutSST) and ingested (IngestBytes,
//	             or IngestFile for an SST already in a file: hard-linked)
//	fatal.go     how a failing disk fails the engine instead of the process
//	profile.go   storage profiles (ssd, hdd, object-store) and auto-detection
//	readahead.go SSTs read in order are read ahead in windows sized by the profile
//	prefetch.go  a whole-span scan's files read ahead whole, in key order
//	walfill.go   WAL files written with zeros before use, so syncs overwrite
//	simfs/       a vfs.FS that simulates disk latency, faults and counts I/O
//
// Engine keys. A user key k with timestamp t is stored as
//
//	k 0x00 wall(8, big-endian) logical(4, big-endian) 0x0d
//
// and an unversioned key as k 0x00. The trailing byte is the suffix length
// (13 for a version, absent for a bare key) and the 0x00 sentinel belongs to
// the prefix, so Comparer.Split returns len(k)+1 and the prefix is what bloom
// filters and prefix iteration key on.
//
// Invariants:
//
//  1. Engine keys order by user key (bytewise), then the bare key, then
//     versions newest first. Iterating forward over one user key therefore
//     meets its unversioned entry (if any) and then its versions from newest
//     to oldest.
//  2. A Batch commits atomically; unless the engine was opened with Options.NoSync it is
//     durable before Commit returns. Concurrent synced commits share fsyncs
//     (Pebble's commit pipeline groups them); TestGroupCommit measures it.
//  3. Iterator bounds are user keys: LowerBound is inclusive of all of its
//     versions, UpperBound excludes all of its versions.
//  4. Memory returned by UnsafeKey and UnsafeValue is valid only until the
//     iterator moves; callers copy what they keep.
//  5. A write is acknowledged only when durable: if the disk fails under a
//     commit, Commit returns an error wrapping ErrEngineFailed, and from then
//     on the engine refuses every write and every new read (the failed write
//     may sit unacknowledged in a memtable) until it is reopened.
//  6. An SST built by SSTWriter or SSTBuilder is ingested atomically and
//     shadows what the engine held for the same keys, memtable included;
//     its range deletions remove older data in their spans but not the
//     SST's own entries.
//  7. An iterator from Engine.NewIter sees every write whose Commit (or
//     Ingest, or ApplyBatchRepr) returned before NewIter was called, as a
//     new Pebble iterator would, although it may be a pooled one opened
//     earlier: one is handed out again only while no write has begun
//     since it was opened, and it was opened while none was in flight
//     (iterpool.go). Every write to the engine goes through those calls;
//     nothing above storage writes through DB().
//  8. With Options.WALFill a WAL file Pebble creates (or recycles, when
//     shorter) is one already written with zeros to that size whenever a
//     filled spare is ready, so a synced commit overwrites written blocks
//     and its fdatasync does not commit a change of the file's size
//     (walfill.go). The zeros are written off the commit path (a spare,
//     made ahead; only the WAL of an opening engine is filled in place):
//     no commit waits for them. Pebble reads the zeros as the log's end
//     and recovers what invariant 2 made durable
//     (TestWALFilledBeforeWrites).
//  9. An iterator from a batch of Engine.NewReusingBatch sees every write
//     made to the batch before NewIter was called, within its bounds, as
//     one from NewBatch does; of the engine, it may see only what an
//     earlier iterator of the batch saw when it was built (it may be that
//     one, reused), so such a batch is for reads no other writer may
//     change meanwhile (a tablet's evaluation under its latches)
//     (TestReusingBatch).
//  10. On the OS's file system a WAL file syncs as a Linux AIO fdatasync
//     (or fsync) request whose completion the syncing goroutine waits
//     for in Go's poller, holding no P (pollsync.go); SyncData returns
//     only once the request completed, with its error, so invariants 2
//     and 5 hold as with the plain call, which a kernel without AIO
//     gets (TestPollSyncEngineWAL, TestPollSyncFileErrors,
//     TestPollSyncPlainFallback).
package storage
