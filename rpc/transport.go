package rpc

import (
	"context"
	"fmt"
	"github.com/cairn-db/cairn/kvpb"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/raftnode"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
)

const (
	serviceName = "cairn.Raft"
	streamName  = "Batches"
	fullMethod  = "/" + serviceName + "/" + streamName
	// queueLen bounds the messages waiting for one peer; past it Send drops
	// (raft retransmits), so a dead peer costs bounded memory.
	queueLen = 10000
	// maxBatch bounds the messages of one frame.
	maxBatch = 512
	// defaultQueueBytes bounds the bytes of the messages waiting for one
	// peer (TransportConfig.QueueBytes; invariant T1). Counting messages
	// was not enough: an append that catches a follower up carries up to
	// raft's MaxSizePerMsg (1 MiB) of entries, so queueLen of them is
	// 10 GiB, and a chaos node that caught its peers up after restarts
	// was killed by the kernel at 10.8 GiB (bench/README.md, "Issue 22,
	// twelfth session: memory").
	defaultQueueBytes = 128 << 20
	// smallMsgBytes: a message of at most this size (a heartbeat, a vote,
	// an acknowledgement: no entries) is bounded by queueLen alone, so
	// that a queue full of appends still takes the messages that keep a
	// group's leader (invariant T1).
	smallMsgBytes = 1 << 10
	// frameBytes bounds the messages of one frame, by their size
	// (invariant T2): a frame is encoded whole in memory, and one larger
	// than MaxBatchSize is refused by gRPC, which lost all of it.
	frameBytes = 4 << 20
)

// The transport's memory bounds, per destination node (TestTransportBounds,
// TestTransportFramesFit):
//
//	T1. The messages queued for a peer and not yet taken into a frame
//	    add up to at most QueueBytes (msgBytes; 128 MiB by default) and
//	    queueLen messages of at most smallMsgBytes (10 MiB), except
//	    that a queue holding nothing takes one message of any size (a
//	    side-loaded SST's append is up to 32 MiB and must not be refused
//	    for ever). Past it Send drops the message: raft retransmits it,
//	    so the cost of a slow, paused or dead peer is bounded in bytes,
//	    not in messages whose size raft decides; and small messages
//	    (heartbeats, votes, acknowledgements) still pass while the
//	    appends wait, so a group keeps its leader.
//	T2. A frame holds at most frameBytes of messages (half of
//	    MaxBatchSize if that is less), except a frame of one message:
//	    its encoding stays under MaxBatchSize, which gRPC enforces by
//	    refusing the whole frame. Before this a follower being caught up
//	    by many groups at once was sent frames of 512 appends of 1 MiB,
//	    each refused whole; every group's leader read the entries again
//	    and sent them again, and the node's heap held gigabytes of them.

// Handler receives the envelopes that arrive from other nodes.
type Handler func(raftnode.Envelope)

// raftService is the handler type gRPC checks the implementation against.
type raftService interface {
	batches(grpc.ServerStream) error
	snapshot(grpc.ServerStream) error
}

type server struct {
	h      Handler
	snap   SnapshotReceiver
	faults *Faults
}

func (s *server) batches(stream grpc.ServerStream) error {
	for {
		var b []byte
		if err := stream.RecvMsg(&b); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		envs, err := decodeBatch(b)
		if err != nil {
			// A peer that sends garbage is cut off; raft copes with the
			// loss, and the peer's reconnect starts clean.
			return err
		}
		for _, e := range envs {
			if s.faults.IsCut(e.Msg.GetFrom()) {
				s.faults.dropped.Add(1)
				continue
			}
			s.h(e)
		}
	}
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*raftService)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    streamName,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(raftService).batches(stream)
		},
	}, {
		StreamName:    snapshotStream,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(raftService).snapshot(stream)
		},
	}},
}

// Server serves other nodes' raft batches on a listener.
type Server struct {
	g  *grpc.Server
	ln net.Listener
}

