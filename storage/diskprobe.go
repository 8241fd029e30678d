package storage

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The disk probe. The disk-stall watcher (Options.OnDiskStall, Pebble's
// disk-health checks) times only the writes, syncs and file operations
// the store makes: a read is not timed, and a store that makes no write
// is not watched at all. A node restarted onto a disk that then stopped
// answering read its cold SSTs, blocked there before its first write,
// and never fenced itself (test/chaos: "did not fence itself within
// 12s", twice in one session). ProbeDisk writes and syncs a few bytes of
// a file of its own through the watched filesystem, so a node that calls
// it every second is watched whether or not it writes.

// probeFile is the probe's file in the store's directory.
const probeFile = "cairn-disk-probe"

type diskProbe struct {
	// fs is the watched filesystem (nil: the store is not watched, and
	// ProbeDisk does nothing); path the file's path in it.
	fs   vfs.FS
	path string

	mu sync.Mutex
	f  vfs.File
	// closed: the engine closed; a probe in flight then (on a stalled
	// disk, perhaps for ever) closes the file as it returns.
	closed atomic.Bool
}

func watchedPath(fs vfs.FS, dir string) string {
	if fs == nil {
		return ""
	}
	return fs.PathJoin(dir, probeFile)
}

// ProbeDisk writes the time into the probe's file and syncs it, through
// the filesystem the disk-stall watcher times: on a stalled disk it
// blocks, and the watcher reports it as it would a write of the store's.
// It does nothing for a store without a watcher. Safe for concurrent use
// (probes run one at a time).
func (e *Engine) ProbeDisk() error {
	p := &e.probe
	if p.fs == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.closeIfClosedLocked()
	if p.closed.Load() {
		return nil
	}
	if p.f == nil {
		// Create, not OpenReadWrite: the watcher times only the files
		// created through it.
		f, err := p.fs.Create(p.path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("storage: creating the disk probe %s: %w", p.path, err)
		}
		p.f = f
	}
	stamp := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
	if _, err := p.f.WriteAt(stamp, 0); err != nil {
		return fmt.Errorf("storage: writing the disk probe %s: %w", p.path, err)
	}
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("storage: syncing the disk probe %s: %w", p.path, err)
	}
	return nil
}

// close closes the probe's file, or leaves that to the probe in flight:
// the engine's Close must not wait on a stalled disk for it.
func (p *diskProbe) close() {
	p.closed.Store(true)
	if p.mu.TryLock() {
		p.closeIfClosedLocked()
		p.mu.Unlock()
	}
}

func (p *diskProbe) closeIfClosedLocked() {
	if p.closed.Load() && p.f != nil {
		_ = p.f.Close()
		p.f = nil
	}
}
