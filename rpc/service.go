package rpc

// Extra services: a package above rpc (sql/distsql) registers its own
// gRPC service on the node's one server with WithService, and dials other
// nodes with DialOptions, so it speaks the same codec and message limits
// without rpc knowing what it carries.

import (
	"google.golang.org/grpc"
)

type extraService struct {
	desc *grpc.ServiceDesc
	impl any
}

// WithService makes Serve also register desc with impl (gRPC checks impl
// against desc.HandlerType). Messages travel as *[]byte in the
// "cairn-raw" codec (CallContentSubtype in DialOptions), so the service
// encodes its own payloads.
func WithService(desc *grpc.ServiceDesc, impl any) ServeOption {
	return func(c *serveConfig) { c.services = append(c.services, extraService{desc, impl}) }
}

// DialOptions are the options a client of an extra service dials a node
// of an insecure cluster with: plaintext, Cairn's raw codec and message
// size limit. A secure node's server refuses such a connection; a client
// that may run on a secure node dials with its node's Creds.DialOptions.
func DialOptions() []grpc.DialOption { return (*Creds)(nil).DialOptions() }

// DialOptions are the options a client of an extra service dials a node
// with: c's transport credentials (nil: plaintext), Cairn's raw codec and
// message size limit.
func (c *Creds) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		c.dialOption(),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName), grpc.MaxCallSendMsgSize(MaxBatchSize), grpc.MaxCallRecvMsgSize(MaxBatchSize)),
	}
}
