package rpc

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/raftnode"
)

// TestStopWaitsForHandlers: Server.Stop returns only once a handler busy
// with a message has returned, so the caller may close what the handler
// uses (the raft node and its engine) right after. Without it a leader
// being stopped could step a follower's answer once its engine was
// closed, and raft panics when its log cannot be read (a panic in raft's
// log read, stepped from this handler, was seen once in
// testcluster.TestLinearizableRegisters).
func TestStopWaitsForHandlers(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var finished atomic.Bool
	srv := Serve(listen(t, "127.0.0.1:0"), func(raftnode.Envelope) {
		once.Do(func() {
			close(entered)
			<-release
			finished.Store(true)
		})
	}, nil)
	addr := srv.Addr().String()
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return addr, nil }})
	defer tr.Close()
	tr.Send([]raftnode.Envelope{{TabletID: 1, Msg: msg(2, 1)}})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the message never reached the handler")
	}
	stopped := make(chan struct{})
	go func() {
		srv.Stop()
		close(stopped)
	}()
	// Let Stop run for a while before the handler may finish: a Stop that
	// does not wait returns in the meantime.
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	<-stopped
	if !finished.Load() {
		t.Fatal("Stop returned while a handler was still stepping a message")
	}
}
