// Package clockmon measures a node's clock offset from its peers and
// fences the node when its clock cannot be trusted.
//
// Every read and write is stamped by a node's hybrid logical clock, and a
// read is correct only if every other node's clock is within the maximum
// offset (hlc.Clock.MaxOffset) of the reader's: that is the width of its
// uncertainty interval, and a new leaseholder waits out the same bound.
// Nothing in Go can skew a process's clock from outside, so the offset is
// measured: each Interval the Monitor pings every peer (rpc.ClockPinger),
// which answers with its physical clock, and takes
//
//	offset      = remote − (local at send + RTT/2)
//	uncertainty = RTT/2
//
// (as CockroachDB's RemoteClockMonitor does). The peer read its clock
// while the call was in flight, so the true offset lies within
// offset ± uncertainty.
//
// Decision: a peer is *out* when |offset| − uncertainty > Tolerance, the
// tolerance being 0.8 × the maximum offset (CockroachDB's figure: the
// fifth left over absorbs drift between two measurements). Only offsets
// certainly beyond it count, so one exactly at 0.8 × is never out. The
// node may serve only while a majority of the cluster, itself included,
// has fresh measurements not out — (1 + in) > (peers + 1) / 2 — and its
// own HLC is not more than the maximum offset ahead of its physical clock
// (a clock stepped back after running ahead still hands out the old,
// future timestamps until its physical clock catches up). Otherwise it is
// fenced (Config.Fence; raftnode's fence gives up every lease and moves
// leadership away) and its gateway refuses requests (Guard): a gateway
// whose clock is behind would start transactions at timestamps too old to
// see writes already acknowledged. The fence is ErrUnverified (the node
// cannot tell yet; a starting node waits in WaitVerified, Guard holds a
// batch a while) rather than a judged offset while the peers with no
// fresh measurement could still make the majority — 1 + in + unmeasured
// > (peers + 1) / 2. Before, the first node of five that had measured
// only one peer (the others' processes not yet listening) was judged out,
// refused its own catalog bootstrap and exited, and the cluster never
// served (bench/hashshard -nodes 5 under load).
//
// A peer this monitor has not reached for DeadAfter (since its last good
// measurement, or since the monitor first listed it) is presumed dead and
// no longer counted, as node liveness would judge it (membership also
// drops the peers its liveness view finds dead or decommissioned from
// Peers, but that view is read through KV, which a fenced gateway
// refuses). Without this, the survivor of a two-node cluster that lost
// the other node could never serve, decommission the dead node, or come
// back after a restart: its only peer never answers. With no peer left
// counted, the node judges itself as a cluster of one does: it serves.
// A partition longer than DeadAfter lets both sides serve as gateways;
// neither can reach the other's leaseholders, and raft quorums, not
// clocks, decide which side can write (docs/architecture.md, "Losing a
// node of two").
//
// A node starts fenced and is unfenced once a majority of the cluster
// agrees (or once every peer is presumed dead), so a node started with a bad clock
// and a reachable peer never serves. The fence lifts by
// itself once the measurements are good again; the node is not stopped
// (CockroachDB exits instead), because a fenced node still replicates as
// a follower and counts toward quorums, which do not depend on clocks.
// A clock that jumps between two measurements can serve until the next
// one (at most Interval plus a round trip): the fence narrows that window,
// it cannot close it.
//
// It imports hlc and kvpb only; the pings go through the Pinger the node
// gives it.
package clockmon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/hlc"
)

// Pinger reads another node's physical clock (rpc.ClockPinger).
type Pinger interface {
	Ping(ctx context.Context, node uint64) (int64, error)
}

// Config configures a Monitor.
type Config struct {
	// NodeID is this node.
	NodeID uint64
	// Clock is this node's clock; its MaxOffset is the bound checked.
	Clock *hlc.Clock
	// Peers returns the other members (read each round).
	Peers func() []uint64
	// Pinger reaches them.
	Pinger Pinger
	// Interval between rounds (default 500ms). A measurement older than
	// ten intervals (at least 2s) no longer counts.
	Interval time.Duration
	// Tolerance is the offset beyond which a peer is out (default 0.8 ×
	// the clock's maximum offset).
	Tolerance time.Duration
	// Fence and Unfence are called when the node must stop, or may
	// resume, serving (raftnode.Node.Fence / Unfence).
	Fence   func(reason error)
	Unfence func()
	// Logger receives fence changes (nil: slog.Default()).
	Logger *slog.Logger
	// DeadAfter is how long a peer may go unreached before it is
	// presumed dead and no longer counted (0: never; see the package
	// comment). The node's --dead-after.
	DeadAfter time.Duration
	// Now is the monotonic clock judged by (nil: time.Now); tests step it.
	Now func() time.Time
}

