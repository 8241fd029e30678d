package distsql

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Gateway starts flows from this node: it keeps one gRPC connection per
// node it has sent a fragment to. Safe for concurrent use.
type Gateway struct {
	resolve func(nodeID uint64) (string, error)
	dial    []grpc.DialOption
	// node is this node's ID (SetNode): the gateway its clients'
	// fragments name (Spec.Gateway).
	node atomic.Uint64

	mu    sync.Mutex
	conns map[uint64]*grpc.ClientConn
	// suspects are nodes a fragment's stream could not reach, until when
	// the planner places no fragment on them (Suspect).
	suspects map[uint64]time.Time
}

// suspectFor is how long a node whose stream broke gets no fragments:
// long enough for its leases to move if it died.
const suspectFor = 5 * time.Second

// Suspect says whether node recently could not be reached (a Planner's
// Avoid): fragments of its tablets then run on the gateway, which reads
// them through its KV router (invariant 1).
func (g *Gateway) Suspect(node uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.suspects[node]
	return ok && time.Now().Before(until)
}

func (g *Gateway) suspect(node uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.suspects == nil {
		g.suspects = map[uint64]time.Time{}
	}
	g.suspects[node] = time.Now().Add(suspectFor)
}

// NewGateway returns a gateway that finds nodes' RPC addresses with
// resolve and dials them with dial (none: rpc.DialOptions, plaintext; a
// secure node passes its Creds.DialOptions, or its peers refuse it).
func NewGateway(resolve func(nodeID uint64) (string, error), dial ...grpc.DialOption) *Gateway {
	if len(dial) == 0 {
		dial = rpc.DialOptions()
	}
	return &Gateway{resolve: resolve, dial: dial, conns: map[uint64]*grpc.ClientConn{}}
}

// SetNode names the gateway's node, the one its clients' fragments
// read for (Spec.Gateway); until it is set they name none.
func (g *Gateway) SetNode(id uint64) { g.node.Store(id) }

// Close closes the gateway's connections.
func (g *Gateway) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, c := range g.conns {
		_ = c.Close()
		delete(g.conns, id)
	}
}

func (g *Gateway) conn(node uint64) (*grpc.ClientConn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.conns[node]; c != nil {
		return c, nil
	}
	addr, err := g.resolve(node)
	if err != nil {
		return nil, fmt.Errorf("distsql: resolving node %d: %w", node, err)
	}
	c, err := grpc.NewClient(addr, g.dial...)
	if err != nil {
		return nil, fmt.Errorf("distsql: dialing node %d: %w", node, err)
	}
	g.conns[node] = c
	return c, nil
}

// Batch is one batch of a fragment's KVs, in key order within the
// fragment (invariant 6), or of its rows when its Spec had a Proc (each
// row encoded by the processor). The caller owns KVs and Rows.
type Batch struct {
	Fragment int
	KVs      []kvpb.KeyValue
	Rows     [][]byte
}

type item struct {
	b      Batch
	size   int64
	stream grpc.ClientStream
}

// Flow is a running physical plan, consumed by one goroutine through
// Next. Close must be called.
type Flow struct {
	ctx    context.Context // the caller's
	fctx   context.Context // cancelled by the first failure (invariant 5)
	cancel context.CancelFunc
	budget *mon.Budget
	out    chan item
	// ordered: each fragment sends on its own channel of outs, and Next
	// drains them in fragment order (key order when the fragments are
	// a span's tablets in order).
	ordered bool
	outs    []chan item
	cur     int

	errMu sync.Mutex
	err   error

	// held is the batch Next returned last; helds[i] the one NextOf(i)
	// returned last (a merge holds one batch per fragment).
	held  item
	helds []item
	stats []FragmentStats
}

// Start runs frags and returns their flow. budget (nil: unaccounted)
// holds the batches the gateway has received and not yet consumed
// (invariant 4).
func (g *Gateway) Start(ctx context.Context, frags []Fragment, budget *mon.Budget) *Flow {
	return g.start(ctx, frags, budget, false)
}

// StartOrdered is Start with Next returning every batch of fragment 0,
// then of fragment 1, and so on: with fragments cut from one span in key
// order (PlanScan), the batches come in key order. The later fragments
// still run ahead, each up to its window (invariant 3).
func (g *Gateway) StartOrdered(ctx context.Context, frags []Fragment, budget *mon.Budget) *Flow {
	return g.start(ctx, frags, budget, true)
}

