// Package distsql runs parts of a statement on the nodes that hold its
// data: the distributed execution layer of issue 17.
//
//	gateway (Flow)                          every node (Server)
//	  PlanScan: span → fragments,             cairn.DistSQL/Flow stream:
//	  one per tablet, on its leaseholder ──▶   Spec → scan the span at the
//	  ◀── row batches (≤ Window unacked) ──    snapshot, batch, wait credit
//	  credit per consumed batch ──────────▶
//
// A Spec either scans KVs (this package reads them) or carries Proc,
// the fragment's SQL, which the node's Processor (sql/exec) runs and
// whose rows travel as opaque encoded rows.
//
// It owns the physical plan (Fragment, Spec), the wire format of the Flow
// stream (wire.go), the service every node registers on its rpc server
// (rpc.WithService) and the gateway side that runs a flow (Flow). It
// calls kv (the node's DB as a kvpb.Sender, its TabletCache and the
// leaseholder cache) and sql/mon; it must not touch pgwire, the session,
// or any store internals, and it does not import sql/exec (exec imports
// it).
//
// Invariants:
//
//  1. Placement is advice, never correctness: a fragment reads its span
//     through its node's KV router, so a stale leaseholder cache makes a
//     fragment slower (one forwarded hop), never wrong.
//  2. Every fragment of a flow reads at the gateway's snapshot: the Spec
//     carries the read timestamp and uncertainty limit, and the remote
//     read runs as a read-only transaction at exactly them, so the store
//     checks uncertainty as it would for the gateway. A read that meets an
//     uncertain value fails retryable (kvpb.TransactionRetryError at the
//     gateway, 40001 to a client), never returns a different snapshot.
//     Fragments do not see the gateway transaction's own uncommitted
//     writes, so only statements of transactions that have written nothing
//     may be distributed (the caller checks).
//  3. Flow control: a fragment has at most Spec.Window batches sent and
//     not yet consumed by the gateway; it waits for a credit before
//     sending another. A slow consumer therefore bounds what is buffered
//     anywhere at Window batches per fragment.
//  4. Memory: every batch the gateway holds is reserved in the flow's
//     mon.Budget from receipt until the consumer takes the next one; a
//     refused reservation fails the flow with 53200.
//  5. One failure stops all: the first error of any fragment (or of the
//     gateway) cancels the flow's context, which cancels every fragment's
//     stream and so every remote scan; Next returns that first error with
//     its SQLSTATE. Cancelling the caller's context (statement_timeout,
//     CancelRequest) does the same. A node that cannot be reached fails
//     the flow retryably and gets no fragments for a while
//     (Gateway.Suspect).
//  6. Batches of one fragment arrive in key order; batches of different
//     fragments interleave in any order (Batch.Fragment says whose).
//  7. Flows nest: a fragment may start a flow of its own through its
//     node's Gateway (a repartitioned join's consumer reads its
//     producers, sql/exec distsql_join.go), under its stream's context,
//     so cancelling the outer flow cancels the inner one, and an inner
//     fragment's error fails the consumer and so the outer flow
//     (invariant 5 across both).
//  8. A fragment of a client's statement names the client's gateway node
//     (Spec.Gateway, from kv.ClientGateway of the flow's context) and its
//     node reads under kv.WithClientGateway, so every batch it sends is
//     counted by the tablet's leaseholder as a request from the client's
//     gateway (store/load.go), never from the node it ran on; a flow
//     nested in a fragment passes the same gateway on. The node's own
//     work (no client) names none and is not counted.
package distsql
