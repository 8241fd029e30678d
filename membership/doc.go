// Package membership owns a replicated cluster's membership and
// placement (issue #4): the cluster's identity (a cluster ID chosen at
// bootstrap and kept in every store, node IDs from a replicated counter),
// the node table and liveness records in system keys, joining a running
// cluster over the RPC node service, answering where a tablet is for a
// node that holds no replica of it, and the replicate queue: each
// tablet's leaseholder adds learners on nodes without a replica, promotes
// them once caught up, and removes replicas of dead, decommissioning or
// surplus nodes, so every tablet keeps its replication factor of voters;
// and the cluster version (version.go): it refuses nodes whose binary
// cannot run at it and raises it once every node runs a newer binary.
//
// It decides; the store (store/member.go) and the raft node
// (raftnode/member.go) carry out: a replica is created on its node by the
// leader's first message and filled by its snapshot, and destroyed when
// its node applies a configuration without it.
package membership