// StartMerged is Start for a consumer that reads each fragment's
// batches on their own, with NextOf (a merge of sorted fragments at the
// gateway). Next must not be called on its flow.
func (g *Gateway) StartMerged(ctx context.Context, frags []Fragment, budget *mon.Budget) *Flow {
	f := g.start(ctx, frags, budget, true)
	f.helds = make([]item, len(frags))
	return f
}

func (g *Gateway) start(ctx context.Context, frags []Fragment, budget *mon.Budget, ordered bool) *Flow {
	fctx, cancel := context.WithCancel(ctx)
	f := &Flow{ctx: ctx, fctx: fctx, cancel: cancel, budget: budget, out: make(chan item), stats: make([]FragmentStats, len(frags)), ordered: ordered}
	if ordered {
		f.outs = make([]chan item, len(frags))
		for i := range f.outs {
			f.outs[i] = make(chan item)
		}
	}
	// A client's statement (or a fragment run for one, invariant 7)
	// names its gateway on every fragment (invariant 8).
	gateway := kv.ClientGateway(ctx, g.node.Load())
	var wg sync.WaitGroup
	for i, fr := range frags {
		fr.Spec.Fragment = i
		fr.Spec.Gateway = gateway
		if fr.Spec.Window <= 0 {
			fr.Spec.Window = DefaultWindow
		}
		if fr.Spec.BatchRows <= 0 {
			fr.Spec.BatchRows = DefaultBatchRows
		}
		wg.Go(func() {
			if f.ordered {
				defer close(f.outs[fr.Spec.Fragment])
			}
			if err := g.run(f, fr); err != nil {
				f.fail(err)
			}
		})
	}
	go func() {
		wg.Wait()
		close(f.out)
	}()
	return f
}

// fail records the flow's first error and stops every fragment.
func (f *Flow) fail(err error) {
	f.errMu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.errMu.Unlock()
	f.cancel()
}

func (f *Flow) firstErr() error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}

// run drives one fragment's stream until it is done, fails, or the flow
// is cancelled.
func (g *Gateway) run(f *Flow, fr Fragment) error {
	c, err := g.conn(fr.Node)
	if err != nil {
		return err
	}
	stream, err := c.NewStream(f.fctx, &serviceDesc.Streams[0], fullMethod)
	if err != nil {
		return g.streamErr(f, fr, err)
	}
	m := encodeSpec(fr.Spec)
	if err := stream.SendMsg(&m); err != nil {
		return g.streamErr(f, fr, err)
	}
	for {
		var m []byte
		if err := stream.RecvMsg(&m); err != nil {
			return g.streamErr(f, fr, err)
		}
		if len(m) == 0 {
			return errCorrupt
		}
		switch m[0] {
		case msgBatch, msgRows:
			var b Batch
			var n int
			if m[0] == msgBatch {
				b.KVs, err = decodeBatch(m[1:])
				n = len(b.KVs)
			} else {
				b.Rows, err = decodeRows(m[1:])
				n = len(b.Rows)
			}
			if err != nil {
				return err
			}
			b.Fragment = fr.Spec.Fragment
			size := int64(len(m))
			// Counted as received, so a flow closed early still
			// reports what each fragment shipped.
			st := &f.stats[fr.Spec.Fragment]
			st.Node = fr.Node
			st.Rows += int64(n)
			st.Bytes += size
			st.Batches++
			if f.budget != nil {
				if err := f.budget.Reserve(size); err != nil {
					return err
				}
			}
			out := f.out
			if f.ordered {
				out = f.outs[fr.Spec.Fragment]
			}
			select {
			case out <- item{b: b, size: size, stream: stream}:
			case <-f.fctx.Done():
				f.release(size)
				return nil
			}
		case msgDone:
			st, err := decodeDone(m[1:])
			if err != nil {
				return err
			}
			// The fragment's own count of what it sent equals what
			// arrived; its time is what only it knows.
			f.stats[fr.Spec.Fragment].Node = st.Node
			f.stats[fr.Spec.Fragment].Time = st.Time
			return nil
		case msgError:
			r, err := decodeError(m[1:])
			if err != nil {
				return err
			}
			return r.err(fr)
		default:
			return errCorrupt
		}
	}
}

