package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

func msg(to, index uint64) *pb.Message {
	typ := pb.MessageType_MsgApp
	return &pb.Message{Type: &typ, To: &to, Index: &index, Entries: []*pb.Entry{{Index: &index, Data: []byte("x")}}}
}

func TestBatchRoundTrip(t *testing.T) {
	envs := []raftnode.Envelope{{TabletID: 1, Msg: msg(2, 10)}, {TabletID: 1 << 40, Msg: msg(3, 11)}}
	b, err := encodeBatch(nil, envs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].TabletID != 1<<40 || !proto.Equal(got[0].Msg, envs[0].Msg) || !proto.Equal(got[1].Msg, envs[1].Msg) {
		t.Fatalf("round trip: %v", got)
	}
	for _, bad := range [][]byte{{5}, b[:len(b)-1], append(b[:len(b):len(b)], 0), {1, 1, 200, 1}} {
		if _, err := decodeBatch(bad); err == nil {
			t.Errorf("decodeBatch(%x) accepted garbage", bad)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	b, _ := encodeBatch(nil, []raftnode.Envelope{{TabletID: 7, Msg: msg(2, 1)}})
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		envs, err := decodeBatch(data)
		if err != nil {
			return
		}
		again, err := encodeBatch(nil, envs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeBatch(again); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
	})
}

// collector is a Handler that records what arrives.
type collector struct {
	mu   sync.Mutex
	got  []raftnode.Envelope
	when []time.Time
}

func (c *collector) handle(e raftnode.Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, e)
	c.when = append(c.when, time.Now())
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestTransport: messages arrive in order and batched; an injected delay
// holds them back; a peer that is down costs drops, not blocking, and is
// reached once it is up.
func TestTransport(t *testing.T) {
	c := &collector{}
	srv := Serve(listen(t, "127.0.0.1:0"), c.handle, nil)
	defer srv.Stop()
	addr := srv.Addr().String()
	var mu sync.Mutex
	delay := time.Duration(0)
	tr := NewTransport(TransportConfig{
		Resolve: func(uint64) (string, error) { return addr, nil },
		Delay: func(uint64) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return delay
		},
	})
	defer tr.Close()

	const n = 2000
	for i := range n {
		tr.Send([]raftnode.Envelope{{TabletID: 9, Msg: msg(2, uint64(i))}})
	}
	waitFor(t, "all messages", func() bool { return c.count() == n })
	for i, e := range c.got {
		if e.Msg.GetIndex() != uint64(i) || e.TabletID != 9 {
			t.Fatalf("message %d arrived as %d of tablet %d", i, e.Msg.GetIndex(), e.TabletID)
		}
	}

	mu.Lock()
	delay = 80 * time.Millisecond
	mu.Unlock()
	sent := time.Now()
	tr.Send([]raftnode.Envelope{{TabletID: 9, Msg: msg(2, n)}})
	waitFor(t, "the delayed message", func() bool { return c.count() == n+1 })
	if d := c.when[n].Sub(sent); d < 80*time.Millisecond {
		t.Errorf("a message delayed by 80ms arrived after %v", d)
	}
	mu.Lock()
	delay = 0
	mu.Unlock()

	// A node that is down: sends do not block, and drop.
	ln := listen(t, "127.0.0.1:0")
	downAddr := ln.Addr().String()
	ln.Close()
	tr2 := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return downAddr, nil }})
	defer tr2.Close()
	start := time.Now()
	for i := range 3 * queueLen {
		tr2.Send([]raftnode.Envelope{{TabletID: 1, Msg: msg(5, uint64(i))}})
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("sending to a down node blocked for %v", el)
	}
	if tr2.Dropped.Load() == 0 {
		t.Errorf("nothing dropped for a down node")
	}
	// Once it is up, later messages get through.
	c2 := &collector{}
	srv2 := Serve(listen(t, downAddr), c2.handle, nil)
	defer srv2.Stop()
	waitFor(t, "the node coming up", func() bool {
		tr2.Send([]raftnode.Envelope{{TabletID: 1, Msg: msg(5, 1)}})
		time.Sleep(20 * time.Millisecond)
		return c2.count() > 0
	})
}

