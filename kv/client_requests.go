package kv

import "context"

// Client requests (issue #22, "leases follow the workload"): a batch sent
// under a context marked by WithClientRequests names its gateway node
// (kvpb.Header.GatewayNode, set by LeaseholderSender), and leaseholders
// count only such batches when they decide where a lease should be
// (store/load.go). The server marks its SQL connections' contexts, so a
// client's statements are counted and the node's own work is not:
// liveness heartbeats, generation-lease renewals, job and statistics
// loops, intent resolution. Counted, that background went to the same
// tablet as the clients' rows wherever the system catalog shares it with
// small tables (every node sends it, at a rate a client one round trip
// away does not reach), and in `cairn demo --nodes 3 --global` a psql
// session in us-west never drew the lease out of eu.

//
// A statement's distributed fragments (sql/distsql) read on the nodes
// that lead their tablets, for the client of the node that planned
// them: each fragment carries that gateway node (distsql.Spec.Gateway)
// and its node runs it under WithClientGateway, so its batches name the
// client's gateway, not the node they were read on. Without it a tablet
// read only through fragments (a table of several tablets scanned with a
// distributed plan) counted no request and its lease never followed its
// readers (distsql.TestFragmentsCountTheClientsGateway).

type clientRequestsKey struct{}

// WithClientRequests returns ctx under which every batch is a client's
// request: counted by the tablet's leaseholder by gateway node, the node
// that sends it.
func WithClientRequests(ctx context.Context) context.Context {
	return context.WithValue(ctx, clientRequestsKey{}, uint64(0))
}

// WithClientGateway returns ctx under which every batch is a request of
// a client of node gateway, sent on its behalf by another node (a
// distributed fragment): counted by gateway, not by the sending node.
// Gateway 0 is WithClientRequests.
func WithClientGateway(ctx context.Context, gateway uint64) context.Context {
	return context.WithValue(ctx, clientRequestsKey{}, gateway)
}

// IsClientRequest reports whether ctx was marked by WithClientRequests
// or WithClientGateway.
func IsClientRequest(ctx context.Context) bool {
	_, ok := ctx.Value(clientRequestsKey{}).(uint64)
	return ok
}

// ClientGateway is the gateway node of ctx's client requests: the one
// WithClientGateway named, or local for WithClientRequests; 0 when ctx
// is not a client's.
func ClientGateway(ctx context.Context, local uint64) uint64 {
	gw, ok := ctx.Value(clientRequestsKey{}).(uint64)
	switch {
	case !ok:
		return 0
	case gw == 0:
		return local
	}
	return gw
}