// streamErr is the error of a broken stream: the flow's cancellation
// when that is what broke it, else a connection failure.
func (g *Gateway) streamErr(f *Flow, fr Fragment, err error) error {
	if f.fctx.Err() != nil {
		return nil // someone else's failure or the caller's cancel
	}
	if status.Code(err) == codes.Unavailable {
		// The node is gone or unreachable: the statement may run again
		// (a retryable error, which the session retries for an
		// implicit transaction that has sent no rows), and its
		// fragments then go elsewhere for a while.
		g.suspect(fr.Node)
		return &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable,
			Detail: fmt.Sprintf("distsql: fragment %d on node %d unreachable: %v", fr.Spec.Fragment, fr.Node, err)}
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		// The statement's deadline (statement_timeout), which gRPC
		// carries to the server: the server's timer may end the stream
		// a moment before this side's context reports it.
		return pgerror.Wrapf(err, pgerrcode.QueryCanceled, "distsql: fragment %d on node %d: %v", fr.Spec.Fragment, fr.Node, err)
	}
	return pgerror.Wrapf(err, pgerrcode.ConnectionFailure, "distsql: fragment %d on node %d: %v", fr.Spec.Fragment, fr.Node, err)
}

// err turns a fragment's failure back into an error the session knows:
// a retryable one as a KV retry (so the statement can be retried as a
// local read failing the same way would be), others with their SQLSTATE.
func (r remoteError) err(fr Fragment) error {
	if r.retryable {
		return &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable, Detail: fmt.Sprintf("distsql fragment on node %d: %s", fr.Node, r.msg)}
	}
	return pgerror.New(r.code, "%s", r.msg).WithDetail("in distributed fragment %d on node %d", fr.Spec.Fragment, fr.Node)
}

func (f *Flow) release(size int64) {
	if f.budget != nil {
		f.budget.Release(size)
	}
}

// Next returns the flow's next batch, ok=false at its end, or the flow's
// first error. Taking a batch gives the previous one's memory back and
// grants its fragment one more batch (invariants 3, 4).
func (f *Flow) Next() (b Batch, ok bool, err error) {
	f.ack()
	out := f.out
	if f.ordered {
		for {
			if f.cur == len(f.outs) {
				return Batch{}, false, f.finalErr()
			}
			select {
			case it, open := <-f.outs[f.cur]:
				if !open {
					f.cur++
					continue
				}
				f.held = it
				return it.b, true, nil
			case <-f.fctx.Done():
				return Batch{}, false, f.finalErr()
			}
		}
	}
	select {
	case it, open := <-out:
		if !open {
			return Batch{}, false, f.finalErr()
		}
		f.held = it
		return it.b, true, nil
	case <-f.fctx.Done():
		return Batch{}, false, f.finalErr()
	}
}

func (f *Flow) ack() { f.ackItem(&f.held) }

func (f *Flow) ackItem(held *item) {
	if held.stream == nil {
		return
	}
	f.release(held.size)
	m := encodeCredit(1)
	// A fragment that has finished no longer reads credits; its stream
	// refuses the send, which is harmless.
	_ = held.stream.SendMsg(&m)
	*held = item{}
}

// NextOf returns fragment i's next batch (a flow started with
// StartMerged), ok=false at that fragment's end, or the flow's first
// error. Taking a batch gives fragment i's previous one back (invariants
// 3, 4).
func (f *Flow) NextOf(i int) (b Batch, ok bool, err error) {
	f.ackItem(&f.helds[i])
	select {
	case it, open := <-f.outs[i]:
		if !open {
			// The fragment ended, or failed and so stopped the flow.
			return Batch{}, false, f.finalErr()
		}
		f.helds[i] = it
		return it.b, true, nil
	case <-f.fctx.Done():
		return Batch{}, false, f.finalErr()
	}
}

// finalErr is what Next returns once the flow stopped: the caller's
// cancellation (statement_timeout, CancelRequest) first, else the first
// fragment failure.
func (f *Flow) finalErr() error {
	if err := context.Cause(f.ctx); err != nil {
		return err
	}
	return f.firstErr()
}

// Close stops the flow (if it still runs) and gives back the memory of
// every batch it held.
func (f *Flow) Close() {
	f.release(f.held.size)
	f.held = item{}
	for i := range f.helds {
		f.release(f.helds[i].size)
		f.helds[i] = item{}
	}
	f.cancel()
	for _, o := range f.outs {
		for it := range o {
			f.release(it.size)
		}
	}
	for it := range f.out {
		f.release(it.size)
	}
}

// Stats returns each fragment's figures: the KVs, bytes and batches the
// gateway received from it, and (once it finished) its node's report of
// its time. Read it only after Next returned the end or after Close.
func (f *Flow) Stats() []FragmentStats { return f.stats }
