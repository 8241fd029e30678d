// Package rpc carries messages between Cairn nodes over gRPC: today the
// raft messages of every group (raftnode.Envelope), batched per
// destination node on one long-lived stream, with an optional injected
// one-way delay per destination for simulated geography (DESIGN §7).
//
// It owns the wire format of a batch and the connection management
// (dial, stream, reconnect, drop when a peer is slow or down: raft
// retransmits); it must not interpret the messages it carries, nor know
// about tablets beyond their IDs.
//
// Every connection this package serves or dials uses the node's Creds
// (creds.go): mutual TLS with node certificates of the cluster's CA on a
// secure node, plaintext on an insecure one; no dial of this package goes
// without them, so no call of a secure node goes out in clear by
// omission. A client of an extra service (WithService) dials with the
// node's Creds.DialOptions; the package-level DialOptions is plaintext,
// for insecure clusters only.
//
// No generated protobuf code is needed: a batch is encoded by this package
// (encodeBatch) and travels as raw bytes through a gRPC codec registered
// under the content subtype "cairn-raw".
//
// The same server also serves KV batches (Serve with WithKV; kv.go): a
// gateway's kv.DistSender reaches the node holding a tablet through
// NewKVSender, one unary call per kvpb.BatchRequest. Its wire format
// (kvcodec.go) is a hand-written codec driven by reflection over the kvpb
// types, chosen over encoding/gob because gob refuses kvpb's empty
// response structs and loses the nil/empty []byte distinction kvpb relies
// on. Measured on a 100-PutRequest batch (encode+decode, 2 shared cores):
// this codec 41 µs, 38 KB allocated in 317 allocations, 5.6 KB on the
// wire; gob with a fresh Encoder/Decoder per message (a unary call)
// 131 µs, 97 KB in 1242 allocations, 8.5 KB. Typed kvpb errors keep their
// type and fields across the wire, so retry logic works unchanged.
package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/raftnode"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

// codecName is the gRPC content subtype of Cairn's raw-bytes messages.
const codecName = "cairn-raw"

// rawCodec passes *[]byte messages through unchanged.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rpc: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rpc: cannot unmarshal into %T", v)
	}
	*b = slices.Clone(data)
	return nil
}

func (rawCodec) Name() string { return codecName }

func init() { encoding.RegisterCodec(rawCodec{}) }

// MaxBatchSize bounds one encoded batch (and so what a peer can make this
// node allocate for one message): a raft batch, a KV batch, a frame of a
// snapshot stream. A variable only so that tests can lower it (before
// they open servers and transports, which read it then) to show what
// does not fit in a message; 64 MiB otherwise.
var MaxBatchSize = 64 << 20

// encodeBatch appends envs as: count, then per envelope its tablet ID and
// the length-prefixed protobuf of its message (all uvarints).
func encodeBatch(dst []byte, envs []raftnode.Envelope) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(envs)))
	for _, e := range envs {
		m, err := proto.Marshal(e.Msg)
		if err != nil {
			return nil, fmt.Errorf("rpc: encoding a raft message: %w", err)
		}
		dst = binary.AppendUvarint(dst, e.TabletID)
		dst = binary.AppendUvarint(dst, uint64(len(m)))
		dst = append(dst, m...)
	}
	return dst, nil
}

var errCorrupt = errors.New("rpc: corrupt batch")

// decodeBatch is encodeBatch's inverse; malformed input is an error,
// never a panic.
func decodeBatch(b []byte) ([]raftnode.Envelope, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errCorrupt
	}
	b = b[k:]
	out := make([]raftnode.Envelope, 0, n)
	for range n {
		tablet, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errCorrupt
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errCorrupt
		}
		b = b[k:]
		m := &pb.Message{}
		if err := proto.Unmarshal(b[:size], m); err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		b = b[size:]
		out = append(out, raftnode.Envelope{TabletID: tablet, Msg: m})
	}
	if len(b) != 0 {
		return nil, errCorrupt
	}
	return out, nil
}
