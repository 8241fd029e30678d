package rpc

// The KV service: a node serves kvpb batches to other nodes (the gateway's
// kv.DistSender sends a batch to the node holding its tablet) on the same
// gRPC server as raft, as one unary call per batch whose request and reply
// are encoded by kvcodec.go.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

const (
	kvServiceName = "cairn.KV"
	kvMethodName  = "Batch"
	kvFullMethod  = "/" + kvServiceName + "/" + kvMethodName
)

// ServeOption configures Serve.
type ServeOption func(*serveConfig)

type serveConfig struct {
	kv kvpb.Sender
	// methods are the node-service methods (node.go).
	methods map[string]MethodHandler
	geo     *Geography
	clock   func() int64
	faults  *Faults
	creds   *Creds
	// services are extra gRPC services (WithService).
	services []extraService
}

// WithKV makes Serve also serve KV batches, sending each to s (the node's
// store).
func WithKV(s kvpb.Sender) ServeOption {
	return func(c *serveConfig) { c.kv = s }
}

// kvService is the handler type gRPC checks the implementation against.
type kvService interface {
	batch(ctx context.Context, req []byte) ([]byte, error)
}

type kvServer struct{ s kvpb.Sender }

// batch decodes a request, sends it to the local store and encodes its
// answer. The store's error travels inside the reply, not as a gRPC
// status: a gRPC error means the call itself failed.
func (k *kvServer) batch(ctx context.Context, req []byte) ([]byte, error) {
	ba, err := decodeBatchRequest(req)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "rpc: decoding a KV batch: %v", err)
	}
	br, serr := k.s.Send(ctx, ba)
	out, err := encodeReply(nil, br, serr)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "rpc: encoding a KV reply: %v", err)
	}
	return out, nil
}

var kvServiceDesc = grpc.ServiceDesc{
	ServiceName: kvServiceName,
	HandlerType: (*kvService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: kvMethodName,
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			out, err := srv.(kvService).batch(ctx, in)
			if err != nil {
				return nil, err
			}
			return &out, nil
		},
	}},
}

// KVSender sends batches to one node's KV service. It implements
// kvpb.Sender; its connection is made on first use and kept.
type KVSender struct {
	t      *Transport
	nodeID uint64

	mu   sync.Mutex
	conn *grpc.ClientConn
}

// NewKVSender returns a sender to node nodeID, resolved through t's
// configuration. Close releases its connection.
func NewKVSender(t *Transport, nodeID uint64) *KVSender {
	return &KVSender{t: t, nodeID: nodeID}
}

// Close closes the connection, if one was made.
func (s *KVSender) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

func (s *KVSender) getConn() (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn, nil
	}
	addr, err := s.t.cfg.Resolve(s.nodeID)
	if err != nil {
		return nil, fmt.Errorf("resolving node %d: %w", s.nodeID, err)
	}
	conn, err := grpc.NewClient(addr,
		s.t.cfg.Creds.dialOption(),
		grpc.WithStatsHandler(sentTracker{}),
		// A restarted node must be reachable again within seconds, not
		// after gRPC's default backoff of up to two minutes: while the
		// connection is down every batch fails at once as a routing error.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName), grpc.MaxCallSendMsgSize(MaxBatchSize), grpc.MaxCallRecvMsgSize(MaxBatchSize)))
	if err != nil {
		return nil, err
	}
	if err := s.t.cfg.Geo.exchange(context.Background(), conn, s.nodeID); err != nil {
		_ = conn.Close()
		return nil, err
	}
	s.conn = conn
	return conn, nil
}

// notSent reports a batch that certainly did not reach the node: a routing
// error (a *kvpb.TabletNotFoundError in the chain), so the DistSender
// evicts its cache entry and retries elsewhere.
func (s *KVSender) notSent(ba *kvpb.BatchRequest, err error) error {
	return fmt.Errorf("rpc: node %d unreachable: %v: %w", s.nodeID, err, &kvpb.TabletNotFoundError{TabletID: ba.TabletID})
}

