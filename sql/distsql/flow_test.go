package distsql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/testcluster"
	"github.com/jackc/pgerrcode"
)

// env is a 3-node cluster whose keys \x03k00000..\x03k00599 are cut into
// three tablets at 200 and 400, tablet i's lease on node i+1, with a
// DistSQL server on every node.
type env struct {
	c       *testcluster.Cluster
	servers []*Server
	gw      *Gateway
	planner *Planner
	span    kvpb.Span
	snap    Snapshot
}

const nKeys = 600

func key(i int) []byte { return fmt.Appendf(nil, "\x03k%05d", i) }

// waitFor polls cond until it holds (a condition, not a duration).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func retry(t *testing.T, what string, fn func() error) {
	t.Helper()
	var err error
	for range 50 {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func startEnv(t *testing.T) *env {
	t.Helper()
	return startEnvWith(t, testcluster.ClusterOptions{})
}

// startEnvWith is startEnv on a cluster started with opts.
func startEnvWith(t *testing.T, opts testcluster.ClusterOptions) *env {
	t.Helper()
	c := testcluster.StartCluster(t, opts)
	c.WaitLeader(1, 10*time.Second)
	ctx := context.Background()
	db := c.Nodes[0].DB
	for lo := 0; lo < nKeys; lo += 100 {
		retry(t, "seeding", func() error {
			b := &kv.Batch{}
			for i := lo; i < lo+100; i++ {
				b.Put(key(i), fmt.Appendf(nil, "v0-%d", i))
			}
			return db.Run(ctx, b)
		})
	}
	for _, at := range []int{200, 400} {
		retry(t, "split", func() error {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.SplitRequest{SplitKey: key(at)})
			_, err := db.Send(ctx, ba)
			return err
		})
	}
	// Tablet of key 0 → node 1, of 200 → node 2, of 400 → node 3.
	for i, at := range []int{0, 200, 400} {
		to := uint64(i + 1)
		var d kvpb.TabletDescriptor
		retry(t, "lookup", func() (err error) {
			d, err = db.TabletCache().Lookup(ctx, key(at), false)
			if err == nil && !bytes.Equal(d.StartKey, key(at)) && at != 0 {
				db.TabletCache().Evict(d)
				err = fmt.Errorf("stale descriptor %s", d.String())
			}
			return err
		})
		waitFor(t, "a leaseholder", func() bool { return c.Leader(d.TabletID) != 0 })
		retry(t, "lease transfer", func() error {
			if l := c.Leader(d.TabletID); l == 0 {
				return fmt.Errorf("tablet %d has no leaseholder", d.TabletID)
			} else if l != to {
				if err := c.Nodes[l-1].Raft.TransferLeader(uint64(d.TabletID), to); err != nil {
					return err
				}
			}
			if l := c.Leader(d.TabletID); l != to {
				return fmt.Errorf("tablet %d lease on %d, want %d", d.TabletID, l, to)
			}
			return nil
		})
	}
	// Versions above the snapshot, which no fragment may return.
	time.Sleep(2 * 50 * time.Millisecond) // past the max offset: see testcluster's split scan test
	snapTS := c.Nodes[0].Clock.Now()
	// Past the snapshot's uncertainty window, so that a fragment reading
	// at the snapshot is sure they came after it.
	waitFor(t, "the clock to pass the uncertainty limit", func() bool {
		return c.Nodes[0].Clock.Now().WallTime > snapTS.WallTime+int64(50*time.Millisecond)
	})
	retry(t, "overwriting", func() error {
		b := &kv.Batch{}
		for i := 0; i < nKeys; i += 7 {
			b.Put(key(i), []byte("newer"))
		}
		return db.Run(ctx, b)
	})
	e := &env{c: c, span: kvpb.Span{Key: key(0), EndKey: key(nKeys)}}
	e.snap = Snapshot{ReadTimestamp: snapTS, UncertaintyLimit: hlc.Timestamp{WallTime: snapTS.WallTime + int64(50*time.Millisecond)}}
	addrs := map[uint64]string{}
	for _, n := range c.Nodes {
		s := NewServer(n.ID, n.DB)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rs := rpc.Serve(ln, func(raftnode.Envelope) {}, nil, s.ServeOption())
		t.Cleanup(rs.Stop)
		addrs[n.ID] = rs.Addr().String()
		e.servers = append(e.servers, s)
	}
	e.gw = NewGateway(func(id uint64) (string, error) { return addrs[id], nil })
	t.Cleanup(e.gw.Close)
	e.planner = &Planner{Gateway: 1, Tablets: db.TabletCache(), Leaseholder: c.Leader}
	return e
}

