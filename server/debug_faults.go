package server

// Fault injection over HTTP, for the chaos harness (test/chaos), served
// only by a node started with Config.FaultInjection (`cairn start
// --debug-fault-injection`) and, like all of /debug/, only to a superuser
// (admin_auth.go). Each route changes this node alone:
//
//	GET  /debug/faults                      {"node", "cut", "clock_offset"}
//	POST /debug/faults/cut?nodes=2,3        cut this node off from those peers (rpc.Faults); none heals
//	POST /debug/faults/clock-offset?d=300ms skew this node's physical clock (hlc.Clock.SetPhysicalOffset)
//	POST /debug/faults/transfer-leases?to=N hand every lease this node holds to node N
//	POST /debug/faults/split                split the largest table tablet this node leads in the middle
//	POST /debug/faults/disk?latency=20ms    add this latency to every read and sync of the store (0: none)
//	POST /debug/faults/disk?stall=true      stall the store's disk: every operation hangs until stall=false
//	                                        (past Config.DiskStallFence the node fences itself and exits)
//
// A partition between two processes is two cuts, one on each side.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage/simfs"
)

// clockOffset is the offset last set through /debug/faults/clock-offset.
var clockOffset atomic.Int64

func (s *Server) faultRoutes(mux *http.ServeMux) {
	repl := func(w http.ResponseWriter) *replication {
		if s.repl == nil || s.repl.faults == nil {
			http.Error(w, "fault injection needs a replicated node (--join)", http.StatusBadRequest)
			return nil
		}
		return s.repl
	}
	mux.HandleFunc("GET /debug/faults", func(w http.ResponseWriter, r *http.Request) {
		var cut []uint64
		var id uint64
		if s.repl != nil {
			cut, id = s.repl.faults.Cut(), s.repl.id
		}
		writeJSON(w, map[string]any{"node": id, "cut": cut, "clock_offset": time.Duration(clockOffset.Load()).String()})
	})
	mux.HandleFunc("POST /debug/faults/cut", func(w http.ResponseWriter, r *http.Request) {
		rp := repl(w)
		if rp == nil {
			return
		}
		var nodes []uint64
		for _, f := range strings.Split(r.URL.Query().Get("nodes"), ",") {
			if f == "" {
				continue
			}
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				http.Error(w, fmt.Sprintf("bad node ID %q", f), http.StatusBadRequest)
				return
			}
			nodes = append(nodes, n)
		}
		rp.faults.SetCut(nodes)
		s.log.Warn("cairn: fault injection: cut off from peers", "nodes", nodes)
		writeJSON(w, map[string]any{"cut": rp.faults.Cut()})
	})
	mux.HandleFunc("POST /debug/faults/clock-offset", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil {
			http.Error(w, fmt.Sprintf("bad offset: %v", err), http.StatusBadRequest)
			return
		}
		s.clock.SetPhysicalOffset(d)
		clockOffset.Store(int64(d))
		s.log.Warn("cairn: fault injection: clock offset", "offset", d)
		writeJSON(w, map[string]any{"clock_offset": d.String()})
	})
	mux.HandleFunc("POST /debug/faults/transfer-leases", func(w http.ResponseWriter, r *http.Request) {
		rp := repl(w)
		if rp == nil {
			return
		}
		to, err := strconv.ParseUint(r.URL.Query().Get("to"), 10, 64)
		if err != nil {
			http.Error(w, "to= must be a node ID", http.StatusBadRequest)
			return
		}
		moved, failed := 0, 0
		for _, d := range s.store.Tablets() {
			rep := rp.raft.Replica(uint64(d.TabletID))
			if rep == nil {
				continue
			}
			if term, _ := rep.Lease(); term == 0 {
				continue
			}
			if err := rp.raft.TransferLeader(uint64(d.TabletID), to); err != nil {
				failed++
				continue
			}
			moved++
		}
		writeJSON(w, map[string]any{"moved": moved, "failed": failed})
	})
	mux.HandleFunc("POST /debug/faults/disk", func(w http.ResponseWriter, r *http.Request) {
		if s.simfs == nil {
			http.Error(w, "the store has no simulated disk (a memory store, or Config.FS given)", http.StatusBadRequest)
			return
		}
		q := r.URL.Query()
		if v := q.Get("latency"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				http.Error(w, fmt.Sprintf("bad latency %q", v), http.StatusBadRequest)
				return
			}
			s.simfs.SetProfile(simfs.Profile{Name: "injected", ReadLatency: d, SyncLatency: d})
			s.log.Warn("cairn: fault injection: disk latency", "latency", d)
		}
		if v := q.Get("stall"); v != "" {
			stall, err := strconv.ParseBool(v)
			if err != nil {
				http.Error(w, fmt.Sprintf("bad stall %q", v), http.StatusBadRequest)
				return
			}
			if stall {
				s.log.Warn("cairn: fault injection: disk stalled")
				s.simfs.Stall()
			} else {
				s.simfs.Unstall()
				s.log.Warn("cairn: fault injection: disk answers again")
			}
		}
		writeJSON(w, map[string]any{"latency": s.simfs.Profile().SyncLatency.String(), "stalled": s.simfs.Stalled()})
	})
	mux.HandleFunc("POST /debug/faults/split", func(w http.ResponseWriter, r *http.Request) {
		rp := repl(w)
		if rp == nil {
			return
		}
		var best kvpb.TabletDescriptor
		var bestSize uint64
		for _, d := range s.store.Tablets() {
			if string(d.EndKey) != "" && string(d.EndKey) <= string(keys.TableDataMin) {
				continue
			}
			if rep := rp.raft.Replica(uint64(d.TabletID)); rep == nil {
				continue
			} else if term, _ := rep.Lease(); term == 0 {
				continue
			}
			size, err := s.eng.EstimateDiskUsage(d.StartKey, d.EndKey)
			if err == nil && size >= bestSize {
				best, bestSize = d, size
			}
		}
		if best.TabletID == 0 {
			writeJSON(w, map[string]any{"split": false})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		left, right, err := s.store.SplitMiddle(ctx, best.TabletID)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]any{"split": right.TabletID != 0, "left": left.TabletID, "right": right.TabletID})
	})
}

// TransferLease hands this node's lease of tabletID to node to, as
// /debug/faults/transfer-leases does for every lease it holds (tests
// place a lease with it). It fails when this node does not hold the
// lease; the transfer completes asynchronously.
func (s *Server) TransferLease(tabletID kvpb.TabletID, to uint64) error {
	if s.repl == nil {
		return fmt.Errorf("server: node %d is not replicated", s.nodeID())
	}
	return s.repl.raft.TransferLeader(uint64(tabletID), to)
}