// TestGarbageStream: a stream that sends bytes that are not a batch is
// cut off, and the server goes on serving well-formed streams.
func TestGarbageStream(t *testing.T) {
	c := &collector{}
	srv := Serve(listen(t, "127.0.0.1:0"), c.handle, nil)
	defer srv.Stop()
	conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := conn.NewStream(context.Background(), &serviceDesc.Streams[0], fullMethod)
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte{3, 1, 0xff, 0xff, 0xff}
	_ = stream.SendMsg(&garbage)
	var reply []byte
	if err := stream.RecvMsg(&reply); err == nil {
		t.Fatal("the server accepted a garbage batch")
	}
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return srv.Addr().String(), nil }})
	defer tr.Close()
	tr.Send([]raftnode.Envelope{{TabletID: 1, Msg: msg(2, 1)}})
	waitFor(t, "a good message after a bad stream", func() bool { return c.count() == 1 })
}

// memSM is a state machine that keeps applied entries in memory, for
// checking replication end to end.
type memSM struct {
	mu   sync.Mutex
	data []string
}

func (m *memSM) Apply(_ *storage.Batch, e *pb.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = append(m.data, string(e.GetData()))
	return nil
}
func (m *memSM) Snapshot() ([]byte, error)                        { return nil, nil }
func (m *memSM) ApplySnapshot(*storage.Batch, *pb.Snapshot) error { return nil }
func (m *memSM) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.data)
}

// TestRaftOverRPC: three nodes' multi-raft on loopback, each with its own
// engine, scheduler goroutine, server and transport, elect a leader for
// each of several groups and replicate proposals to every replica.
func TestRaftOverRPC(t *testing.T) {
	const nodes, tablets, proposals = 3, 4, 50
	var servers []*Server
	addrs := map[uint64]string{}
	var raftNodes []*raftnode.Node
	sms := map[[2]uint64]*memSM{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// The schedulers stop before the engines and transports they use
	// close (a tick reads the log: the read lease's heartbeat round).
	var closers []func()
	defer func() {
		cancel()
		wg.Wait()
		for _, s := range servers {
			s.Stop()
		}
		for _, c := range closers {
			c()
		}
	}()
	var lns []net.Listener
	for id := uint64(1); id <= nodes; id++ {
		ln := listen(t, "127.0.0.1:0")
		lns = append(lns, ln)
		addrs[id] = ln.Addr().String()
	}
	for id := uint64(1); id <= nodes; id++ {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		tr := NewTransport(TransportConfig{Resolve: func(to uint64) (string, error) {
			if a, ok := addrs[to]; ok {
				return a, nil
			}
			return "", fmt.Errorf("no node %d", to)
		}})
		closers = append(closers, tr.Close, func() { _ = eng.Close() })
		n := raftnode.NewNode(raftnode.Config{NodeID: id, ElectionTicks: 10}, eng, tr)
		for tid := uint64(1); tid <= tablets; tid++ {
			sm := &memSM{}
			sms[[2]uint64{id, tid}] = sm
			if _, err := n.AddReplica(tid, []uint64{1, 2, 3}, sm); err != nil {
				t.Fatal(err)
			}
		}
		raftNodes = append(raftNodes, n)
		servers = append(servers, Serve(lns[id-1], func(e raftnode.Envelope) { _ = n.Step(e) }, nil))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(ctx, 10*time.Millisecond); err != nil {
				t.Error(err)
			}
		}()
	}
	// Propose through whichever node; raft forwards to the leader once
	// there is one, and a proposal made before is retried.
	for tid := uint64(1); tid <= tablets; tid++ {
		for i := range proposals {
			data := fmt.Appendf(nil, "t%d-%d", tid, i)
			waitFor(t, "a leader to take the proposal", func() bool {
				r := raftNodes[i%nodes].Replica(tid).Status()
				if r.Lead == 0 {
					return false
				}
				return raftNodes[r.Lead-1].Propose(tid, data) == nil
			})
		}
	}
	for key, sm := range sms {
		waitFor(t, fmt.Sprintf("node %d tablet %d to apply every proposal", key[0], key[1]), func() bool { return sm.len() >= proposals })
	}
	for tid := uint64(1); tid <= tablets; tid++ {
		want := sms[[2]uint64{1, tid}]
		for id := uint64(2); id <= nodes; id++ {
			got := sms[[2]uint64{id, tid}]
			got.mu.Lock()
			want.mu.Lock()
			for i := range want.data {
				if got.data[i] != want.data[i] {
					t.Errorf("tablet %d: node %d applied %q at %d, node 1 %q", tid, id, got.data[i], i, want.data[i])
				}
			}
			want.mu.Unlock()
			got.mu.Unlock()
		}
	}
}

