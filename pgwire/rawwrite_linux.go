package pgwire

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// socketWriter returns what pgwire writes a connection's output through:
// for a plain TCP or Unix socket, a rawWriter over it; otherwise (TLS)
// nc itself.
//
// Why: one write(2) per round trip is the whole of pgwire's output under
// pgbench -S, and on loopback that call does the client's share of TCP
// too (its receive path and waking it), often getting this thread
// preempted before it returns. net.Conn.Write makes the call as a
// blocking system call (entersyscall), so the goroutine's P counts as
// blocked in a system call, and the runtime's monitor (sysmon), finding
// a P in a system call at two of its 20 µs ticks, takes the P away and
// hands it to another thread; a monitor that keeps finding such Ps never
// backs off from its 20 µs ticks. Under pgbench -S -M prepared, 4
// clients, the monitor's wakeups were 10% of the node's CPU and the
// scheduler's hand-offs 6% (perf, bench/README.md, issue 22, helper
// oltp). A write to a non-blocking socket does not block: it copies, or
// fails with EAGAIN, and then rawWriter waits for the socket through the
// netpoller as net.Conn.Write does, with the same deadlines. So it is
// made as a raw system call, which leaves the P running.
func socketWriter(nc net.Conn) io.Writer {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nc
	}
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return nc
	}
	return &rawWriter{rc: rc}
}

// rawWriter writes to a non-blocking socket with raw write(2) calls,
// waiting for it to drain through the netpoller (RawConn.Write, which
// honours the connection's write deadline).
type rawWriter struct {
	rc syscall.RawConn
	// p and n are the write in progress: fill is a method value made
	// once, so a write allocates no closure.
	p    []byte
	n    int
	err  error
	fill func(fd uintptr) bool
}

func (w *rawWriter) Write(p []byte) (int, error) {
	if w.fill == nil {
		w.fill = w.writeSome
	}
	w.p, w.n, w.err = p, 0, nil
	err := w.rc.Write(w.fill)
	n := w.n
	if err == nil {
		err = w.err
	}
	w.p, w.err = nil, nil
	if err != nil {
		return n, &net.OpError{Op: "write", Net: "tcp", Err: err}
	}
	return n, nil
}

// writeSome writes what is left of w.p; false asks RawConn.Write to wait
// until the socket is writable and call it again.
func (w *rawWriter) writeSome(fd uintptr) bool {
	for w.n < len(w.p) {
		m, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.p[w.n])), uintptr(len(w.p)-w.n))
		switch errno {
		case 0:
			w.n += int(m)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.err = errno
			return true
		}
	}
	return true
}
