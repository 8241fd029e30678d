package membership

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/rpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The node-service methods (rpc.WithMethod).
const (
	methodJoin   = "Join"
	methodLookup = "Lookup"
)

// JoinRequest is what a starting node sends a member of the cluster it
// joins.
type JoinRequest struct {
	// ClusterID and NodeID are the store's identity, empty for an empty
	// store (a new node, or a wiped one: it gets a new ID).
	ClusterID string `json:"cluster_id,omitempty"`
	NodeID    uint64 `json:"node_id,omitempty"`
	// InitialMember is the position (from 1) of an empty store's node
	// among the initial members it was started with: it keeps that ID if
	// no node registered under it yet (it is late to the cluster's first
	// start), and gets a new one if one did (it was wiped).
	InitialMember uint64 `json:"initial_member,omitempty"`
	// Node is the starting node's record (its NodeID is ignored).
	Node NodeRecord `json:"node"`
}

// JoinResponse answers a JoinRequest.
type JoinResponse struct {
	ClusterID string       `json:"cluster_id"`
	NodeID    uint64       `json:"node_id"`
	Nodes     []NodeRecord `json:"nodes"`
}

// ErrNoCluster: no address given answered with a cluster (none is
// running there yet, or none was reachable).
var ErrNoCluster = errors.New("membership: no running cluster reachable at the join addresses")

// Join asks the members at addrs, in turn, to admit this node. A refusal
// (another cluster, an unknown or decommissioned node ID) is returned at
// once; a member that is unreachable or not yet part of a running cluster
// is skipped, and ErrNoCluster returned if none answers. creds are the
// node's RPC credentials (nil: plaintext).
func Join(ctx context.Context, creds *rpc.Creds, addrs []string, req JoinRequest) (JoinResponse, error) {
	var errs []error
	for _, a := range addrs {
		out, err := rpc.Call(ctx, creds, a, methodJoin, encode(req))
		if err == nil {
			return decode[JoinResponse](out)
		}
		if st, ok := status.FromError(errors.Unwrap(err)); ok && st.Code() == codes.FailedPrecondition {
			return JoinResponse{}, fmt.Errorf("%w: %s", ErrRefused, st.Message())
		}
		errs = append(errs, err)
	}
	return JoinResponse{}, fmt.Errorf("%w: %w", ErrNoCluster, errors.Join(errs...))
}

// ErrRefused: a member refused this node (its store belongs to another
// cluster, or its node ID is unknown or decommissioned).
var ErrRefused = errors.New("the cluster refused this node")

// refuse is a join refusal the joining node must not retry elsewhere.
func refuse(format string, args ...any) error {
	return status.Errorf(codes.FailedPrecondition, format, args...)
}