func (e *env) plan(t *testing.T) []Fragment {
	t.Helper()
	frags, err := e.planner.PlanScan(context.Background(), e.span, e.snap)
	if err != nil {
		t.Fatal(err)
	}
	return frags
}

// gatewayScan is what the gateway alone reads at the snapshot.
func (e *env) gatewayScan(t *testing.T) []kvpb.KeyValue {
	t.Helper()
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: e.snap.ReadTimestamp}}
	ba.Add(&kvpb.ScanRequest{Key: e.span.Key, EndKey: e.span.EndKey})
	br, err := e.c.Nodes[0].DB.Send(context.Background(), ba)
	if err != nil {
		t.Fatal(err)
	}
	return br.Responses[0].(*kvpb.ScanResponse).Rows
}

func (e *env) waitIdle(t *testing.T) {
	t.Helper()
	waitFor(t, "every fragment to stop", func() bool {
		for _, s := range e.servers {
			if s.Metrics().Active != 0 {
				return false
			}
		}
		return true
	})
}

// drain reads a flow to its end: the KVs per fragment, in arrival order.
func drain(f *Flow) (map[int][]kvpb.KeyValue, error) {
	got := map[int][]kvpb.KeyValue{}
	for {
		b, ok, err := f.Next()
		if err != nil || !ok {
			return got, err
		}
		got[b.Fragment] = append(got[b.Fragment], b.KVs...)
	}
}

