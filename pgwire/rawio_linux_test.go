package pgwire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// TestRawWriterDelivers: writes far larger than the socket's buffer (so
// the writer meets EAGAIN and waits in the netpoller) arrive whole and in
// order.
func TestRawWriterDelivers(t *testing.T) {
	server, client := tcpPair(t)
	w := socketWriter(server)
	if _, ok := w.(*rawWriter); !ok {
		t.Fatalf("socketWriter(%T) = %T, want *rawWriter", server, w)
	}
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	for off := 0; off < len(want); off += 1 << 20 {
		n, err := w.Write(want[off : off+1<<20])
		if err != nil || n != 1<<20 {
			t.Fatalf("Write at %d = %d, %v", off, n, err)
		}
	}
	server.(*net.TCPConn).CloseWrite()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("client read %d bytes, not the %d written", len(b), len(want))
	}
}

// TestRawWriterDeadline: a client that stops reading cannot hold a write
// past the connection's write deadline (interrupt relies on it).
func TestRawWriterDeadline(t *testing.T) {
	server, _ := tcpPair(t)
	w := socketWriter(server)
	server.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := w.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a client that reads nothing = %v, want a deadline error", err)
	}
}

// TestRawWriterClosedPeer: writing to a connection the client reset fails
// with an error rather than hanging or panicking.
func TestRawWriterClosedPeer(t *testing.T) {
	server, client := tcpPair(t)
	client.(*net.TCPConn).SetLinger(0) // close with RST
	client.Close()
	w := socketWriter(server)
	server.SetWriteDeadline(time.Now().Add(10 * time.Second))
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = w.Write(make([]byte, 64<<10))
	}
	if err == nil {
		t.Fatal("writes to a reset connection kept succeeding")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a reset connection = %v, want the reset", err)
	}
}

// TestRawReader: what the client sends arrives whole through a reader
// that must wait for it, its close reads as io.EOF, and a read deadline
// ends a wait for input that never comes.
func TestRawReader(t *testing.T) {
	server, client := tcpPair(t)
	r := socketReader(server)
	if _, ok := r.(*rawReader); !ok {
		t.Fatalf("socketReader(%T) = %T, want *rawReader", server, r)
	}
	server.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := r.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with nothing sent = %v, want a deadline error", err)
	}
	server.SetReadDeadline(time.Time{})
	want := make([]byte, 4<<20)
	for i := range want {
		want[i] = byte(i * 13)
	}
	go func() {
		for off := 0; off < len(want); off += 64 << 10 {
			client.Write(want[off : off+64<<10])
		}
		client.Close()
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("ReadAll = %v (io.ReadAll ends at io.EOF without an error)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d sent", len(got), len(want))
	}
}
