package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cairn-db/cairn/raftnode"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
)

// A replica snapshot can be too large for a raft message: its image (an
// SST of the tablet's replicated spans, tablet.WriteSnapshot) travels on a
// stream of its own, as a header frame carrying the tablet ID and the
// MsgSnap (the snapshot's metadata, and in its Data only the state
// machine's small header: the descriptor), then chunks of the image.

const (
	snapshotStream = "Snapshot"
	snapshotMethod = "/" + serviceName + "/" + snapshotStream
	// maxChunk is the most image bytes per frame (less when MaxBatchSize
	// is lowered: a frame must fit in a message).
	maxChunk = 1 << 20
)

func chunkSize() int { return min(maxChunk, MaxBatchSize/2) }

// SnapshotReceiver takes an incoming snapshot: the envelope of its
// MsgSnap and a reader of its image, which it must consume (typically
// into an SST file on the engine's filesystem) before returning (ctx ends
// with the stream: the sender gave up or the server stops). An error is
// reported to the sender.
type SnapshotReceiver func(ctx context.Context, env raftnode.Envelope, image io.Reader) error

// streamReader reads a snapshot stream's chunk frames as one byte stream.
type streamReader struct {
	stream grpc.ServerStream
	buf    []byte
}

func (r *streamReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		var b []byte
		if err := r.stream.RecvMsg(&b); err != nil {
			return 0, err // io.EOF at the end of the stream
		}
		r.buf = b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (s *server) snapshot(stream grpc.ServerStream) error {
	if s.snap == nil {
		return errors.New("rpc: this node takes no snapshots")
	}
	var head []byte
	if err := stream.RecvMsg(&head); err != nil {
		return err
	}
	envs, err := decodeBatch(head)
	if err != nil || len(envs) != 1 || envs[0].Msg.GetType() != pb.MessageType_MsgSnap {
		return fmt.Errorf("rpc: a snapshot stream must start with one MsgSnap: %v", err)
	}
	r := &streamReader{stream: stream}
	if err := s.snap(stream.Context(), envs[0], r); err != nil {
		return err
	}
	// Whatever the receiver left unread is drained so the sender's
	// CloseAndRecv returns.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	ok := []byte{1}
	return stream.SendMsg(&ok)
}

// SendSnapshot streams a snapshot to node to: env's MsgSnap (whose Data
// must be only the state machine's header, small: image carries the
// state) then the image, and waits for the receiver to have taken it.
func (t *Transport) SendSnapshot(ctx context.Context, to uint64, env raftnode.Envelope, image io.Reader) error {
	if t.cfg.Faults.IsCut(to) {
		return fmt.Errorf("rpc: snapshot to node %d: %w", to, ErrCut)
	}
	addr, err := t.cfg.Resolve(to)
	if err != nil {
		return fmt.Errorf("rpc: resolving node %d: %w", to, err)
	}
	conn, err := dialConn(addr, t.cfg.Creds)
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := conn.NewStream(ctx, &serviceDesc.Streams[1], snapshotMethod)
	if err != nil {
		return fmt.Errorf("rpc: snapshot to node %d: %w", to, err)
	}
	head, err := encodeBatch(nil, []raftnode.Envelope{env})
	if err != nil {
		return err
	}
	// SendMsg returns io.EOF once the receiver has ended the stream (it
	// refused the snapshot): the reason is the status RecvMsg returns.
	send := func(b *[]byte) (ended bool, err error) {
		err = stream.SendMsg(b)
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("rpc: snapshot to node %d: %w", to, err)
		}
		return false, nil
	}
	ended, err := send(&head)
	if err != nil {
		return err
	}
	for !ended {
		chunk := make([]byte, chunkSize())
		n, rerr := io.ReadFull(image, chunk)
		if n > 0 {
			chunk = chunk[:n]
			if ended, err = send(&chunk); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("rpc: reading the snapshot image: %w", rerr)
		}
	}
	if !ended {
		if err := stream.CloseSend(); err != nil {
			return err
		}
	}
	var ack []byte
	if err := stream.RecvMsg(&ack); err != nil {
		return fmt.Errorf("rpc: snapshot to node %d refused: %w", to, err)
	}
	return nil
}
