package rpc

// The clock service: a node answers a ping with a reading of its physical
// clock, so that its peers can measure their clock offset from it
// (clockmon). A reading is eight bytes, big-endian Unix nanoseconds; the
// request is empty.

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
)

const (
	clockServiceName = "cairn.Clock"
	clockMethodName  = "Ping"
	clockFullMethod  = "/" + clockServiceName + "/" + clockMethodName
)

// WithClock makes Serve answer clock pings with now() (the node's
// physical clock: hlc.Clock.PhysicalNow, which includes a test offset).
func WithClock(now func() int64) ServeOption {
	return func(c *serveConfig) { c.clock = now }
}

type clockService interface {
	ping() []byte
}

type clockServer struct{ now func() int64 }

func (c clockServer) ping() []byte {
	b, err := msgCodec.Marshal(nil, &clockReading{UnixNanos: c.now()})
	if err != nil {
		panic(err) // a registered struct of one number
	}
	return b
}

var clockServiceDesc = grpc.ServiceDesc{
	ServiceName: clockServiceName,
	HandlerType: (*clockService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: clockMethodName,
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			out := srv.(clockService).ping()
			return &out, nil
		},
	}},
}

// ClockPinger asks other nodes for their clock readings. It keeps one
// connection per node, made on first use. Safe for concurrent use.
type ClockPinger struct {
	resolve func(uint64) (string, error)
	// Faults, when set before the first Ping, fails pings to the peers
	// it cuts off (faults.go).
	Faults *Faults
	// Creds, when set before the first Ping, are the transport
	// credentials (creds.go; nil: plaintext).
	Creds *Creds

	mu    sync.Mutex
	conns map[uint64]*grpc.ClientConn
}

// NewClockPinger returns a pinger that finds nodes through resolve.
func NewClockPinger(resolve func(nodeID uint64) (string, error)) *ClockPinger {
	return &ClockPinger{resolve: resolve, conns: map[uint64]*grpc.ClientConn{}}
}

func (p *ClockPinger) conn(node uint64) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[node]; c != nil {
		return c, nil
	}
	addr, err := p.resolve(node)
	if err != nil {
		return nil, fmt.Errorf("resolving node %d: %w", node, err)
	}
	c, err := grpc.NewClient(addr,
		p.Creds.dialOption(),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName)))
	if err != nil {
		return nil, err
	}
	p.conns[node] = c
	return c, nil
}

// Ping returns node's physical clock reading (Unix nanoseconds), taken
// while the call was in flight.
func (p *ClockPinger) Ping(ctx context.Context, node uint64) (int64, error) {
	if p.Faults.IsCut(node) {
		return 0, fmt.Errorf("rpc: clock ping to node %d: %w", node, ErrCut)
	}
	c, err := p.conn(node)
	if err != nil {
		return 0, err
	}
	var req, reply []byte
	if err := c.Invoke(ctx, clockFullMethod, &req, &reply); err != nil {
		return 0, fmt.Errorf("rpc: clock ping to node %d: %w", node, err)
	}
	var r clockReading
	if err := msgCodec.Unmarshal(reply, &r); err != nil {
		return 0, fmt.Errorf("rpc: clock ping to node %d: %w", node, err)
	}
	if r.UnixNanos == 0 {
		return 0, fmt.Errorf("rpc: clock ping to node %d: a reply without a reading", node)
	}
	return r.UnixNanos, nil
}

// Close closes the connections.
func (p *ClockPinger) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, c := range p.conns {
		_ = c.Close()
		delete(p.conns, id)
	}
}
