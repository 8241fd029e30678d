package distsql

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"google.golang.org/grpc"
)

const (
	serviceName = "cairn.DistSQL"
	flowMethod  = "Flow"
	fullMethod  = "/" + serviceName + "/" + flowMethod
)

// Server runs the fragments other nodes' gateways send this node. It is
// safe for concurrent use: each Flow stream is one fragment.
type Server struct {
	node   atomic.Uint64
	sender kvpb.Sender
	proc   atomic.Pointer[processorBox]
	// named are the processors of Spec.Processor names other than "".
	named sync.Map // string → Processor

	// What Metrics reports.
	active, blocked, batches atomic.Int64
}

// Metrics are a server's gauges and counters: fragments running,
// fragments waiting for a credit (invariant 3), batches sent in all.
type Metrics struct {
	Active, Blocked, Batches int64
}

// Metrics returns the server's current figures.
func (s *Server) Metrics() Metrics {
	return Metrics{Active: s.active.Load(), Blocked: s.blocked.Load(), Batches: s.batches.Load()}
}

// NewServer returns the server of node nodeID, reading through sender
// (the node's KV router, so invariant 1 holds).
func NewServer(nodeID uint64, sender kvpb.Sender) *Server {
	s := &Server{sender: sender}
	s.node.Store(nodeID)
	return s
}

// Processor runs a fragment's SQL (Spec.Proc) over its span at its
// snapshot, handing emit batches of at most spec.BatchRows encoded rows;
// emit blocks for flow control (invariant 3) and fails once the gateway
// is gone. sql/exec implements it; a server without one refuses Specs
// with Proc (0A000), so a gateway never gets a wrong answer from it.
type Processor interface {
	Run(ctx context.Context, spec Spec, emit func(rows [][]byte) error) error
}

type processorBox struct{ p Processor }

// SetProcessor installs the node's Processor (set once the node's SQL
// layer exists; fragments that arrive before are refused).
func (s *Server) SetProcessor(p Processor) { s.proc.Store(&processorBox{p}) }

// SetProcessorFor installs the processor of fragments whose
// Spec.Processor is name (not ""): work other than a statement's SQL
// that runs beside the data, such as an index backfill's reader.
func (s *Server) SetProcessorFor(name string, p Processor) { s.named.Store(name, p) }

// processor returns the processor of spec, or nil.
func (s *Server) processor(spec Spec) Processor {
	if spec.Processor != "" {
		if p, ok := s.named.Load(spec.Processor); ok {
			return p.(Processor)
		}
		return nil
	}
	if box := s.proc.Load(); box != nil {
		return box.p
	}
	return nil
}

// SetNode names the node, for a server registered before the node knew
// its ID (a joining member serves RPC first).
func (s *Server) SetNode(id uint64) { s.node.Store(id) }

// ServeOption registers s on the node's rpc server.
func (s *Server) ServeOption() rpc.ServeOption {
	return rpc.WithService(&serviceDesc, s)
}

type flowService interface {
	flow(grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*flowService)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    flowMethod,
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(flowService).flow(stream)
		},
	}},
}

