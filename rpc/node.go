package rpc

// The node service: small unary calls between nodes that are not raft or
// KV traffic (cluster membership: a node joining asks a member for its
// node ID; a node without a tablet's replica asks others where the tablet
// is). Each method carries opaque bytes; its owner (the membership
// package) encodes them.

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
)

const nodeServiceName = "cairn.Node"

// MethodHandler answers one call of a node-service method.
type MethodHandler func(ctx context.Context, req []byte) ([]byte, error)

// WithMethod makes Serve also serve the node-service method name.
func WithMethod(name string, h MethodHandler) ServeOption {
	return func(c *serveConfig) {
		if c.methods == nil {
			c.methods = map[string]MethodHandler{}
		}
		c.methods[name] = h
	}
}

type nodeService interface{ node() }

type nodeServer struct{}

func (nodeServer) node() {}

// nodeServiceDesc describes the methods registered with WithMethod.
func nodeServiceDesc(methods map[string]MethodHandler) *grpc.ServiceDesc {
	d := &grpc.ServiceDesc{ServiceName: nodeServiceName, HandlerType: (*nodeService)(nil)}
	for name, h := range methods {
		d.Methods = append(d.Methods, grpc.MethodDesc{
			MethodName: name,
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var in []byte
				if err := dec(&in); err != nil {
					return nil, err
				}
				out, err := h(ctx, in)
				if err != nil {
					return nil, err
				}
				return &out, nil
			},
		})
	}
	return d
}

// Call invokes the node-service method name on the node at addr, over a
// connection made for the call (these calls are rare: a join, a lookup
// that missed every local replica), with the node's transport
// credentials (creds.go; nil: plaintext).
func Call(ctx context.Context, creds *Creds, addr, name string, req []byte) ([]byte, error) {
	conn, err := grpc.NewClient(addr,
		creds.dialOption(),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName), grpc.MaxCallSendMsgSize(MaxBatchSize), grpc.MaxCallRecvMsgSize(MaxBatchSize)))
	if err != nil {
		return nil, fmt.Errorf("rpc: dialing %s: %w", addr, err)
	}
	defer conn.Close()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	var out []byte
	if err := conn.Invoke(ctx, "/"+nodeServiceName+"/"+name, &req, &out); err != nil {
		return nil, fmt.Errorf("rpc: %s on %s: %w", name, addr, err)
	}
	return out, nil
}

// NodeClient calls node-service methods on one node over a connection it
// keeps (for periodic calls, such as the closed-timestamp side
// transport; Call dials for each call).
type NodeClient struct {
	conn *grpc.ClientConn
}

// NewNodeClient makes a client of the node at addr (the connection is
// made lazily by gRPC and remade after failures).
func NewNodeClient(creds *Creds, addr string) (*NodeClient, error) {
	conn, err := grpc.NewClient(addr,
		creds.dialOption(),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName), grpc.MaxCallSendMsgSize(MaxBatchSize), grpc.MaxCallRecvMsgSize(MaxBatchSize)))
	if err != nil {
		return nil, fmt.Errorf("rpc: dialing %s: %w", addr, err)
	}
	return &NodeClient{conn: conn}, nil
}

// Call invokes method name with req.
func (c *NodeClient) Call(ctx context.Context, name string, req []byte) ([]byte, error) {
	var out []byte
	if err := c.conn.Invoke(ctx, "/"+nodeServiceName+"/"+name, &req, &out); err != nil {
		return nil, fmt.Errorf("rpc: %s: %w", name, err)
	}
	return out, nil
}

// Close closes the connection.
func (c *NodeClient) Close() error { return c.conn.Close() }
