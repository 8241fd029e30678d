// Package kvpb defines the one request shape that flows from the KV client
// to a tablet: a BatchRequest of typed requests under one Header, answered by
// a BatchResponse or a typed error. It also holds the transaction types
// (TxnMeta, Transaction) and tablet descriptors that both sides share.
//
// It is a vocabulary package: no logic beyond accessors, classification of
// errors and String methods. Every layer from kv down to tablet imports it;
// it imports only hlc and keys.
//
// Invariants:
//
//  1. A BatchRequest addressed to one tablet is evaluated atomically: either
//     every request succeeds and the BatchResponse holds one response per
//     request, in order, or the batch fails with one error and writes nothing.
//  2. Requests in a batch carry no timestamps of their own: reads and writes
//     happen at Header.Timestamp, or for a transaction at its ReadTimestamp
//     (reads) and WriteTimestamp (writes).
//  3. Errors returned by Send are values of the types in errors.go (possibly
//     wrapped); callers classify them with errors.As, never by message.
//  4. Every field of a type that travels between nodes carries a wire
//     field number (`wire:"N"`, package wire; rpc's KV codec). A number
//     is never changed or given to another field, even after its field is
//     removed (rpc/testdata/kv_schema keeps them all): a new field takes
//     the next unused number, so nodes of two builds understand each
//     other during a rolling upgrade.
package kvpb
