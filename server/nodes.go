package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-db/cairn/membership"
)

// The cluster's nodes on the HTTP API (cairn node status and decommission
// use it):
//
//	GET  /api/nodes                          every node: addresses, locality, liveness, replicas, leaders
//	POST /api/nodes/{id}/decommission        mark node id decommissioning: the replicate queues move its replicas off
//	POST /api/nodes/{id}/decommission?done=1 mark it decommissioned, once no leader counts a replica on it
//
// A node's replicas are counted as the tablets' leaders report them in
// their heartbeats (membership.View.ReplicasOn), so they lag by up to a
// heartbeat interval.

// nodeInfos is every node of the cluster (this node alone when it is not
// replicated).
func (s *Server) nodeInfos(ctx context.Context) ([]NodeInfo, error) {
	if s.repl == nil {
		return []NodeInfo{s.nodeInfo()}, nil
	}
	v, err := s.repl.member.View(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeInfo, 0, len(v.Nodes))
	for _, rec := range s.repl.registry.Nodes() {
		rec, ok := v.Nodes[rec.NodeID]
		if !ok {
			continue
		}
		st := v.State(rec.NodeID)
		if rec.Status == membership.StatusDecommissioning {
			st = membership.StatusDecommissioning + " (" + st + ")"
		}
		ni := NodeInfo{NodeID: int(rec.NodeID), SQLAddr: rec.SQLAddr, RPCAddr: rec.RPCAddr, HTTPAddr: rec.HTTPAddr,
			Locality: rec.Locality, Liveness: st, Replicas: v.ReplicasOn(rec.NodeID), Leaders: v.Liveness[rec.NodeID].Leaders}
		if rec.NodeID == s.repl.id {
			ni.StartedAt = s.started
		}
		out = append(out, ni)
	}
	return out, nil
}

func (s *Server) nodeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/nodes/{id}/decommission", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil || id == 0 {
			http.Error(w, fmt.Sprintf("bad node ID %q", r.PathValue("id")), http.StatusBadRequest)
			return
		}
		if s.repl == nil {
			http.Error(w, "this node is not part of a replicated cluster", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		status := membership.StatusDecommissioning
		if r.URL.Query().Get("done") != "" {
			v, err := s.repl.member.View(ctx)
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			if n := v.ReplicasOn(id); n > 0 {
				http.Error(w, fmt.Sprintf("node %d still holds %d replicas", id, n), http.StatusConflict)
				return
			}
			status = membership.StatusDecommissioned
		}
		if err := s.repl.member.SetStatus(ctx, id, status); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]any{"node_id": id, "status": status})
	})
}
