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
// Every message between nodes is versioned by numbered fields, so that
// two builds (a rolling upgrade) talk to each other: raft batches (and a
// snapshot stream's header), KV batches, the Hello exchange of
// localities and clock pings are in the protocol buffers wire format
// through package wire (field numbers in struct tags; unknown fields
// skipped, missing ones zero; testdata/*_schema keep every number used),
// raft messages are raft's own protobuf, and the membership methods'
// payloads are JSON objects with named fields (unknown names ignored).
//
// The same server also serves KV batches (Serve with WithKV; kv.go): a
// gateway's kv.DistSender reaches the node holding a tablet through
// NewKVSender, one unary call per kvpb.BatchRequest, in the wire codec
// over the kvpb structs (kvcodec.go). Typed kvpb errors keep their type
// and fields across the wire, so retry logic works unchanged. It costs no
// more time than the positional codec it replaced, which could not tell
// two builds' structs apart (kvcodec.go has the figures).
package rpc

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/wire"
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

// raftBatch is a batch of raft messages on the wire, in the wire codec
// (package wire) so that a later build can add fields; each message is
// raft's own protobuf.
type raftBatch struct {
	Envelopes []raftEnvelope `wire:"1"`
}

type raftEnvelope struct {
	TabletID uint64 `wire:"1"`
	// Msg is the raftpb.Message, marshalled; never nil.
	Msg []byte `wire:"2"`
}

// hello is the Hello exchange's message (geo.go): a node's ID and
// locality.
type hello struct {
	Node     uint64 `wire:"1"`
	Locality string `wire:"2"`
}

// clockReading is a clock ping's answer (clock.go).
type clockReading struct {
	UnixNanos int64 `wire:"1"`
}

// msgCodec carries this package's own messages (the KV ones have
// kvCodec); read-only after init.
var msgCodec = func() *wire.Codec {
	c := wire.NewCodec()
	c.MustRegister(reflect.TypeFor[raftBatch](), reflect.TypeFor[hello](), reflect.TypeFor[clockReading]())
	return c
}()

// encodeBatch appends envs' wire form to dst.
func encodeBatch(dst []byte, envs []raftnode.Envelope) ([]byte, error) {
	rb := raftBatch{Envelopes: make([]raftEnvelope, len(envs))}
	for i, e := range envs {
		m, err := proto.Marshal(e.Msg)
		if err != nil {
			return nil, fmt.Errorf("rpc: encoding a raft message: %w", err)
		}
		if m == nil {
			m = []byte{}
		}
		rb.Envelopes[i] = raftEnvelope{TabletID: e.TabletID, Msg: m}
	}
	return msgCodec.Marshal(dst, &rb)
}

var errCorrupt = errors.New("rpc: corrupt batch")

// decodeBatch is encodeBatch's inverse; malformed input is an error,
// never a panic.
func decodeBatch(b []byte) ([]raftnode.Envelope, error) {
	var rb raftBatch
	if err := msgCodec.Unmarshal(b, &rb); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	out := make([]raftnode.Envelope, 0, len(rb.Envelopes))
	for _, e := range rb.Envelopes {
		if e.Msg == nil {
			// An empty message would read as a MsgHup: refuse it.
			return nil, fmt.Errorf("%w: an envelope without its message", errCorrupt)
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(e.Msg, m); err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		out = append(out, raftnode.Envelope{TabletID: e.TabletID, Msg: m})
	}
	return out, nil
}
