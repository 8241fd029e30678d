// Package hlc owns Cairn's notion of time: the hybrid logical Timestamp that
// orders every version and transaction, and the Clock each node uses to
// produce them.
//
// Callers: every layer that stamps or compares versions — the kv client's
// transaction coordinator takes Now() for a transaction's read timestamp,
// tablet replicas Update() their clock from every request's timestamp, mvcc
// compares Timestamps. The node wiring implements UpperBoundStore on a
// store-local key. hlc imports nothing from Cairn: it must not touch storage,
// the network or the filesystem directly (persistence goes through the small
// UpperBoundStore interface, and the physical clock is an injected function so
// tests step it by hand).
//
// Invariants:
//
//  1. Clock.Now is strictly increasing across all calls on one Clock,
//     whatever the physical clock does (it may stall or run backwards).
//  2. After Update(r) succeeds, every later Now() is strictly greater than r.
//  3. Update rejects a remote timestamp above the clock whose wall time is
//     more than the maximum offset ahead of the local physical clock with a
//     *ClockOffsetError and leaves the clock unchanged. (One at or below
//     the clock changes nothing and is accepted, even after the physical
//     clock stepped back.)
//  4. With an UpperBoundStore attached (EnsureUpperBound), no Now() hands out
//     a wall time above the persisted bound, and after a restart every Now()
//     is strictly greater than every timestamp handed out before it, even if
//     the physical clock went backwards in between.
//  5. No Now() waits for the store: the next bound is saved in the
//     background, ahead of need, off the clock's mutex; how far ahead,
//     and how early the save starts, grow with the last save's duration
//     (persistState.extraLocked), so a slow disk pins the clock at its
//     first slow saves rather than on every save. While a save is
//     slow, hung (a stalled disk) or failing, the wall time is pinned at
//     the persisted bound and the clock ticks the logical counter there
//     rather than break invariant 4. Only an Update beyond the bound
//     waits for a save, for at most a second, with the mutex released.
//  6. A timestamp handed out while pinned lies behind the physical clock,
//     so a read at it could miss a write another node acknowledged before
//     the read began. CheckPinned recognises the wall times of the last
//     pinned stretch, lock-free, so a gateway refuses to read at one
//     (clockmon.Guard); WaitSaved tells it when the save in flight has
//     ended, after which a fresh reading lies past the pinned stretch and
//     the transaction may restart there.
package hlc