// TestSnapshotStream: a tablet's snapshot image made on one node's engine
// streams to another node, which writes it to a file on its engine's
// filesystem and ingests it; the tablet's data then reads the same on
// both, and a receiver's refusal reaches the sender.
func TestSnapshotStream(t *testing.T) {
	open := func() *storage.Engine {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return eng
	}
	sender, receiver := open(), open()
	desc := kvpb.TabletDescriptor{TabletID: 3, StartKey: []byte("\x03a"), EndKey: []byte("\x03z")}
	b := sender.NewBatch()
	for i := range 20000 {
		k := fmt.Appendf(nil, "\x03k%06d", i)
		if err := b.Put(storage.MVCCKey{Key: k, Timestamp: hlc.Timestamp{WallTime: 100}}, bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	w, err := sender.NewSSTWriter("out.sst")
	if err != nil {
		t.Fatal(err)
	}
	snap := sender.NewSnapshot()
	if _, err := tablet.WriteSnapshot(snap, desc, w); err != nil {
		t.Fatal(err)
	}
	snap.Close()
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}

	var got raftnode.Envelope
	refuse := false
	recv := func(_ context.Context, env raftnode.Envelope, image io.Reader) error {
		if refuse {
			return errors.New("no room")
		}
		got = env
		f, err := receiver.FS().Create("in.sst", vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, image); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return tablet.IngestSnapshot(context.Background(), receiver, "in.sst")
	}
	srv := Serve(listen(t, "127.0.0.1:0"), func(raftnode.Envelope) {}, recv)
	defer srv.Stop()
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return srv.Addr().String(), nil }})
	defer tr.Close()

	typ := pb.MessageType_MsgSnap
	to, index := uint64(2), uint64(77)
	env := raftnode.Envelope{TabletID: 3, Msg: &pb.Message{Type: &typ, To: &to, Snapshot: &pb.Snapshot{Data: []byte("header"), Metadata: &pb.SnapshotMetadata{Index: &index}}}}
	f, err := sender.FS().Open("out.sst")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SendSnapshot(context.Background(), 2, env, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got.TabletID != 3 || got.Msg.GetSnapshot().GetMetadata().GetIndex() != 77 || string(got.Msg.GetSnapshot().GetData()) != "header" {
		t.Errorf("received header %v", got)
	}
	for _, k := range []string{"\x03k000000", "\x03k012345", "\x03k019999"} {
		want, _, _ := sender.Get(storage.MVCCKey{Key: []byte(k), Timestamp: hlc.Timestamp{WallTime: 100}})
		v, ok, err := receiver.Get(storage.MVCCKey{Key: []byte(k), Timestamp: hlc.Timestamp{WallTime: 100}})
		if err != nil || !ok || !bytes.Equal(v, want) {
			t.Errorf("%q on the receiver: %v %v", k, ok, err)
		}
	}
	refuse = true
	f, _ = sender.FS().Open("out.sst")
	defer f.Close()
	if err := tr.SendSnapshot(context.Background(), 2, env, f); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Errorf("a refused snapshot: %v", err)
	}
}
