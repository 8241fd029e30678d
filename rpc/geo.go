package rpc

// Simulated geography (issue #4): every node has a locality
// (`--locality region=us-west,...`), nodes tell each other theirs when
// they connect (the Node.Hello call below, made before the first raft
// batch or KV batch goes to a peer), and the transport delays each
// message by half the round-trip time the latency map gives for the two
// regions. Raft messages pay it once per direction (the sender's queue
// holds each batch until its one-way delay has passed); a KV batch pays
// it on the way out and again on the way back, so a gateway reading from
// a leaseholder in another region waits a whole round trip, as it would
// over a real WAN. Nodes of one region, and nodes whose region is not in
// the map, talk without delay.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// LatencyMap is the round-trip time between pairs of regions, the same
// both ways.
type LatencyMap map[[2]string]time.Duration

func regionPair(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// ParseLatencyMap parses `us-west:us-east=60ms,us-east:eu=86ms`: for
// each pair of regions its round-trip time (a Go duration). A pair given
// twice, a region paired with itself or a negative time is an error.
func ParseLatencyMap(s string) (LatencyMap, error) {
	m := LatencyMap{}
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, item := range strings.Split(s, ",") {
		pair, rtt, ok := strings.Cut(strings.TrimSpace(item), "=")
		a, b, ok2 := strings.Cut(pair, ":")
		if !ok || !ok2 || a == "" || b == "" {
			return nil, fmt.Errorf("latency map entry %q: want REGION:REGION=DURATION", item)
		}
		if a == b {
			return nil, fmt.Errorf("latency map entry %q: a region has no latency to itself", item)
		}
		d, err := time.ParseDuration(rtt)
		if err != nil {
			return nil, fmt.Errorf("latency map entry %q: %w", item, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("latency map entry %q: negative round-trip time", item)
		}
		k := regionPair(a, b)
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("latency map: %s:%s given twice", a, b)
		}
		m[k] = d
	}
	return m, nil
}

// RTT is the round-trip time between regions a and b (0: same region or
// not in the map).
func (m LatencyMap) RTT(a, b string) time.Duration {
	if a == b {
		return 0
	}
	return m[regionPair(a, b)]
}

// String is the map in ParseLatencyMap's form, pairs sorted.
func (m LatencyMap) String() string {
	var parts []string
	for k, d := range m {
		parts = append(parts, fmt.Sprintf("%s:%s=%s", k[0], k[1], d))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// Region is the value of a locality's region tier ("" when it has none).
func Region(locality string) string {
	for _, kv := range strings.Split(locality, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == "region" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Geography is what one node knows of the cluster's localities: its own,
// the latency map, and the peers' localities learned when connecting to
// them or when they connected here. Safe for concurrent use.
type Geography struct {
	// self is 0 until the node knows its ID (a joining node learns it
	// from the cluster after its RPC server is up; SetSelf).
	self     atomic.Uint64
	locality string
	lat      LatencyMap

	mu    sync.Mutex
	peers map[uint64]string
}

// NewGeography is node self's geography (self 0: not known yet, see
// SetSelf).
func NewGeography(self uint64, locality string, lat LatencyMap) *Geography {
	g := &Geography{locality: locality, lat: lat, peers: map[uint64]string{}}
	if self != 0 {
		g.SetSelf(self)
	}
	return g
}

// SetSelf records this node's ID once it is known. Until then the node
// refuses Hello (peers retry), since an answer as node 0 would read as
// "no geography" and disable the delays between the pair for good.
func (g *Geography) SetSelf(id uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.peers[id] = g.locality
	g.self.Store(id)
}

// Self is this node's ID (0 while unknown).
func (g *Geography) Self() uint64 { return g.self.Load() }

// Locality returns node's locality and whether it is known.
func (g *Geography) Locality(node uint64) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, ok := g.peers[node]
	return l, ok
}

// Region is node's region ("" when unknown or without one).
func (g *Geography) Region(node uint64) string {
	l, _ := g.Locality(node)
	return Region(l)
}

// OneWay is the delay a message from this node to node pays: half the
// round-trip time between their regions (0 while node's locality is
// unknown).
func (g *Geography) OneWay(node uint64) time.Duration {
	if g == nil || node == g.Self() {
		return 0
	}
	l, ok := g.Locality(node)
	if !ok {
		return 0
	}
	return g.lat.RTT(Region(g.locality), Region(l)) / 2
}

func (g *Geography) learn(node uint64, locality string) {
	if node == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.peers[node] = locality
}

const helloMethod = "/" + nodeServiceName + "/Hello"

func encodeHello(node uint64, locality string) []byte {
	b, err := msgCodec.Marshal(nil, &hello{Node: node, Locality: locality})
	if err != nil {
		panic(err) // a registered struct of a number and a string
	}
	return b
}

func decodeHello(b []byte) (uint64, string, error) {
	var h hello
	if err := msgCodec.Unmarshal(b, &h); err != nil {
		return 0, "", fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return h.Node, h.Locality, nil
}

// helloHandler records the caller's locality in g and answers with this
// node's. Every server answers Hello, with node 0 when it has no
// geography, so a node with one can talk to a node without.
func helloHandler(g *Geography) MethodHandler {
	return func(_ context.Context, req []byte) ([]byte, error) {
		node, loc, err := decodeHello(req)
		if err != nil {
			return nil, err
		}
		if g == nil {
			return encodeHello(0, ""), nil
		}
		self := g.Self()
		if self == 0 {
			return nil, errors.New("rpc: this node does not know its node ID yet")
		}
		g.learn(node, loc)
		return encodeHello(self, g.locality), nil
	}
}

// WithGeography makes Serve answer other nodes' Hello with g's locality
// and record theirs in g.
func WithGeography(g *Geography) ServeOption {
	return func(c *serveConfig) { c.geo = g }
}

// helloTimeout bounds the exchange of localities on connect.
const helloTimeout = 5 * time.Second

// exchange tells node to (on conn) this node's locality and records its
// answer. A peer that answers as another node than to is an error (the
// address resolves to the wrong process).
func (g *Geography) exchange(ctx context.Context, conn *grpc.ClientConn, to uint64) error {
	if g == nil {
		return nil
	}
	if _, ok := g.Locality(to); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	req := encodeHello(g.Self(), g.locality)
	var reply []byte
	if err := conn.Invoke(ctx, helloMethod, &req, &reply, grpc.CallContentSubtype(codecName)); err != nil {
		return fmt.Errorf("rpc: exchanging localities with node %d: %w", to, err)
	}
	node, loc, err := decodeHello(reply)
	if err != nil {
		return fmt.Errorf("rpc: node %d's hello: %w", to, err)
	}
	if node == 0 {
		// A node serving without a geography: no locality, no delay.
		g.learn(to, "")
		return nil
	}
	if node != to {
		return fmt.Errorf("rpc: node %d's address is served by node %d", to, node)
	}
	g.learn(node, loc)
	return nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
