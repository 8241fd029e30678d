package storage

import "github.com/cockroachdb/pebble/v2/vfs"

// A WAL sync is the one system call on the commit path that blocks for
// long: an fdatasync takes 0.4–0.7 ms on this machine's disk, and Pebble
// makes it from its WAL writer's goroutine. Go keeps the goroutine's P
// (the right to run Go code) with a thread blocked in a system call until
// sysmon takes it back, and sysmon leaves it there while another P is
// idle and the blocked P has nothing queued. Traced under pgbench
// simple-update at 16 clients on 2 cores (bench/README.md, "Issue 22,
// twenty-eighth session"), a P stayed with the syncing thread for the
// whole sync in half of them and for 257 µs on average in the rest, while
// five goroutines on average waited to run: about an eighth of the node's
// CPU sat behind the disk.
//
// pollSyncFS hands the WAL's syncs to the kernel instead, as Linux AIO
// fsync requests (IOCB_CMD_FDSYNC, since Linux 4.18), whose completion an
// eventfd signals; the syncing goroutine waits for it in Go's network
// poller, like a socket read, and holds no P meanwhile. The data is as
// durable as with fdatasync: the request is fdatasync, run by a kernel
// worker, and SyncData returns only once it completed, with its error.
// Where the kernel refuses (no AIO, a seccomp filter, a file system
// without it) or the platform has no support (pollsync_other.go), the
// file syncs as before. Only WAL files are wrapped: SSTs and the manifest
// are synced by flushes and compactions, off the commit path.
//
// The kernel worker's CPU is not the node's process's: the server CPU
// bench/pgbench reports per transaction leaves the syncs' kernel time out
// (7% of the node's samples before), so TPS is the figure to compare.
type pollSyncFS struct {
	vfs.FS
}

// NewPollSyncFS returns fs with its WAL files' syncs made as AIO
// requests waited for in the poller, or fs itself where the kernel or the
// platform has no AIO. Open wraps the OS's file system so; a caller that
// gives Open a file system over the OS's (the server's simulated disk)
// wraps the OS's with it.
func NewPollSyncFS(fs vfs.FS) vfs.FS {
	if !pollSyncSupported() {
		return fs
	}
	return &pollSyncFS{FS: fs}
}

func (fs *pollSyncFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !isWALFile(name, category) {
		return f, err
	}
	return newPollSyncFile(f), nil
}

func (fs *pollSyncFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || !isWALFile(newname, category) {
		return f, err
	}
	return newPollSyncFile(f), nil
}