// TestDistributedScanMatchesGateway: a scan of three tablets led by three
// nodes runs as three fragments, one per node, and returns exactly what
// the gateway's own scan at the same snapshot returns (invariants 2, 6).
func TestDistributedScanMatchesGateway(t *testing.T) {
	e := startEnv(t)
	frags := e.plan(t)
	if len(frags) != 3 || Nodes(frags) != 3 {
		t.Fatalf("plan: %v, want 3 fragments on 3 nodes", frags)
	}
	for _, batchRows := range []int{1, 7, DefaultBatchRows} {
		t.Run(fmt.Sprintf("batch=%d", batchRows), func(t *testing.T) {
			for i := range frags {
				frags[i].Spec.BatchRows = batchRows
			}
			budget := mon.NewBudget("SQL memory", 0)
			f := e.gw.Start(context.Background(), frags, budget)
			got, err := drain(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			var all []kvpb.KeyValue
			for i := range frags {
				all = append(all, got[i]...)
			}
			want := e.gatewayScan(t)
			if len(all) != len(want) || len(want) != nKeys {
				t.Fatalf("got %d KVs, gateway %d, want %d", len(all), len(want), nKeys)
			}
			for i := range want {
				if !bytes.Equal(all[i].Key, want[i].Key) || !bytes.Equal(all[i].Value, want[i].Value) {
					t.Fatalf("KV %d: got %q=%q, gateway %q=%q", i, all[i].Key, all[i].Value, want[i].Key, want[i].Value)
				}
			}
			for i, st := range f.Stats() {
				if st.Node != frags[i].Node || st.Rows != int64(len(got[i])) {
					t.Errorf("fragment %d stats %+v, want node %d rows %d", i, st, frags[i].Node, len(got[i]))
				}
			}
			if u := budget.Used(); u != 0 {
				t.Errorf("budget holds %d bytes after Close", u)
			}
		})
	}
}

// TestFragmentsCountTheClientsGateway: a client's flow started on node 1
// reads its tablets led by nodes 2 and 3 through fragments there, and
// their leaseholders count those reads as node 1's client's (invariant
// 8), so the leases can follow the client; a flow of the node's own work
// is counted for nobody. Before fragments named their gateway, the
// leaseholders counted nothing for either, and a table read only
// through fragments never drew its leases.
func TestFragmentsCountTheClientsGateway(t *testing.T) {
	e := startEnvWith(t, testcluster.ClusterOptions{Geo: &testcluster.GeoOptions{FollowLoad: true}})
	e.gw.SetNode(1)
	frags := e.plan(t)
	if len(frags) != 3 || Nodes(frags) != 3 {
		t.Fatalf("plan: %v, want 3 fragments on 3 nodes", frags)
	}
	counts := func() map[uint64][]store.GatewayCount {
		out := map[uint64][]store.GatewayCount{}
		for _, fr := range frags {
			out[fr.Node] = e.c.Nodes[fr.Node-1].Load.Recent(uint64(fr.Spec.TabletID))
		}
		return out
	}
	run := func(ctx context.Context) {
		f := e.gw.Start(ctx, frags, nil)
		defer f.Close()
		if _, err := drain(f); err != nil {
			t.Fatal(err)
		}
	}
	run(context.Background())
	for node, cs := range counts() {
		if len(cs) != 0 {
			t.Fatalf("after the node's own flow: node %d counted %v for its tablet, want nothing", node, cs)
		}
	}
	run(kv.WithClientRequests(context.Background()))
	for node, cs := range counts() {
		if len(cs) != 1 || cs[0].Node != 1 || cs[0].N == 0 {
			t.Errorf("after a client's flow from node 1: node %d counted %v for its tablet, want requests from gateway 1 only", node, cs)
		}
	}
}

// TestFlowLimit: a limit reaches every fragment; none ships more.
func TestFlowLimit(t *testing.T) {
	e := startEnv(t)
	frags := e.plan(t)
	for i := range frags {
		frags[i].Spec.Limit = 5
		frags[i].Spec.BatchRows = 2
	}
	f := e.gw.Start(context.Background(), frags, nil)
	got, err := drain(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i := range frags {
		if len(got[i]) != 5 || !bytes.Equal(got[i][0].Key, frags[i].Spec.Span.Key) {
			t.Errorf("fragment %d: %d KVs from %q, want 5 from %q", i, len(got[i]), got[i][0].Key, frags[i].Spec.Span.Key)
		}
	}
}

// TestFlowControl: a consumer that reads nothing leaves every fragment
// blocked after exactly Window batches (invariant 3); each batch consumed
// lets exactly one more through.
func TestFlowControl(t *testing.T) {
	e := startEnv(t)
	frags := e.plan(t)
	const window = 2
	for i := range frags {
		frags[i].Spec.BatchRows = 10
		frags[i].Spec.Window = window
	}
	sent := func() int64 {
		var n int64
		for _, s := range e.servers {
			n += s.Metrics().Batches
		}
		return n
	}
	blocked := func() int64 {
		var n int64
		for _, s := range e.servers {
			n += s.Metrics().Blocked
		}
		return n
	}
	base := sent()
	budget := mon.NewBudget("SQL memory", 0)
	f := e.gw.Start(context.Background(), frags, budget)
	defer f.Close()
	waitFor(t, "all fragments blocked on credit", func() bool { return blocked() == 3 })
	if n := sent() - base; n != 3*window {
		t.Fatalf("sent %d batches before any was consumed, want %d", n, 3*window)
	}
	consumed := 0
	for range 10 {
		if _, ok, err := f.Next(); err != nil || !ok {
			t.Fatalf("Next: ok=%t err=%v", ok, err)
		}
		consumed++
		// The previous batch's credit went out; the fragments refill
		// to their window and stop again.
		waitFor(t, "the fragments to block again", func() bool {
			return blocked() == 3 && sent()-base == int64(3*window+consumed-1)
		})
		// At most: window batches per fragment in flight plus the one
		// the consumer holds.
		if n := sent() - base - int64(consumed); n > 3*window {
			t.Fatalf("%d batches unconsumed, window allows %d", n, 3*window)
		}
	}
	if budget.Used() == 0 {
		t.Fatal("the held batches are not accounted")
	}
}

// TestFlowMemoryBudget: a budget too small for one batch fails the flow
// with 53200 and stops every fragment (invariants 4, 5).
func TestFlowMemoryBudget(t *testing.T) {
	e := startEnv(t)
	budget := mon.NewBudget("SQL memory", 64)
	f := e.gw.Start(context.Background(), e.plan(t), budget)
	_, err := drain(f)
	f.Close()
	if c := pgerror.Code(err); c != pgerrcode.OutOfMemory {
		t.Fatalf("err %v (code %s), want 53200", err, c)
	}
	e.waitIdle(t)
	if u := budget.Used(); u != 0 {
		t.Errorf("budget holds %d bytes after Close", u)
	}
}

// TestFragmentErrorStopsFlow: one fragment failing ends the flow with its
// SQLSTATE while the others, blocked on credit, are stopped (invariant 5).
func TestFragmentErrorStopsFlow(t *testing.T) {
	e := startEnv(t)
	frags := e.plan(t)
	for i := range frags {
		frags[i].Spec.BatchRows, frags[i].Spec.Window = 1, 1
	}
	frags[2].Spec.Window = maxWindow + 1 // refused by its server
	f := e.gw.Start(context.Background(), frags, nil)
	_, err := drain(f)
	f.Close()
	if c := pgerror.Code(err); c != pgerrcode.ProtocolViolation {
		t.Fatalf("err %v (code %s), want 08P01", err, c)
	}
	e.waitIdle(t)
}

// TestFlowCancel: cancelling the gateway's context (statement_timeout,
// CancelRequest) stops the remote fragments and Next returns the cause.
func TestFlowCancel(t *testing.T) {
	e := startEnv(t)
	frags := e.plan(t)
	for i := range frags {
		frags[i].Spec.BatchRows, frags[i].Spec.Window = 1, 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := e.gw.Start(ctx, frags, nil)
	if _, ok, err := f.Next(); !ok || err != nil {
		t.Fatalf("first batch: ok=%t err=%v", ok, err)
	}
	waitFor(t, "fragments running", func() bool {
		var n int64
		for _, s := range e.servers {
			n += s.Metrics().Active
		}
		return n == 3
	})
	cancel()
	_, err := drain(f)
	f.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	e.waitIdle(t)
}

// TestUncertainValueIsRetryable: a value written above the snapshot but
// within its uncertainty limit makes the fragment fail retryable, as the
// gateway's own read would (invariant 2).
func TestUncertainValueIsRetryable(t *testing.T) {
	e := startEnv(t)
	frags := e.plan(t)
	// The "newer" versions written after the snapshot lie within a limit
	// far enough above it.
	for i := range frags {
		frags[i].Spec.Snapshot.UncertaintyLimit = hlc.Timestamp{WallTime: e.snap.ReadTimestamp.WallTime + int64(time.Hour)}
	}
	f := e.gw.Start(context.Background(), frags, nil)
	_, err := drain(f)
	f.Close()
	if !kvpb.IsRetryable(err) {
		t.Fatalf("err %v, want a retryable error", err)
	}
}

// TestWireRoundTrip: every message decodes to what was encoded, and
// truncated input never panics (a cut inside a field is an error; a cut
// between fields is a shorter message, which gRPC's framing rules out).
func TestWireRoundTrip(t *testing.T) {
	s := Spec{Fragment: 3, TabletID: 9, Span: kvpb.Span{Key: []byte("a"), EndKey: []byte("b")},
		Snapshot:  Snapshot{ReadTimestamp: hlc.Timestamp{WallTime: 5, Logical: 2}, UncertaintyLimit: hlc.Timestamp{WallTime: 7}},
		BatchRows: 10, Window: 2, Limit: -1, Proc: []byte("proc"), Processor: "backfill", Gateway: 4}
	m := encodeSpec(s)
	got, err := decodeSpec(m)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(s) {
		t.Fatalf("spec: %+v, %v", got, err)
	}
	for i := range len(m) {
		_, _ = decodeSpec(m[:i])
	}
	if _, err := decodeSpec(m[:len(m)-1]); err == nil {
		t.Fatal("a spec cut inside its last field decoded")
	}
	kvs := []kvpb.KeyValue{{Key: []byte("k"), Value: []byte("v"), Timestamp: hlc.Timestamp{WallTime: 1}}, {Key: []byte("k2")}}
	b := encodeBatch(kvs)
	dk, err := decodeBatch(b[1:])
	if err != nil || len(dk) != 2 || string(dk[0].Value) != "v" || string(dk[1].Key) != "k2" {
		t.Fatalf("batch: %+v, %v", dk, err)
	}
	rows := [][]byte{[]byte("r1"), {}, []byte("r3")}
	rb := encodeRows(rows)
	dro, err := decodeRows(rb[1:])
	if err != nil || fmt.Sprint(dro) != fmt.Sprint(rows) {
		t.Fatalf("rows: %q, %v", dro, err)
	}
	for i := 1; i < len(rb); i++ {
		_, _ = decodeRows(rb[1:i])
	}
	if _, err := decodeRows(rb[1 : len(rb)-1]); err == nil {
		t.Fatal("rows cut inside the last row decoded")
	}
	if n, err := decodeCredit(encodeCredit(3)); err != nil || n != 3 {
		t.Fatalf("credit: %d, %v", n, err)
	}
	r := remoteError{code: "53200", msg: "out of memory", retryable: true}
	dr, err := decodeError(encodeError(r)[1:])
	if err != nil || dr != r {
		t.Fatalf("error: %+v, %v", dr, err)
	}
}
