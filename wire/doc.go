// Package wire encodes Go structs in the protocol buffers wire format,
// with the field numbers taken from struct tags (`wire:"3"`), so that two
// builds of Cairn whose message structs differ (a field added, removed or
// moved) still understand each other: the schema of every node-to-node
// message is versioned by its numbered fields, as a .proto file's would be.
//
// It owns the mapping from Go types to the wire format; it knows nothing of
// what the messages mean. Its users (rpc's KV codec, distsql's flow
// messages) build one Codec at init: they register their interface types
// (Union), any type with a hand-written encoding (Custom), and their root
// message types (Register), which checks every struct reachable from them.
//
// The mapping (protobuf's, field by field):
//
//	bool, intN, uintN   varint (signed ones zig-zag, as sint64)
//	string, []byte      length-delimited
//	[N]byte             length-delimited, exactly N bytes
//	struct (embedded    a nested message
//	  ones too), *struct
//	[]T                 a repeated field: one occurrence per element
//	a Union interface   a nested message holding one field, numbered by
//	                    the concrete type's member number
//
// Invariants:
//
//  1. Every field of a registered struct carries a tag `wire:"N"` with N a
//     valid protobuf field number, unique within its struct, or `wire:"-"`
//     for one that never leaves its node; Register refuses a struct with
//     an untagged or unexported field, a duplicate
//     number, or a field of a kind it cannot carry (maps, funcs, channels,
//     interfaces that are neither a Union nor a Custom). A number, once
//     used, is never given to another field: each user keeps a golden
//     schema file that only grows (CheckSchema).
//  2. A field whose number the decoder does not know is skipped; a field
//     absent from the input decodes as its zero value. So a message from a
//     build with more fields, or fewer, decodes.
//  3. A zero scalar, a nil slice or pointer and a zero struct are not sent.
//     A non-nil []byte is sent even when empty, so nil and empty differ
//     across the wire (kvpb relies on it: a nil value is "no value"); a
//     nil and an empty repeated field do not (both decode as nil), nor
//     does a nil element of a [][]byte (it decodes as empty).
//  4. Decoding malformed input returns an error and never panics. A length
//     is never trusted beyond the bytes left, every element of a repeated
//     field takes at least two input bytes, and nesting deeper than
//     MaxDepth is refused, so what a decode allocates is linear in its
//     input.
//  5. A Union member the decoder does not know (a newer build's new
//     request type) is an error wrapping ErrUnknownMember: the message
//     cannot be understood, and saying so beats guessing. A new member
//     must therefore be sent only once the cluster version says every
//     node knows it (package clusterversion).
//
// A Codec is configured at init and read-only afterwards: Marshal and
// Unmarshal are safe for concurrent use.
package wire
