package rpc

import (
	"bytes"
	"net"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/raftnode"
	pb "go.etcd.io/raft/v3/raftpb"
)

// bigApp is an append of one entry of size bytes, as raft's catch-up of a
// lagging follower sends them (up to MaxSizePerMsg, 1 MiB, each).
func bigApp(to, index uint64, size int) *pb.Message {
	typ := pb.MessageType_MsgApp
	return &pb.Message{Type: &typ, To: &to, Index: &index,
		Entries: []*pb.Entry{{Index: &index, Data: bytes.Repeat([]byte{byte(index)}, size)}}}
}

// TestTransportFramesFit is invariant T2: many large appends queued for a
// peer at once (a follower being caught up by many groups) arrive, in
// frames each under MaxBatchSize. Before the bound the sender framed up
// to 512 of them together; gRPC refused the frame (larger than
// MaxBatchSize) and every message in it was lost, every time.
func TestTransportFramesFit(t *testing.T) {
	defer func(old int) { MaxBatchSize = old }(MaxBatchSize)
	MaxBatchSize = 4 << 20 // read by Serve and the transport's dial
	c := &collector{}
	srv := Serve(listen(t, "127.0.0.1:0"), c.handle, nil)
	defer srv.Stop()
	addr := srv.Addr().String()
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return addr, nil }})
	defer tr.Close()

	// 40 appends of 256 KiB, 10 MiB in all, queued in one call: the
	// sender dials on the first and finds the rest queued.
	const n, size = 40, 256 << 10
	envs := make([]raftnode.Envelope, n)
	for i := range envs {
		envs[i] = raftnode.Envelope{TabletID: uint64(1 + i%4), Msg: bigApp(2, uint64(i), size)}
	}
	tr.Send(envs)
	waitFor(t, "every large append", func() bool { return c.count() == n || tr.Dropped.Load() > 0 })
	if d := tr.Dropped.Load(); d > 0 {
		t.Fatalf("%d of %d appends of %d bytes dropped by a live peer (frames past MaxBatchSize %d?)", d, n, size, MaxBatchSize)
	}
	for i, e := range c.got {
		if e.Msg.GetIndex() != uint64(i) || len(e.Msg.GetEntries()[0].GetData()) != size {
			t.Fatalf("append %d arrived as index %d with %d bytes", i, e.Msg.GetIndex(), len(e.Msg.GetEntries()[0].GetData()))
		}
	}
}

// TestTransportBounds is invariant T1: whatever raft sends to a peer
// that takes nothing (down, or its stream stalled), the transport holds
// at most QueueBytes of it, and drops the rest; a queue holding nothing
// still takes one message larger than the bound.
func TestTransportBounds(t *testing.T) {
	// A peer that accepts the connection and never reads: the stream's
	// flow control stalls the sender, as with a paused (SIGSTOP) node.
	ln := listen(t, "127.0.0.1:0")
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	// A peer that is down: nothing listens at its address.
	dl := listen(t, "127.0.0.1:0")
	down := dl.Addr().String()
	dl.Close()

	const bound = 8 << 20
	addrs := map[uint64]string{2: ln.Addr().String(), 3: down}
	tr := NewTransport(TransportConfig{QueueBytes: bound, Resolve: func(id uint64) (string, error) { return addrs[id], nil }})
	defer tr.Close()

	const n, size = 400, 1 << 20 // 400 MiB offered to each peer
	peak := map[uint64]int64{}
	for i := range n {
		for _, to := range []uint64{2, 3} {
			tr.Send([]raftnode.Envelope{{TabletID: 1, Msg: bigApp(to, uint64(i), size)}})
			peak[to] = max(peak[to], tr.QueuedBytes(to))
		}
	}
	for _, to := range []uint64{2, 3} {
		if peak[to] > bound {
			t.Errorf("node %d: %d bytes queued, past the bound of %d", to, peak[to], bound)
		}
		if peak[to] == 0 {
			t.Errorf("node %d: nothing was ever queued", to)
		}
	}
	// Well over half of 800 offered went: at most 8 fit in a queue, and
	// the stalled stream's window takes a few more.
	if d := tr.DroppedBytes.Load(); d < n {
		t.Errorf("%d appends refused for their bytes, want at least %d", d, n)
	}

	// A full queue still takes a heartbeat (it keeps the leader).
	before := tr.DroppedBytes.Load()
	hb := pb.MessageType_MsgHeartbeat
	to2 := uint64(2)
	tr.Send([]raftnode.Envelope{{TabletID: 1, Msg: &pb.Message{Type: &hb, To: &to2}}})
	if tr.DroppedBytes.Load() != before {
		t.Errorf("a queue full of appends refused a heartbeat")
	}

	// An empty queue takes one message over the bound (a side-loaded
	// SST's append): the down peer's sender empties its queue by drops.
	waitFor(t, "the down peer's queue to empty", func() bool { return tr.QueuedBytes(3) == 0 })
	before = tr.DroppedBytes.Load()
	tr.Send([]raftnode.Envelope{{TabletID: 1, Msg: bigApp(3, 1, 2*bound)}})
	if tr.DroppedBytes.Load() != before {
		t.Errorf("an empty queue refused one message of %d bytes", 2*bound)
	}
}
