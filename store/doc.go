// Package store holds one node's tablets over one storage engine: it opens
// (or bootstraps) them from the tablet directory, routes each batch to its
// tablet, answers directory lookups for the kv router, splits tablets
// (splitqueue.go) and collects their old versions (gcqueue.go).
//
// Callers: the node (server) opens a Store and serves it as a kvpb.Sender;
// the kv client's router calls LookupTablet and Send. The store calls the
// tablet package for everything that happens inside a tablet and storage
// for the directory; it never evaluates a request itself.
//
// Invariants:
//
//  1. The directory (keys.Directory(EndKey) → descriptor, bare keys) is the
//     persisted truth about which tablets exist: Open loads exactly the
//     tablets it lists, and LookupTablet reads it through the engine.
//  2. On a store that holds every tablet (no raft membership), the
//     directory tiles [keys.Min, keys.Max): descriptors do not overlap
//     and leave no gap (Open checks it). Bootstrap writes one tablet over
//     all of it; a split replaces one entry by two in one synced batch. A
//     member of a larger cluster lists only what its own replicas wrote,
//     so its lookups can miss a key whose replica is elsewhere or just
//     moved away (LocalTablet; the intent resolver then routes by key).
//  3. Tablet IDs are never reused: the next ID is a store-local counter
//     persisted before a split uses it (under raft it comes from a
//     replicated counter, reserved 64 at a time; IDs of a block a store
//     does not use are skipped). Splits are not serialised store-wide:
//     a split latches its whole tablet, and one that finds its tablet
//     split meanwhile re-routes.
//  4. Send never evaluates a batch on a tablet that does not hold all its
//     keys: the replica re-checks under latches and answers
//     *kvpb.TabletKeyMismatchError, which the store retries only when it
//     routed by key (TabletID zero) and a split changed the tablet.
//  5. The GC queue only sends GC requests, through Send, to tablets this
//     store leads, at a threshold no higher than now − TTL and the
//     protected timestamp; what it removes is decided again by the
//     leaseholder under latches (mvcc.GC), so a stale plan removes less,
//     never more.
//  6. A tablet's request counts by gateway (load.go) are its
//     leaseholder's view: only the replica holding the lease counts a
//     batch, and a node forgets a tablet's counts when it sees the lease
//     gone (LeaseBalancer.track), so a lease that comes back is judged by
//     requests it served in its new term only. Each node's LeaseBalancer
//     moves only leases it holds.
//  7. A request's context ends when its caller's does or when the store
//     closes, and Close waits for every request in flight (begin, end).
//     Routing a request asks nothing of its caller's context but its
//     values and error: no Done channel is made for a cancellable one
//     unless the request waits (stopctx.go), and one sent with
//     context.Background() allocates nothing (TestBeginAsksNoDone). A
//     request that waits hooks onto a caller's context that offers
//     AfterFunc (pgwire's statement context) without asking it for Done
//     either (TestReqCtxDoneHooksCaller).
//     Registering and ending a request is one atomic add each on the
//     store's in-flight count, whose top bit Close sets: no lock
//     (TestSendTakesNoStoreLock, TestCloseDrainsInFlight).
//  8. Routing a batch to its replica (Replica, replicaForKey) takes no
//     lock: it reads a copy of the replica map that every change to the
//     map (under the store's mutex) replaces whole, so a batch sees the
//     map as of the last registration or removal before it, as under a
//     read lock (TestSendTakesNoStoreLock). A copy's scan that finds no
//     replica for a key is repeated on the newer copy when one was
//     published meanwhile: a split publishes its right side before it
//     shrinks the left, so only a copy still the newest after its scan
//     may answer "no tablet" (TestConcurrentSplits).
package store
