package membership

import (
	"context"
	"slices"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Replica GC. A replica removed from its group while its node was down,
// or that missed the commit of its own removal, never applies a
// configuration without itself: its group's leader stops sending to it.
// A voter then knows no leader (its pre-votes fail, and it hears no
// heartbeats). A learner does not: it never campaigns (etcd raft's
// tickElection starts no election on a node that is not promotable), so
// it keeps the leader it last heard from for as long as it lives, and
// asking only about replicas without a leader never found it. So every
// gcInterval a node asks the other nodes about each of its replicas that
// knows no leader, is a learner in its own configuration (a learner
// being caught up is asked about too, and kept: the leaseholder lists
// it), or is still an empty placeholder (created by a message of a
// leader that then dropped it):
// if the node holding the group's lease answers that this node is not in
// its configuration, the replica is destroyed, as if it had applied its
// removal. Only the leaseholder's answer counts: its configuration is the
// group's as of its applied index, and a node added back since appears
// in it.

const methodReplicaStatus = "ReplicaStatus"

type replicaStatusRequest struct {
	TabletID uint64 `json:"tablet_id"`
}

type replicaStatusResponse struct {
	Leaseholder bool     `json:"leaseholder"`
	Members     []uint64 `json:"members,omitempty"`
	// Holds: the answering node holds a replica of the tablet, a member
	// or not (the replicate queue's addable asks; a node of an older
	// build leaves it out, and is added to as before).
	Holds bool `json:"holds,omitempty"`
}

func (m *Member) handleReplicaStatus(ctx context.Context, in []byte) ([]byte, error) {
	req, err := decode[replicaStatusRequest](in)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	var resp replicaStatusResponse
	if rep := m.cfg.Raft.Replica(req.TabletID); rep != nil {
		resp.Holds = true
		if term, _ := rep.Lease(); term != 0 {
			cs := m.cfg.Raft.Config(req.TabletID)
			resp.Leaseholder = true
			resp.Members = append(slices.Clone(cs.GetVoters()), cs.GetLearners()...)
		}
	}
	return encode(resp), nil
}

// gcInterval is how often a node looks for replicas it should not hold.
func (m *Member) gcInterval() time.Duration { return max(2*time.Second, 10*m.cfg.ScanInterval) }

// gcReplicas destroys this node's replicas whose group's leaseholder does
// not count this node as a member.
func (m *Member) gcReplicas(ctx context.Context) {
	self := m.NodeID()
	for _, id := range m.cfg.Raft.Tablets() {
		rep := m.cfg.Raft.Replica(id)
		if rep == nil {
			continue
		}
		term, leader := rep.Lease()
		learner := slices.Contains(m.cfg.Raft.Config(id).GetLearners(), self)
		if !gcCandidate(term, leader, learner, m.cfg.Store.IsPlaceholder(kvpb.TabletID(id))) {
			continue
		}
		req := encode(replicaStatusRequest{TabletID: id})
		for _, rec := range m.cfg.Registry.Nodes() {
			if rec.NodeID == self || rec.Status == StatusDecommissioned {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			out, err := rpc.Call(cctx, m.cfg.Creds, rec.RPCAddr, methodReplicaStatus, req)
			cancel()
			if err != nil {
				continue
			}
			resp, err := decode[replicaStatusResponse](out)
			if err != nil || !resp.Leaseholder {
				continue
			}
			if !slices.Contains(resp.Members, self) {
				m.cfg.Logger.Info("membership: destroying a replica its group no longer has", "tablet", id, "node", self, "leaseholder", rec.NodeID)
				if err := m.cfg.Store.RemoveReplica(kvpb.TabletID(id)); err != nil {
					m.cfg.Logger.Error("membership: destroying a replica", "tablet", id, "err", err)
				}
			}
			break
		}
	}
}

// gcCandidate reports whether replica GC asks the other nodes about a
// replica: not the leaseholder (term 0), and it knows no leader, is a
// learner in its own configuration, or is an empty placeholder.
func gcCandidate(term, leader uint64, learner, placeholder bool) bool {
	return term == 0 && (leader == 0 || learner || placeholder)
}
