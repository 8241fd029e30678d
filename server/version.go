package server

import (
	"net/http"

	"github.com/cairn-db/cairn/sql/session"
)

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

// VersionInfo is GET /api/version's answer: the versions as the node that
// answers knows them (cairn node status prints them; the admin UI's
// overview shows them).
type VersionInfo struct {
	// NodeID is the node that answered.
	NodeID uint64 `json:"node_id"`
	// BinaryVersion is its binary's version, MinSupportedVersion the
	// oldest cluster version that binary runs in.
	BinaryVersion       string `json:"binary_version"`
	MinSupportedVersion string `json:"min_supported_version"`
	// ClusterVersion is the cluster version as the node last learned it
	// (each node refreshes it every liveness interval, so after a rise it
	// may lag on other nodes by that much).
	ClusterVersion string `json:"cluster_version"`
}

func (s *Server) versionInfo() VersionInfo {
	return VersionInfo{NodeID: s.nodeID(), BinaryVersion: s.version.Binary().String(),
		MinSupportedVersion: s.version.MinSupported().String(), ClusterVersion: s.version.Active().String()}
}

func (s *Server) versionRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.versionInfo()) })
}
