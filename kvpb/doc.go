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
package kvpb
