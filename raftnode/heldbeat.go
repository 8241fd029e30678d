package raftnode

// Heartbeats of a held group (doc.go, invariant 8). While a worker
// applies a group's large committed entries (apply.go), no round takes
// the group's Ready, and every message raft queues for the group waits
// in it: its heartbeats as leader, its answers to heartbeats as
// follower. A bulk apply (a COPY's batch with its GIN entries, an SST
// ingestion that must flush the memtable first) can outlast an election
// timeout (10–20 ticks of 50 ms), and all replicas of a group apply the
// same entry at about the same time, so before this such a group lost
// its leader: the followers heard nothing and pre-voted, the leader
// heard no answer and stepped down (CheckQuorum), and the tablet had
// neither leader nor lease until the applies ended and an election ran
// (TestHeldApplyKeepsLeadership). So for a held group the node sends
// itself what raft would have sent for liveness, and nothing else:
//
//   - as leader, each tick, a heartbeat to every other voter, with the
//     current term and no commit index (raft's heartbeat carries
//     min(match, committed) to move a follower's commit; leaving it out
//     moves nothing, and the real heartbeats follow when the Ready is
//     taken);
//   - as follower, on a heartbeat of its leader's current term, the
//     answer with the heartbeat's context (what a ReadIndex's heartbeat
//     round counts: the follower did acknowledge that leader in that
//     term).
//
// Neither message promises durability (invariant 3: raft sends both
// before the sync in a round), so sending them while the Ready waits is
// as safe as sending them early; raft's own copies go out later and are
// duplicates the receivers ignore.

import (
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// heartbeatHeldLocked sends the heartbeats of the held groups among
// held, which Tick just ticked, that this node leads (n.mu held).
func (n *Node) heartbeatHeldLocked(held []*Replica) {
	if len(held) == 0 || n.transport == nil || n.ticks%uint64(n.cfg.HeartbeatTicks) != 0 {
		return
	}
	var out []Envelope
	for _, r := range held {
		if r.alone.Load() {
			continue
		}
		st := r.rn.BasicStatus()
		if st.RaftState != raft.StateLeader {
			continue
		}
		term := st.HardState.GetTerm()
		for _, v := range pb.EnsureConfState(r.conf).GetVoters() {
			if v == n.cfg.NodeID {
				continue
			}
			out = append(out, Envelope{TabletID: r.TabletID, Msg: &pb.Message{
				Type: pb.MessageType_MsgHeartbeat.Enum(),
				To:   new(v),
				From: new(n.cfg.NodeID),
				Term: new(term),
			}})
		}
	}
	if len(out) > 0 {
		n.stats.HeldHeartbeats.Add(int64(len(out)))
		n.transport.Send(out)
	}
}

// answerHeldLocked answers m, a heartbeat just stepped into r, when r is
// held and raft took m as its current leader's (n.mu held).
func (n *Node) answerHeldLocked(r *Replica, m *pb.Message) {
	if r.applying == nil || n.transport == nil || m.GetType() != pb.MessageType_MsgHeartbeat {
		return
	}
	st := r.rn.BasicStatus()
	if st.RaftState != raft.StateFollower || st.Lead != m.GetFrom() || st.HardState.GetTerm() != m.GetTerm() {
		return
	}
	n.stats.HeldHeartbeats.Add(1)
	n.transport.Send([]Envelope{{TabletID: r.TabletID, Msg: &pb.Message{
		Type:    pb.MessageType_MsgHeartbeatResp.Enum(),
		To:      new(m.GetFrom()),
		From:    new(n.cfg.NodeID),
		Term:    new(st.HardState.GetTerm()),
		Context: m.GetContext(),
	}}})
}