// Offset is one peer's last measurement.
type Offset struct {
	// Offset is the peer's clock minus this node's; Uncertainty bounds
	// the error of that estimate.
	Offset, Uncertainty time.Duration
	// At is when it was taken (monotonic).
	At time.Time
}

// ErrClockOffset is what the refusals of a node fenced for its judged
// clock wrap: measured beyond the tolerance of a majority, or its hybrid
// clock too far ahead of its physical one.
var ErrClockOffset = errors.New("clock offset beyond the tolerance")

// ErrUnverified is the fence of a node that has too few fresh
// measurements to judge its clock (just started, or cut off): none, or
// fewer agreeing than a majority while the unmeasured peers could still
// make one. Guard waits on it rather than refusing at once. It does not
// wrap ErrClockOffset: nothing says the clock is off, and a refusal
// that said so sent operators to fix a clock that was never measured.
var ErrUnverified = errors.New("clock not yet checked against the cluster's")

// IsFenced reports whether err is a refusal for the node's clock, judged
// (ErrClockOffset) or not yet checked (ErrUnverified): either way nothing
// was sent.
func IsFenced(err error) bool {
	return errors.Is(err, ErrClockOffset) || errors.Is(err, ErrUnverified)
}

// Monitor measures and judges; see the package comment.
type Monitor struct {
	cfg Config

	mu      sync.Mutex
	offsets map[uint64]Offset
	// listed is when each peer was first listed by Peers: a peer never
	// measured is presumed dead DeadAfter after it.
	listed map[uint64]time.Time
	// presumedDead are the peers last judged unreached for DeadAfter.
	presumedDead map[uint64]bool
	// fence is why the node is fenced now (nil: it serves), kind its
	// state.
	fence error
	kind  int
}

// New returns a monitor and fences the node at once: its clock is
// unverified until the first round.
func New(cfg Config) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = cfg.Clock.MaxOffset() * 4 / 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Monitor{cfg: cfg, offsets: map[uint64]Offset{}, listed: map[uint64]time.Time{}, presumedDead: map[uint64]bool{}, kind: unverified}
	m.fence = m.unverified()
	if cfg.Fence != nil {
		cfg.Fence(m.fence)
	}
	return m
}

// Run measures every Interval until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round pings every peer once, concurrently, and re-judges the node.
func (m *Monitor) Round(ctx context.Context) {
	peers := m.cfg.Peers()
	timeout := max(m.cfg.Interval, time.Second)
	var wg sync.WaitGroup
	for _, p := range peers {
		if p == m.cfg.NodeID {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			sent := time.Now()
			local := m.cfg.Clock.PhysicalNow()
			remote, err := m.cfg.Pinger.Ping(cctx, p)
			if err != nil {
				return
			}
			rtt := time.Since(sent)
			off := Offset{
				Offset:      time.Duration(remote - (local + int64(rtt/2))),
				Uncertainty: rtt / 2,
				At:          m.cfg.Now(),
			}
			m.mu.Lock()
			m.offsets[p] = off
			m.mu.Unlock()
		})
	}
	wg.Wait()
	m.judge(peers)
}

