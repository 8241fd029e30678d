//go:build linux && (amd64 || arm64)

package storage

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// Linux AIO's ABI (include/uapi/linux/aio_abi.h), little-endian 64-bit.
const (
	iocbCmdFSync  = 2
	iocbCmdFDSync = 3
	iocbFlagResFD = 1 << 0
)

// iocb is struct iocb: 64 bytes, the key before the flags on
// little-endian machines.
type iocb struct {
	data      uint64
	key       uint32
	rwFlags   int32
	opcode    uint16
	reqPrio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resFD     uint32
}

// ioEvent is struct io_event.
type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

var (
	pollSyncOnce sync.Once
	pollSyncOK   bool
	// pollSyncs counts the syncs the kernel ran as AIO requests (tests).
	pollSyncs atomic.Uint64
)

// pollSyncSupported reports whether this kernel lets the process make an
// AIO context (a seccomp filter or aio-max-nr may refuse).
func pollSyncSupported() bool {
	pollSyncOnce.Do(func() {
		var ctx uint64
		if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e == 0 {
			unix.Syscall(unix.SYS_IO_DESTROY, uintptr(ctx), 0, 0)
			pollSyncOK = true
		}
	})
	return pollSyncOK
}

// pollSyncFile syncs through an AIO context and an eventfd of its own,
// made at its first sync. Its syncs are serial (mu); Pebble syncs a WAL
// from one goroutine anyway.
type pollSyncFile struct {
	vfs.File
	fd uintptr

	mu sync.Mutex
	// state: pollUntried, pollReady (ctx and efd are set) or pollPlain
	// (the kernel refused once: the file syncs as before).
	state int
	ctx   uint64
	efd   *os.File
	// efdNum is efd's descriptor, kept apart: os.File.Fd would put
	// the eventfd in blocking mode, out of the poller.
	efdNum int
	// cb and cbs are what io_submit reads: on the heap, which Go does
	// not move.
	cb  iocb
	cbs [1]*iocb
	ev  ioEvent
}

const (
	pollUntried = iota
	pollReady
	pollPlain
)

func newPollSyncFile(f vfs.File) vfs.File {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return f
	}
	return &pollSyncFile{File: f, fd: fd}
}

func (f *pollSyncFile) SyncData() error { return f.sync(iocbCmdFDSync, f.File.SyncData) }

func (f *pollSyncFile) Sync() error { return f.sync(iocbCmdFSync, f.File.Sync) }

func (f *pollSyncFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.teardownLocked()
	f.state = pollPlain
	return f.File.Close()
}

// setupLocked makes the file's AIO context and eventfd; on failure the
// file syncs plainly from then on.
func (f *pollSyncFile) setupLocked() {
	f.state = pollPlain
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return
	}
	var ctx uint64
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		unix.Close(efd)
		return
	}
	// Non-blocking, so os.NewFile hands it to the network poller: a
	// Read waits there, not in a blocked thread.
	f.ctx, f.efd, f.efdNum, f.state = ctx, os.NewFile(uintptr(efd), "wal-sync-eventfd"), efd, pollReady
}

func (f *pollSyncFile) teardownLocked() {
	if f.state != pollReady {
		return
	}
	unix.Syscall(unix.SYS_IO_DESTROY, uintptr(f.ctx), 0, 0)
	f.efd.Close()
	f.ctx, f.efd = 0, nil
}

// sync runs op (IOCB_CMD_FDSYNC or IOCB_CMD_FSYNC) as an AIO request and
// waits in the poller for its completion, or runs plain when the kernel
// will not take the request.
func (f *pollSyncFile) sync(op uint16, plain func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == pollUntried {
		f.setupLocked()
	}
	if f.state != pollReady {
		return plain()
	}
	f.cb = iocb{opcode: op, fildes: uint32(f.fd), flags: iocbFlagResFD, resFD: uint32(f.efdNum)}
	f.cbs[0] = &f.cb
	if _, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, uintptr(f.ctx), 1, uintptr(unsafe.Pointer(&f.cbs[0]))); e != 0 {
		if e != unix.EAGAIN && e != unix.EINTR {
			// Refused for good (EINVAL: the file system has no AIO
			// fsync): sync plainly from now on.
			f.teardownLocked()
			f.state = pollPlain
		}
		return plain()
	}
	// The request is in flight: nothing returns before it completed.
	var buf [8]byte
	if _, err := f.efd.Read(buf[:]); err != nil {
		// The eventfd failed under an in-flight request: wait for it
		// in the kernel instead.
		return f.reapLocked(nil, fmt.Errorf("storage: waiting for a WAL sync: %w", err))
	}
	zero := unix.Timespec{}
	return f.reapLocked(&zero, nil)
}

// reapLocked collects the completed request (waiting for it when timeout
// is nil) and returns its result, or waitErr when that is set and the
// request succeeded.
func (f *pollSyncFile) reapLocked(timeout *unix.Timespec, waitErr error) error {
	for {
		n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, uintptr(f.ctx), 1, 1,
			uintptr(unsafe.Pointer(&f.ev)), uintptr(unsafe.Pointer(timeout)), 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return fmt.Errorf("storage: collecting a WAL sync: %w", e)
		}
		if n == 0 {
			// Signalled but not yet reapable: wait for it.
			timeout = nil
			continue
		}
		break
	}
	pollSyncs.Add(1)
	if f.ev.res < 0 {
		return fmt.Errorf("storage: WAL sync: %w", unix.Errno(-f.ev.res))
	}
	return waitErr
}
