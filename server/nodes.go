package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-db/cairn/membership"
)

// The cluster's nodes as membership knows them (cairn node status and
// decommission use the HTTP API):
//
//	GET  /api/nodes                          every node: addresses, locality, liveness, replicas, leaders
//	POST /api/nodes/{id}/decommission        mark node id decommissioning: the replicate queues move its replicas off
//	POST /api/nodes/{id}/decommission?done=1 mark it decommissioned, once no leader counts a replica on it
//
// A replicated node lists nodes through membershipNodes (set as the admin
// UI's NodeSource when its membership starts): the node table and
// liveness records, with each node's replicas counted as the tablets'
// leaders report them in their heartbeats (membership.View.ReplicasOn),
// so they lag by up to a heartbeat interval.

// replicaCounter is a NodeSource that counts replicas and leaders over
// the whole cluster, which the admin UI then shows instead of this
// node's view of the tablets it holds.
type replicaCounter interface {
	ReplicaCounts(ctx context.Context) (replicas, leaders map[int]int, err error)
}

// membershipNodes is the NodeSource of a replicated node.
type membershipNodes struct{ s *Server }

func (m membershipNodes) Nodes(ctx context.Context) ([]NodeStatus, error) {
	s := m.s
	v, err := s.repl.member.View(ctx)
	if err != nil {
		return nil, err
	}
	var out []NodeStatus
	for _, rec := range s.repl.registry.Nodes() {
		rec, ok := v.Nodes[rec.NodeID]
		if !ok {
			continue
		}
		st := v.State(rec.NodeID)
		if rec.Status == membership.StatusDecommissioning {
			st = membership.StatusDecommissioning + " (" + st + ")"
		}
		ns := NodeStatus{NodeID: int(rec.NodeID), SQLAddr: rec.SQLAddr, RPCAddr: rec.RPCAddr, HTTPAddr: rec.HTTPAddr, Locality: rec.Locality, StoreProfile: rec.StoreProfile, Liveness: st, BinaryVersion: rec.BinaryVersion}
		if rec.NodeID == s.repl.id {
			ns.StartedAt = s.started
		}
		out = append(out, ns)
	}
	return out, nil
}

func (m membershipNodes) ReplicaCounts(ctx context.Context) (replicas, leaders map[int]int, err error) {
	v, err := m.s.repl.member.View(ctx)
	if err != nil {
		return nil, nil, err
	}
	replicas, leaders = map[int]int{}, map[int]int{}
	for id := range v.Nodes {
		replicas[int(id)] = v.ReplicasOn(id)
		leaders[int(id)] = v.Liveness[id].Leaders
	}
	return replicas, leaders, nil
}

func (s *Server) nodeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/nodes/{id}/decommission", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil || id == 0 {
			http.Error(w, fmt.Sprintf("bad node ID %q", r.PathValue("id")), http.StatusBadRequest)
			return
		}
		if s.repl == nil || s.repl.member == nil {
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
