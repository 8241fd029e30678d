package membership

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/rpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Service answers the membership methods of the RPC node service for a
// node's Member. The node serves RPC before its Member exists (it must
// answer other starting nodes' probes at once, or they would wait on it
// while it waits on them): until Set, every method answers Unavailable.
type Service struct{ m atomic.Pointer[Member] }

// Set makes the service answer for m.
func (s *Service) Set(m *Member) { s.m.Store(m) }

const methodProbe = "Probe"

// ServeOptions are the node-service methods.
func (s *Service) ServeOptions() []rpc.ServeOption {
	with := func(f func(*Member, context.Context, []byte) ([]byte, error)) rpc.MethodHandler {
		return func(ctx context.Context, in []byte) ([]byte, error) {
			m := s.m.Load()
			if m == nil {
				return nil, status.Error(codes.Unavailable, "this node is starting")
			}
			return f(m, ctx, in)
		}
	}
	return []rpc.ServeOption{
		rpc.WithMethod(methodJoin, with((*Member).handleJoin)),
		rpc.WithMethod(methodLookup, with((*Member).handleLookup)),
		rpc.WithMethod(methodReplicaStatus, with((*Member).handleReplicaStatus)),
		rpc.WithMethod(methodProbe, with((*Member).handleProbe)),
	}
}

// handleProbe answers the cluster ID this node knows (from its store or
// its membership's start), without reading anything replicated: a probe
// must be answered at once even when the cluster is slow.
func (m *Member) handleProbe(context.Context, []byte) ([]byte, error) {
	cid := m.ClusterID()
	if cid == "" {
		return nil, status.Error(codes.Unavailable, "this node is not yet part of a running cluster")
	}
	return []byte(cid), nil
}

// ProbeResult is what Probe learned from a set of addresses.
type ProbeResult struct {
	// ClusterID is the ID some node reported ("" if none did).
	ClusterID string
	// Silent counts the nodes that neither answered nor refused the
	// connection before the context ended: whether a cluster runs there
	// is unknown.
	Silent int
}

// Probe asks the nodes at addrs, at once, which cluster they are part of.
// A node that answers it is not yet part of one, or whose address refuses
// connections, tells that no cluster runs there.
func Probe(ctx context.Context, creds *rpc.Creds, addrs []string) ProbeResult {
	var mu sync.Mutex
	var res ProbeResult
	var wg sync.WaitGroup
	for _, a := range addrs {
		wg.Go(func() {
			out, err := rpc.Call(ctx, creds, a, methodProbe, nil)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				res.ClusterID = string(out)
				return
			}
			if st, ok := status.FromError(errors.Unwrap(err)); ok && st.Code() == codes.Unavailable && ctx.Err() == nil {
				// Up and not part of a cluster yet, or nothing listens
				// there (connection refused): no cluster at that address.
				return
			}
			res.Silent++
		})
	}
	wg.Wait()
	return res
}