// Send sends ba to the node and returns its answer; a typed kvpb error
// from the remote store comes back with its type. Cancelling ctx cancels
// the remote call (ctx's error is returned). A failure before the batch
// was sent (the node cannot be resolved or connected to) is a routing
// error; a failure once it may have been sent is a
// *kvpb.AmbiguousResultError for a batch that writes, and a routing error
// for a read-only one (re-reading is harmless).
func (s *KVSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	if s.t.cfg.Faults.IsCut(s.nodeID) {
		return nil, s.notSent(ba, ErrCut)
	}
	s.t.countKV(ba.TabletID)
	req, err := encodeBatchRequest(nil, ba)
	if err != nil {
		return nil, err
	}
	conn, err := s.getConn()
	if err != nil {
		return nil, s.notSent(ba, err)
	}
	// Wait until the connection is up, so that a node that is down is
	// told apart from a call that failed midway.
	if err := waitReady(ctx, conn); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.notSent(ba, err)
	}
	// Simulated geography: the batch travels to the node and its answer
	// back, each paying the one-way delay (geo.go). Nothing is sent before
	// the first half has passed, so a cancellation then is not ambiguous.
	delay := s.t.cfg.Delay
	oneWay := time.Duration(0)
	if delay != nil {
		oneWay = delay(s.nodeID)
	}
	if err := sleepCtx(ctx, oneWay); err != nil {
		return nil, err
	}
	var reply []byte
	var sent atomic.Bool
	if err := conn.Invoke(context.WithValue(ctx, sentKey{}, &sent), kvFullMethod, &req, &reply); err != nil {
		if ctx.Err() == nil && status.Code(err) == codes.DeadlineExceeded {
			// The node's copy of this call's deadline (gRPC sends it
			// along) can end the call a moment before ctx's own timer
			// fires; the statement's timeout it is, not an ambiguous
			// write (TestLockWaitEndsAcrossNodes once got 40003 where
			// statement_timeout must answer 57014).
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < deadlineSkew {
				<-ctx.Done()
			}
		}
		if ctx.Err() != nil {
			// A cancelled write may still have been applied; the caller
			// that cancelled does not wait to find out.
			return nil, ctx.Err()
		}
		if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
			return nil, fmt.Errorf("rpc: node %d refused the batch: %w", s.nodeID, err)
		}
		if !sent.Load() || ba.IsReadOnly() {
			return nil, s.notSent(ba, err)
		}
		return nil, &kvpb.AmbiguousResultError{Cause: fmt.Errorf("rpc: batch to node %d: %w", s.nodeID, err)}
	}
	if err := sleepCtx(ctx, oneWay); err != nil {
		// The batch was served; its answer is "still on the wire".
		if ba.IsReadOnly() {
			return nil, err
		}
		return nil, &kvpb.AmbiguousResultError{Cause: fmt.Errorf("rpc: batch to node %d: %w", s.nodeID, err)}
	}
	br, rerr, err := decodeReply(reply)
	if err != nil {
		return nil, fmt.Errorf("rpc: decoding the reply of node %d: %w", s.nodeID, err)
	}
	return br, rerr
}

// deadlineSkew bounds how much sooner than the caller a node may see
// the caller's deadline pass: within it, a DeadlineExceeded from the
// node is the caller's own deadline.
const deadlineSkew = 250 * time.Millisecond

// sentKey is the context key of the *atomic.Bool that sentTracker sets
// once a call's headers go out on a connection: before that the node
// cannot have seen the batch.
type sentKey struct{}

// sentTracker is a client stats handler that marks a call as sent.
type sentTracker struct{}

func (sentTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (sentTracker) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (sentTracker) HandleConn(context.Context, stats.ConnStats) {}
func (sentTracker) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutHeader); ok {
		if b, ok := ctx.Value(sentKey{}).(*atomic.Bool); ok {
			b.Store(true)
		}
	}
}

// errNotReady: the connection went into TRANSIENT_FAILURE (the node does
// not accept connections).
var errNotReady = errors.New("connection failed")

// waitReady waits until conn is READY, failing as soon as it is in
// TRANSIENT_FAILURE or ctx is done.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		st := conn.GetState()
		switch st {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return fmt.Errorf("%w (%s)", errNotReady, st)
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, st) {
			return ctx.Err()
		}
	}
}

// NodeSenders hands out the KV sender to each node of a cluster: local for
// this node (its store, no RPC), and one KVSender per other node, made on
// first use and kept. It is what a gateway's kv.LeaseholderSender sends
// through. Safe for concurrent use.
type NodeSenders struct {
	t     *Transport
	self  uint64
	local kvpb.Sender

	mu sync.Mutex
	m  map[uint64]*KVSender
}

// NewNodeSenders returns the senders of node self, whose own store is
// local.
func NewNodeSenders(t *Transport, self uint64, local kvpb.Sender) *NodeSenders {
	return &NodeSenders{t: t, self: self, local: local, m: map[uint64]*KVSender{}}
}

// Sender returns the sender to node id.
func (s *NodeSenders) Sender(id uint64) kvpb.Sender {
	if id == s.self {
		return s.local
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.m[id]
	if ks == nil {
		ks = NewKVSender(s.t, id)
		s.m[id] = ks
	}
	return ks
}

// Close closes every KVSender's connection.
func (s *NodeSenders) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ks := range s.m {
		_ = ks.Close()
	}
}
