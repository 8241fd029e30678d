package server

import "github.com/cairn-db/cairn/sql/session"

// clusterVersion is what SET CLUSTER SETTING version raises the cluster
// version through: the node's membership on a node of a cluster, nil on an
// unreplicated node (a cluster of one at its binary's version).
func (s *Server) clusterVersion() session.ClusterVersioner {
	if s.repl == nil || s.repl.member == nil {
		return nil
	}
	return s.repl.member
}

// Version is the node's view of the versions: its binary's and the
// cluster's (package clusterversion).
func (s *Server) Version() (binary, cluster string) {
	return s.version.Binary().String(), s.version.Active().String()
}