// flow runs one fragment. Its failures travel as an 'E' message, not as a
// gRPC status: a gRPC error means the stream itself broke.
func (s *Server) flow(stream grpc.ServerStream) error {
	var b []byte
	if err := stream.RecvMsg(&b); err != nil {
		return err
	}
	spec, err := decodeSpec(b)
	if err != nil {
		return err
	}
	if spec.Window <= 0 || spec.Window > maxWindow || spec.BatchRows <= 0 {
		return sendError(stream, pgerror.New(pgerrcode.ProtocolViolation, "distsql: bad window %d or batch size %d", spec.Window, spec.BatchRows))
	}
	s.active.Add(1)
	defer s.active.Add(-1)
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if spec.Gateway != 0 {
		// A client's statement: its reads here count as its gateway's
		// (invariant 8).
		ctx = kv.WithClientGateway(ctx, spec.Gateway)
	}
	// Credits: the initial window, then one per batch the gateway
	// consumed (invariant 3). The channel holds at most maxWindow, and
	// the gateway never grants more than it was sent, so the reader
	// below never blocks on it for long; a gateway that lies is cut off.
	credits := make(chan struct{}, maxWindow)
	for range spec.Window {
		credits <- struct{}{}
	}
	go func() {
		defer cancel()
		for {
			var m []byte
			if err := stream.RecvMsg(&m); err != nil {
				// io.EOF: the gateway closed its side (it has all it
				// wants); anything else: the stream broke. Either way
				// this fragment has nobody left to send to.
				return
			}
			n, err := decodeCredit(m)
			if err != nil || n > maxWindow {
				return
			}
			for range n {
				select {
				case credits <- struct{}{}:
				default:
					return
				}
			}
		}
	}()
	st := FragmentStats{Node: s.node.Load()}
	start := time.Now()
	send := func(n int, m []byte) error {
		select {
		case <-credits:
		default:
			s.blocked.Add(1)
			select {
			case <-credits:
				s.blocked.Add(-1)
			case <-ctx.Done():
				s.blocked.Add(-1)
				return ctx.Err()
			}
		}
		s.batches.Add(1)
		st.Rows += int64(n)
		st.Bytes += int64(len(m))
		st.Batches++
		return stream.SendMsg(&m)
	}
	if spec.Proc != nil || spec.Processor != "" {
		p := s.processor(spec)
		if p == nil {
			err = pgerror.New(pgerrcode.FeatureNotSupported, "distsql: node %d runs no %q fragments", s.node.Load(), spec.Processor)
		} else {
			err = p.Run(ctx, spec, func(rows [][]byte) error { return send(len(rows), encodeRows(rows)) })
		}
	} else {
		err = s.scan(ctx, spec, func(kvs []kvpb.KeyValue) error { return send(len(kvs), encodeBatch(kvs)) })
	}
	st.Time = time.Since(start)
	if err != nil {
		if ctx.Err() != nil && stream.Context().Err() != nil {
			// The gateway went away or cancelled: nobody reads an answer.
			return stream.Context().Err()
		}
		return sendError(stream, err)
	}
	m := encodeDone(st)
	return stream.SendMsg(&m)
}

func sendError(stream grpc.ServerStream, err error) error {
	m := encodeError(toRemote(err))
	if serr := stream.SendMsg(&m); serr != nil {
		return serr
	}
	return nil
}

// toRemote classifies a fragment's error for the gateway.
func toRemote(err error) remoteError {
	r := remoteError{code: pgerror.Code(err), msg: err.Error()}
	if kvpb.IsRetryable(err) {
		r.retryable = true
		r.code = pgerrcode.SerializationFailure
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		r.code = pgerrcode.QueryCanceled
	}
	return r
}

// scan reads spec's span page by page at its snapshot, as a read-only
// transaction of its own (invariant 2), handing emit each page.
func (s *Server) scan(ctx context.Context, spec Spec, emit func([]kvpb.KeyValue) error) error {
	rt := spec.Snapshot.ReadTimestamp
	txn := &kvpb.Transaction{
		TxnMeta: kvpb.TxnMeta{ID: uuid.New(), WriteTimestamp: rt, MinTimestamp: rt},
		Name:    "distsql fragment",
		Status:  kvpb.Pending,
		// The gateway's uncertainty window, not one of this node's
		// making: the same values are uncertain here as there.
		ReadTimestamp:          rt,
		GlobalUncertaintyLimit: spec.Snapshot.UncertaintyLimit,
	}
	span := spec.Span
	left := spec.Limit
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page := int64(spec.BatchRows)
		if left > 0 {
			page = min(page, left)
		}
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn}}
		ba.Add(&kvpb.ScanRequest{Key: span.Key, EndKey: span.EndKey, MaxKeys: page})
		br, err := s.sender.Send(ctx, ba)
		if err != nil {
			return err
		}
		res := br.Responses[0].(*kvpb.ScanResponse)
		if len(res.Rows) > 0 {
			if err := emit(res.Rows); err != nil {
				return err
			}
		}
		if left > 0 {
			left -= int64(len(res.Rows))
			if left <= 0 {
				return nil
			}
		}
		if res.ResumeSpan == nil {
			return nil
		}
		span = *res.ResumeSpan
	}
}
