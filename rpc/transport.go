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
)

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
}

type peer struct {
	id uint64
	q  chan queued
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
		select {
		case p.q <- queued{env: e, at: now}:
		default:
			t.Dropped.Add(1)
		}
	}
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
			case first = <-p.q:
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
	more:
		for len(batch) < maxBatch {
			select {
			case q := <-p.q:
				// Only messages already due join the batch: waiting for
				// each newcomer's delay while more keep arriving would
				// hold the batch back until it is full (under a steady
				// stream of heartbeats, seconds with a 72 ms delay).
				if !t.due(q.at, p.id) {
					held = &q
					break more
				}
				batch = append(batch, q.env)
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
