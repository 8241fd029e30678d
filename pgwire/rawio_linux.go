package pgwire

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// socketReader returns what pgwire reads a connection's input through
// before any TLS: for a plain TCP or Unix socket, a rawReader over it;
// otherwise nc itself. The reasoning is socketWriter's: a read of a
// non-blocking socket returns at once (data, EOF, or EAGAIN, after which
// rawReader waits in the netpoller as net.Conn.Read does, with the same
// deadlines), so it need not be a blocking system call that leaves the
// goroutine's P for the monitor to take.
func socketReader(nc net.Conn) io.Reader {
	if rc := plainSocket(nc); rc != nil {
		return &rawReader{rc: rc}
	}
	return nc
}

// plainSocket returns the raw connection of a plain TCP or Unix socket,
// nil for anything else (a TLS connection).
func plainSocket(nc net.Conn) syscall.RawConn {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// rawReader reads a non-blocking socket with raw read(2) calls, waiting
// for input through the netpoller (RawConn.Read, which honours the
// connection's read deadline).
type rawReader struct {
	rc syscall.RawConn
	// p, n, eof and err are the read in progress; fill is made once.
	p    []byte
	n    int
	eof  bool
	err  error
	fill func(fd uintptr) bool
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.fill == nil {
		r.fill = r.readSome
	}
	r.p, r.n, r.eof, r.err = p, 0, false, nil
	err := r.rc.Read(r.fill)
	n, eof := r.n, r.eof
	if err == nil {
		err = r.err
	}
	r.p, r.err = nil, nil
	switch {
	case err != nil:
		return n, &net.OpError{Op: "read", Net: "tcp", Err: err}
	case eof:
		return 0, io.EOF
	}
	return n, nil
}

// readSome reads once into r.p; false asks RawConn.Read to wait until
// the socket is readable and call it again.
func (r *rawReader) readSome(fd uintptr) bool {
	for {
		m, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch errno {
		case 0:
			r.n, r.eof = int(m), m == 0
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.err = errno
			return true
		}
	}
}

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
	if rc := plainSocket(nc); rc != nil {
		return &rawWriter{rc: rc}
	}
	return nc
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