// judge decides whether the node may serve and tells Fence or Unfence
// when that changes.
func (m *Monitor) judge(peers []uint64) {
	stale := max(10*m.cfg.Interval, 2*time.Second)
	now := m.cfg.Now()
	n, in, fresh := 0, 0, 0
	var out []string
	var nowDead, alive []uint64
	m.mu.Lock()
	for _, p := range peers {
		if p == m.cfg.NodeID {
			continue
		}
		if _, ok := m.listed[p]; !ok {
			m.listed[p] = now
		}
		o, ok := m.offsets[p]
		if !ok || now.Sub(o.At) > stale {
			since := m.listed[p]
			if ok && o.At.After(since) {
				since = o.At
			}
			if m.cfg.DeadAfter > 0 && now.Sub(since) >= m.cfg.DeadAfter {
				if !m.presumedDead[p] {
					m.presumedDead[p] = true
					nowDead = append(nowDead, p)
				}
				continue
			}
			n++
			continue
		}
		if m.presumedDead[p] {
			delete(m.presumedDead, p)
			alive = append(alive, p)
		}
		n++
		fresh++
		if abs(o.Offset)-o.Uncertainty > m.cfg.Tolerance {
			out = append(out, fmt.Sprintf("node %d %+v±%v", p, o.Offset, o.Uncertainty))
		} else {
			in++
		}
	}
	var reason error
	kind := serving
	if fresh == 0 && n > 0 {
		reason, kind = m.unverified(), unverified
	} else if 2*(1+in) <= n+1 && 2*(1+in+n-fresh) > n+1 {
		// Too few measured to decide: the peers not yet measured (at a
		// start, those whose processes are not listening yet) could still
		// make the majority. Only measurements can make the clock bad.
		reason, kind = fmt.Errorf("%w: node %d's clock agrees within %v with %d of the %d peers measured so far, of %d; a majority of the cluster is needed, and the peers not measured yet could make it",
			ErrUnverified, m.cfg.NodeID, m.cfg.Tolerance, in, fresh, n), undecided
	} else if 2*(1+in) <= n+1 {
		reason, kind = fmt.Errorf("%w: node %d's clock agrees within %v with %d of its %d peers (a majority of the cluster is needed); beyond it: %s",
			ErrClockOffset, m.cfg.NodeID, m.cfg.Tolerance, in, n, orNone(out)), offPeers
	} else if ahead := time.Duration(m.cfg.Clock.Now().WallTime - m.cfg.Clock.PhysicalNow()); ahead > m.cfg.Clock.MaxOffset() {
		reason, kind = fmt.Errorf("%w: node %d's hybrid clock is %v ahead of its physical clock, beyond the maximum offset %v",
			ErrClockOffset, m.cfg.NodeID, ahead, m.cfg.Clock.MaxOffset()), hlcAhead
	}
	was := m.kind
	m.fence, m.kind = reason, kind
	m.mu.Unlock()
	for _, p := range nowDead {
		m.cfg.Logger.Warn("cairn: peer unreached for --dead-after; presumed dead and no longer counted by the clock check", "node", m.cfg.NodeID, "peer", p, "dead_after", m.cfg.DeadAfter)
	}
	for _, p := range alive {
		m.cfg.Logger.Info("cairn: peer presumed dead answers again; counted by the clock check", "node", m.cfg.NodeID, "peer", p)
	}
	if kind == was {
		return
	}
	// Only changes of state are logged and reported.
	switch kind {
	case serving:
		m.cfg.Logger.Info("cairn: clock offset within the tolerance of a majority; serving", "node", m.cfg.NodeID, "tolerance", m.cfg.Tolerance)
		if m.cfg.Unfence != nil {
			m.cfg.Unfence()
		}
		return
	case unverified:
		m.cfg.Logger.Warn("cairn: no peer's clock measured; not serving until one is", "node", m.cfg.NodeID)
	case undecided:
		m.cfg.Logger.Warn("cairn: too few peers' clocks measured to decide; not serving until a majority of the cluster agrees", "node", m.cfg.NodeID, "err", reason)
	default:
		m.cfg.Logger.Error("cairn: clock offset: this node stops serving as leaseholder and gateway until its clock agrees with its peers", "node", m.cfg.NodeID, "err", reason)
	}
	if m.cfg.Fence != nil {
		m.cfg.Fence(reason)
	}
}

// WaitVerified blocks while the node's clock is unverified (no peer
// measured yet, and not every peer presumed dead) and returns the fence
// that remains then (nil: serve), or ctx's error. A starting node calls
// it before its first own request: Guard would refuse that after a short
// wait, and a survivor whose only peer is dead is unverified until
// DeadAfter has passed.
func (m *Monitor) WaitVerified(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		err := m.Fenced()
		if !errors.Is(err, ErrUnverified) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the clock to be verified: %w (%w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// The states a monitor judges a node to be in.
const (
	serving = iota
	unverified
	// undecided: some peers measured, too few to make a majority, and
	// the unmeasured ones could (wraps ErrUnverified).
	undecided
	offPeers
	hlcAhead
)

func (m *Monitor) unverified() error {
	return fmt.Errorf("%w: node %d has measured no peer's clock yet", ErrUnverified, m.cfg.NodeID)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none measured"
	}
	return strings.Join(s, ", ")
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Fenced returns why the node is fenced, or nil.
func (m *Monitor) Fenced() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fence
}

// Offsets returns the last measurement of each peer.
func (m *Monitor) Offsets() map[uint64]Offset {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[uint64]Offset, len(m.offsets))
	for k, v := range m.offsets {
		out[k] = v
	}
	return out
}

// Peers lists the peers measured so far, in order.
func (m *Monitor) Peers() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint64
	for k := range m.offsets {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
