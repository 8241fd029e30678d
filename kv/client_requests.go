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

type clientRequestsKey struct{}

// WithClientRequests returns ctx under which every batch is a client's
// request: counted by the tablet's leaseholder by gateway node.
func WithClientRequests(ctx context.Context) context.Context {
	return context.WithValue(ctx, clientRequestsKey{}, true)
}

// IsClientRequest reports whether ctx was marked by WithClientRequests.
func IsClientRequest(ctx context.Context) bool {
	v, _ := ctx.Value(clientRequestsKey{}).(bool)
	return v
}