// Serve starts serving on ln, delivering every received envelope to h
// (called on the connection's goroutine; h must not block for long) and
// every incoming snapshot to snap (nil: snapshots are refused). With
// WithKV it also serves KV batches (kv.go).
func Serve(ln net.Listener, h Handler, snap SnapshotReceiver, opts ...ServeOption) *Server {
	var cfg serveConfig
	for _, o := range opts {
		o(&cfg)
	}
	// WaitForHandlers: Stop returns only once every handler has, so no
	// raft message is stepped (nor KV batch served) after the caller goes
	// on to close the raft node and its engine; a leader stepping a
	// follower's answer on a closed engine panics inside raft.
	g := grpc.NewServer(append(cfg.creds.serverOptions(), grpc.MaxRecvMsgSize(MaxBatchSize), grpc.WaitForHandlers(true))...)
	g.RegisterService(&serviceDesc, &server{h: h, snap: snap, faults: cfg.faults})
	if cfg.kv != nil {
		g.RegisterService(&kvServiceDesc, &kvServer{s: cfg.kv})
	}
	// Every server answers Hello (geo.go), with or without a geography.
	methods := map[string]MethodHandler{"Hello": helloHandler(cfg.geo)}
	for name, h := range cfg.methods {
		methods[name] = h
	}
	g.RegisterService(nodeServiceDesc(methods), nodeServer{})
	for _, es := range cfg.services {
		g.RegisterService(es.desc, es.impl)
	}
	if cfg.clock != nil {
		g.RegisterService(&clockServiceDesc, clockServer{now: cfg.clock})
	}
	s := &Server{g: g, ln: ln}
	go func() { _ = g.Serve(ln) }()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stop closes the listener and every connection at once, and waits for
// the handlers running to return (their contexts are cancelled).
func (s *Server) Stop() { s.g.Stop() }

// TransportConfig configures a Transport.
type TransportConfig struct {
	// Resolve returns a node's RPC address.
	Resolve func(nodeID uint64) (string, error)
	// Delay, when set, is the one-way delay injected before a message to
	// nodeID leaves (simulated geography); messages keep their order.
	Delay func(nodeID uint64) time.Duration
	// Geo, when set, is this node's geography: localities are exchanged
	// with each peer on connect, and (unless Delay is set) messages and
	// KV batches pay the latency map's one-way delay (geo.go).
	Geo *Geography
	// Logger receives connection errors (nil: discarded).
	Logger *slog.Logger
	// Faults, when set, cuts this node off from chosen peers (faults.go).
	Faults *Faults
	// Creds are the node's transport credentials (creds.go; nil:
	// plaintext), for raft streams, snapshots and KV batches alike.
	Creds *Creds
	// QueueBytes bounds the bytes queued for one peer (invariant T1; 0:
	// defaultQueueBytes, 128 MiB).
	QueueBytes int64
}

// Transport sends raft envelopes to other nodes: one queue, one sender
// goroutine and one gRPC stream per destination node. It implements
// raftnode.Transport.
type Transport struct {
	cfg    TransportConfig
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	peers map[uint64]*peer
	wg    sync.WaitGroup

	// Dropped counts envelopes dropped because a peer's queue was full or
	// its connection failed.
	Dropped atomic.Int64
	// DroppedBytes counts the envelopes of Dropped that a peer's queue
	// refused for its bytes (invariant T1).
	DroppedBytes atomic.Int64
	// kvSent counts the KV batches this node sent to other nodes, by
	// tablet (kvpb.TabletID → *atomic.Int64; KVBatchesSent).
	kvSent sync.Map
}

// countKV counts a KV batch sent to another node for tablet.
func (t *Transport) countKV(tablet kvpb.TabletID) {
	c, ok := t.kvSent.Load(tablet)
	if !ok {
		c, _ = t.kvSent.LoadOrStore(tablet, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// KVBatchesSent is how many KV batches for tablet this node has sent to
// other nodes: what a read served by a local replica avoids.
func (t *Transport) KVBatchesSent(tablet kvpb.TabletID) int64 {
	if c, ok := t.kvSent.Load(tablet); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

type queued struct {
	env raftnode.Envelope
	at  time.Time
	// size is msgBytes(env.Msg), taken off peer.bytes when the message
	// leaves the queue.
	size int64
}

type peer struct {
	id uint64
	q  chan queued
	// bytes is the size of the messages in q (invariant T1).
	bytes atomic.Int64
}

// msgBytes is what a raft message costs in memory while it waits, about
// its encoded size: its entries' payloads and a snapshot's data, which
// are nearly all of a large message, and a fixed overhead for the rest.
// It reads lengths only (Send runs in the node's round).
func msgBytes(m *pb.Message) int64 {
	n := int64(64 + len(m.GetContext()))
	for _, e := range m.GetEntries() {
		n += int64(32 + len(e.GetData()))
	}
	if s := m.GetSnapshot(); s != nil {
		n += int64(len(s.GetData()))
	}
	return n
}

// QueuedBytes is the size of the messages queued for nodeID and not yet
// taken into a frame (invariant T1).
func (t *Transport) QueuedBytes(nodeID uint64) int64 {
	t.mu.Lock()
	p := t.peers[nodeID]
	t.mu.Unlock()
	if p == nil {
		return 0
	}
	return p.bytes.Load()
}

// NewTransport makes a Transport; Close stops it.
func NewTransport(cfg TransportConfig) *Transport {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Delay == nil && cfg.Geo != nil {
		cfg.Delay = cfg.Geo.OneWay
	}
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = defaultQueueBytes
	}
	return &Transport{cfg: cfg, ctx: ctx, cancel: cancel, peers: map[uint64]*peer{}}
}

// Send queues envs for their destinations without blocking.
func (t *Transport) Send(envs []raftnode.Envelope) {
	now := time.Now()
	for _, e := range envs {
		if t.cfg.Faults.IsCut(e.Msg.GetTo()) {
			t.Dropped.Add(1)
			continue
		}
		p := t.peer(e.Msg.GetTo())
		if p == nil {
			t.Dropped.Add(1)
			continue
		}
		// Invariant T1: the bytes are reserved before the message is
		// queued, and a reservation that passes the bound is given back,
		// unless the queue held nothing.
		size := msgBytes(e.Msg)
		if v := p.bytes.Add(size); size > smallMsgBytes && v > t.cfg.QueueBytes && v != size {
			p.bytes.Add(-size)
			t.Dropped.Add(1)
			t.DroppedBytes.Add(1)
			continue
		}
		select {
		case p.q <- queued{env: e, at: now, size: size}:
		default:
			p.bytes.Add(-size)
			t.Dropped.Add(1)
		}
	}
}

// take is a message leaving p's queue: its bytes are no longer queued.
func (p *peer) take(q queued) queued {
	p.bytes.Add(-q.size)
	return q
}

func (t *Transport) peer(id uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		return nil
	}
	p := t.peers[id]
	if p == nil {
		p = &peer{id: id, q: make(chan queued, queueLen)}
		t.peers[id] = p
		t.wg.Add(1)
		go t.run(p)
	}
	return p
}

// Close stops every sender and closes the connections; queued messages
// are dropped.
func (t *Transport) Close() {
	t.cancel()
	t.wg.Wait()
}

// run sends p's queue, batching what has accumulated, over a stream it
// (re)opens as needed.
func (t *Transport) run(p *peer) {
	defer t.wg.Done()
	var conn *grpc.ClientConn
	var stream grpc.ClientStream
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	var batch []raftnode.Envelope
	// held is a message taken from the queue whose delay had not passed
	// when its predecessors' batch left: it starts the next one.
	var held *queued
	for {
		var first queued
		if held != nil {
			first, held = *held, nil
		} else {
			select {
			case <-t.ctx.Done():
				return
			case q := <-p.q:
				first = p.take(q)
			}
		}
		if stream == nil {
			// Connect (and learn the peer's locality) before waiting out
			// the delay, which depends on it.
			var err error
			if conn, stream, err = t.dial(p.id, conn); err != nil {
				t.cfg.Logger.Debug("rpc: connecting", "node", p.id, "err", err)
				t.Dropped.Add(1)
				if !t.sleep(100 * time.Millisecond) {
					return
				}
				continue
			}
		}
		if !t.wait(first.at, p.id) {
			return
		}
		batch = append(batch[:0], first.env)
		size, limit := first.size, frameLimit()
	more:
		for len(batch) < maxBatch && size < limit {
			select {
			case q := <-p.q:
				q = p.take(q)
				// Only messages already due join the batch: waiting for
				// each newcomer's delay while more keep arriving would
				// hold the batch back until it is full (under a steady
				// stream of heartbeats, seconds with a 72 ms delay).
				// Nor does one that would take the frame past its bound
				// (invariant T2): it starts the next frame.
				if !t.due(q.at, p.id) || size+q.size > limit {
					held = &q
					break more
				}
				batch = append(batch, q.env)
				size += q.size
			default:
				break more
			}
		}
		if t.cfg.Faults.IsCut(p.id) {
			// Cut while these were queued: a partition loses them.
			t.Dropped.Add(int64(len(batch)))
			continue
		}
		// A fresh buffer each time: gRPC may still hold the last one
		// after SendMsg returns.
		buf, err := encodeBatch(nil, batch)
		if err != nil {
			t.cfg.Logger.Error("rpc: encoding a batch", "node", p.id, "err", err)
			t.Dropped.Add(int64(len(batch)))
			continue
		}
		if err := stream.SendMsg(&buf); err != nil {
			t.cfg.Logger.Debug("rpc: sending", "node", p.id, "err", err)
			t.Dropped.Add(int64(len(batch)))
			stream = nil
		}
	}
}

// frameLimit is the bound of invariant T2 on a frame's messages.
func frameLimit() int64 {
	return min(frameBytes, int64(MaxBatchSize)/2)
}

// wait holds a message queued at until its injected delay has passed.
func (t *Transport) wait(at time.Time, to uint64) bool {
	if t.cfg.Delay == nil {
		return t.ctx.Err() == nil
	}
	return t.sleep(time.Until(at.Add(t.cfg.Delay(to))))
}

// due reports whether a message queued at may leave now.
func (t *Transport) due(at time.Time, to uint64) bool {
	return t.cfg.Delay == nil || !time.Now().Before(at.Add(t.cfg.Delay(to)))
}

func (t *Transport) sleep(d time.Duration) bool {
	if d <= 0 {
		return t.ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-t.ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

func (t *Transport) dial(id uint64, conn *grpc.ClientConn) (*grpc.ClientConn, grpc.ClientStream, error) {
	if conn == nil {
		addr, err := t.cfg.Resolve(id)
		if err != nil {
			return nil, nil, fmt.Errorf("resolving node %d: %w", id, err)
		}
		if conn, err = dialConn(addr, t.cfg.Creds); err != nil {
			return nil, nil, err
		}
	}
	if err := t.cfg.Geo.exchange(t.ctx, conn, id); err != nil {
		return conn, nil, err
	}
	stream, err := conn.NewStream(t.ctx, &serviceDesc.Streams[0], fullMethod)
	if err != nil {
		return conn, nil, err
	}
	return conn, stream, nil
}

// dialConn makes a client connection to a node (lazily connected).
func dialConn(addr string, creds *Creds) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		creds.dialOption(),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName), grpc.MaxCallSendMsgSize(MaxBatchSize)))
}
