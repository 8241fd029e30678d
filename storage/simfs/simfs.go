// Package simfs simulates the disk under a storage engine: a vfs.FS wrapper
// that adds a storage profile's latency to reads and syncs, fails writes and
// syncs on demand (a full or broken disk), and counts what it sees.
//
// A profile prices a read by where it lands: every read pays ReadLatency
// (a sequential block off a disk, one request to an object store), a read
// that does not start where the previous read of the same file handle
// ended pays SeekLatency too (a disk head moving), and Bandwidth charges
// for the bytes. A disk that reads a short way ahead lets the platter
// turn under the head rather than seek: a forward gap it passes over in
// less than SeekLatency at Bandwidth costs that instead, and counts as a
// skip, not a seek. An object store is read in large chunks (Chunk): a
// read the handle's recently fetched chunks hold costs nothing, and each
// chunk it misses is one request (ReadLatency plus the chunk at
// Bandwidth), as an engine over S3 keeps what it fetched in a local cache. So a fast disk can play an HDD or S3 (cairn start
// --debug-store-latency), and random access shows in the counters
// (Stats.Seeks) and the time charged (Stats.Charged) whatever the real
// disk is.
//
// Callers: storage tests (group commit is measured by counting WAL syncs;
// durability is tested by failing them; Options.OnRead shows which files
// were read where, e.g. that a sorted lookup batch reads an SST's data
// blocks front to back), the slow-disk demo and the read planner's
// benchmarks, which open a storage.Engine with
// storage.Options{FS: simfs.New(...)}. It wraps any vfs.FS (vfs.Default for a
// real disk, vfs.NewMem for memory) and must not import storage, so storage's
// tests can use it.
//
// Invariants:
//
//  1. Every read (Read, ReadAt) and sync (Sync, SyncData, SyncTo) on a file
//     opened through FS is counted and delayed by the current profile's
//     latency before it reaches the wrapped file. A read is a seek when it
//     is the handle's first or does not start at the offset where the
//     handle's previous read ended (Read continues at the handle's own
//     position), unless it starts ahead of that offset by a gap that
//     passes at Bandwidth in less than SeekLatency (a skip). The delay of
//     a read is ReadLatency, plus SeekLatency for a seek or the gap's time
//     for a skip, plus its length over Bandwidth, in one wait. With Chunk
//     set, a read instead pays one request (ReadLatency plus Chunk over
//     Bandwidth) for each chunk it touches that is not among the last
//     chunkMemory chunks its handle fetched, and is neither seek nor skip.
//  2. While a write error is injected, every Create, ReuseForWrite, Write,
//     WriteAt, Preallocate and sync returns it and changes nothing underneath,
//     so nothing written through FS becomes durable.
//  3. Profiles, injected errors and counters may change while files are in
//     use; each operation reads them once, atomically.
//  4. While the disk is stalled (Stall), every read, write, sync, Create and
//     ReuseForWrite on FS blocks, before it reaches the wrapped file, until
//     Unstall: a disk that stops answering, not one that fails.
//  5. Clobber's files whose name matches zero the slice Write was given,
//     after writing it through unchanged; every other operation is the
//     wrapped filesystem's.
package simfs

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Profile is the latency of one kind of storage. The read planner's cost
// model reads the same figures, so a profile names what it simulates.
type Profile struct {
	Name string
	// ReadLatency is added to every read call that reaches the filesystem
	// (block cache misses): a sequential read off a disk, a GET on an
	// object store.
	ReadLatency time.Duration
	// SeekLatency is added to a read that does not continue where the
	// previous read of its file handle ended (invariant 1).
	SeekLatency time.Duration
	// Bandwidth, in bytes per second, charges each read its length over
	// it; 0: free.
	Bandwidth int64
	// Chunk, when above 0, is the size of the pieces the storage is read
	// in: each read pays for the chunks it needs that the handle has not
	// fetched recently (its last chunkMemory), one request each, and
	// nothing else (invariant 1).
	Chunk int64
	// SyncLatency is added to every sync.
	SyncLatency time.Duration
}

// Storage profiles. The figures are typical, not measured on this machine:
// what matters to the planner is their ratio to a network round trip.
var (
	// Memory adds nothing: the wrapped filesystem's own speed.
	Memory = Profile{Name: "memory"}
	// SSD is a local NVMe/SATA SSD: ~0.1 ms per random read or flush.
	SSD = Profile{Name: "ssd", ReadLatency: 100 * time.Microsecond, SyncLatency: 100 * time.Microsecond}
	// HDD is a spinning disk: 0.2 ms per read in order (read-planning.txt's
	// figure), 150 MB/s, a ~10 ms seek more per read out of order (short
	// forward gaps pass under the head instead: 10 ms is ~1.5 MB), and a
	// rotation per sync.
	HDD = Profile{Name: "hdd", ReadLatency: 200 * time.Microsecond, SeekLatency: 10 * time.Millisecond, Bandwidth: 150 << 20, SyncLatency: 10 * time.Millisecond}
	// ObjectStore is remote object storage read in 1 MiB chunks: ~20 ms
	// per request wherever it reads, and 100 MiB/s.
	ObjectStore = Profile{Name: "object-store", ReadLatency: 20 * time.Millisecond, Bandwidth: 100 << 20, Chunk: 1 << 20, SyncLatency: 20 * time.Millisecond}
)

// Named returns the profile called name: memory, ssd, hdd or
// object-store.
func Named(name string) (Profile, error) {
	for _, p := range []Profile{Memory, SSD, HDD, ObjectStore} {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("simfs: unknown profile %q: want memory, ssd, hdd or object-store", name)
}

// transfer is the time n bytes take at the profile's bandwidth.
func (p *Profile) transfer(n int64) time.Duration {
	if p.Bandwidth <= 0 {
		return 0
	}
	return time.Duration(n * int64(time.Second) / p.Bandwidth)
}

// readCost prices a read of n bytes (invariant 1): gap is how far ahead
// of the previous read's end it starts (0: adjacent, negative: behind)
// and first whether it is the handle's first read.
func (p *Profile) readCost(n int, gap int64, first bool) (d time.Duration, seek, skip bool) {
	d = p.ReadLatency + p.transfer(int64(n))
	switch {
	case !first && gap == 0:
	case !first && gap > 0 && p.SeekLatency > 0 && p.Bandwidth > 0 && p.transfer(gap) < p.SeekLatency:
		d, skip = d+p.transfer(gap), true
	default:
		d, seek = d+p.SeekLatency, true
	}
	return d, seek, skip
}

// Options configure an FS.
type Options struct {
	// Profile is the initial profile; the zero Profile adds no latency.
	Profile Profile
	// Sleep waits out injected latency; nil means time.Sleep. Tests pass a
	// function that records the durations, so they can check latency was
	// applied without timing anything.
	Sleep func(time.Duration)
	// OnRead, when set, sees every read of a file opened through the FS,
	// once priced and before its wait, on the reading goroutine: tests
	// record which files were read where, and in what order.
	OnRead func(Read)
}

// Read is one read of a file, as Options.OnRead sees it.
type Read struct {
	// Name is the file's name as it was opened.
	Name string
	// Off and Len are where the read starts and how many bytes it asks
	// for; Seek and Skip say how it was priced (invariant 1).
	Off        int64
	Len        int
	Seek, Skip bool
}

// Stats counts operations on files opened through an FS.
type Stats struct {
	// Reads counts read calls (an object store's requests), ReadBytes the
	// bytes they asked for, Seeks those that were not adjacent to the
	// previous read of their file handle and Skips those a short way
	// ahead of it (invariant 1).
	Reads     int64
	ReadBytes int64
	Seeks     int64
	Skips     int64
	// Requests counts what the storage was asked for: each read that
	// reached it, or with Profile.Chunk each chunk fetched.
	Requests int64
	// Charged is the latency the profiles added to reads, whether or not
	// Options.Sleep waited it out: the time the simulated disk spent.
	Charged time.Duration
	// Syncs counts every sync, WALSyncs those on write-ahead log files (a
	// Pebble WAL is named *.log), which is what group commit saves.
	Syncs    int64
	WALSyncs int64
	// Writes counts write calls (not bytes).
	Writes int64
	// FailedOps counts operations refused by an injected error.
	FailedOps int64
}

// FS wraps a vfs.FS; see the package comment. It is safe for concurrent use.
type FS struct {
	vfs.FS
	sleep    func(time.Duration)
	onRead   func(Read)
	profile  atomic.Pointer[Profile]
	writeErr atomic.Pointer[error]
	// stall is closed when a stall ends; nil while the disk answers.
	stall atomic.Pointer[chan struct{}]

	reads, readBytes, seeks, skips, requests, charged atomic.Int64
	// overslept is how much real sleeps overshot what they were asked
	// (sleepOnAverage), still to be taken off later waits.
	overslept                       atomic.Int64
	syncs, walSyncs, writes, failed atomic.Int64
}

var _ vfs.FS = (*FS)(nil)

// New wraps inner.
func New(inner vfs.FS, opts Options) *FS {
	fs := &FS{FS: inner, sleep: opts.Sleep, onRead: opts.OnRead}
	if fs.sleep == nil {
		fs.sleep = fs.sleepOnAverage
	}
	fs.SetProfile(opts.Profile)
	return fs
}

// sleepOnAverage waits d on average: a sleep overshoots (timer slack,
// a busy machine: a 0.1 ms sleep often takes 1 ms), and the overshoot is
// taken off the next waits, so that thousands of small charges add up to
// the time charged rather than to that many timer wakeups. Concurrent
// waiters share the credit, so it is exact only on average.
func (fs *FS) sleepOnAverage(d time.Duration) {
	if credit := time.Duration(fs.overslept.Load()); credit > 0 {
		take := min(credit, d)
		fs.overslept.Add(-int64(take))
		if d -= take; d <= 0 {
			return
		}
	}
	start := time.Now()
	time.Sleep(d)
	if over := time.Since(start) - d; over > 0 {
		fs.overslept.Add(int64(over))
	}
}

// SetProfile switches the latency profile (a disk that turns slow).
func (fs *FS) SetProfile(p Profile) { fs.profile.Store(&p) }

// Profile returns the current profile.
func (fs *FS) Profile() Profile { return *fs.profile.Load() }

// InjectWriteError makes every write and sync fail with err from now on
// (invariant 2); nil heals the disk.
func (fs *FS) InjectWriteError(err error) {
	if err == nil {
		fs.writeErr.Store(nil)
		return
	}
	fs.writeErr.Store(&err)
}

// Injected returns the error injected by InjectWriteError, or nil.
func (fs *FS) Injected() error {
	if p := fs.writeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Stall makes every operation block until Unstall (invariant 4).
func (fs *FS) Stall() {
	ch := make(chan struct{})
	fs.stall.CompareAndSwap(nil, &ch)
}

// Unstall ends a stall: the blocked operations go on.
func (fs *FS) Unstall() {
	if ch := fs.stall.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Stalled reports whether the disk is stalled.
func (fs *FS) Stalled() bool { return fs.stall.Load() != nil }

// wait blocks while the disk is stalled.
func (fs *FS) wait() {
	if ch := fs.stall.Load(); ch != nil {
		<-*ch
	}
}

// Stats returns the counters so far.
func (fs *FS) Stats() Stats {
	return Stats{
		Reads:     fs.reads.Load(),
		ReadBytes: fs.readBytes.Load(),
		Seeks:     fs.seeks.Load(),
		Skips:     fs.skips.Load(),
		Requests:  fs.requests.Load(),
		Charged:   time.Duration(fs.charged.Load()),
		Syncs:     fs.syncs.Load(),
		WALSyncs:  fs.walSyncs.Load(),
		Writes:    fs.writes.Load(),
		FailedOps: fs.failed.Load(),
	}
}

// Unwrap returns the wrapped filesystem.
func (fs *FS) Unwrap() vfs.FS { return fs.FS }

func (fs *FS) injected() error {
	fs.wait()
	if p := fs.writeErr.Load(); p != nil {
		fs.failed.Add(1)
		return *p
	}
	return nil
}

func (fs *FS) wrap(f vfs.File, name string) vfs.File {
	return &file{File: f, fs: fs, name: name, wal: strings.HasSuffix(name, ".log")}
}

// Create implements vfs.FS.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.injected(); err != nil {
		return nil, err
	}
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name), nil
}

// ReuseForWrite implements vfs.FS (Pebble recycles old WAL files with it).
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.injected(); err != nil {
		return nil, err
	}
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, newname), nil
}

// Open implements vfs.FS.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name), nil
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name), nil
}

// OpenDir implements vfs.FS; directory syncs count and fail like file syncs.
func (fs *FS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f, name), nil
}

type file struct {
	vfs.File
	fs   *FS
	name string
	wal  bool

	mu sync.Mutex
	// read is set once the handle has been read; next is the offset
	// where its last read ended, pos where Read continues.
	read bool
	next int64
	pos  int64
	// chunks are the last chunkMemory chunks fetched (Profile.Chunk),
	// oldest first.
	chunks []int64
}

// chunkMemory is how many chunks a handle remembers having fetched.
const chunkMemory = 16

// fetch returns how many of the chunks [off, off+n) touches the handle
// has not fetched recently, and remembers them. f.mu is held.
func (f *file) fetch(chunk, off int64, n int) (missing int64) {
	last := off
	if n > 0 {
		last = off + int64(n) - 1
	}
	for c := off / chunk; c <= last/chunk; c++ {
		if i := slices.Index(f.chunks, c); i >= 0 {
			// Fetched recently: move it to the newest end.
			f.chunks = append(slices.Delete(f.chunks, i, i+1), c)
			continue
		}
		missing++
		if len(f.chunks) == chunkMemory {
			f.chunks = slices.Delete(f.chunks, 0, 1)
		}
		f.chunks = append(f.chunks, c)
	}
	return missing
}

// charge counts a read of n bytes at off (pos for Read: off < 0) and waits
// out its cost (invariant 1).
func (f *file) charge(off int64, n int) {
	f.fs.wait()
	f.mu.Lock()
	if off < 0 {
		off = f.pos
		f.pos += int64(n)
	}
	p := f.fs.profile.Load()
	first, gap := !f.read, off-f.next
	f.read, f.next = true, off+int64(n)
	var d time.Duration
	var seek, skip bool
	requests := int64(1)
	if p.Chunk > 0 {
		requests = f.fetch(p.Chunk, off, n)
		d = time.Duration(requests) * (p.ReadLatency + p.transfer(p.Chunk))
	} else {
		d, seek, skip = p.readCost(n, gap, first)
	}
	f.mu.Unlock()
	if f.fs.onRead != nil {
		f.fs.onRead(Read{Name: f.name, Off: off, Len: n, Seek: seek, Skip: skip})
	}
	f.fs.reads.Add(1)
	f.fs.readBytes.Add(int64(n))
	f.fs.requests.Add(requests)
	if seek {
		f.fs.seeks.Add(1)
	}
	if skip {
		f.fs.skips.Add(1)
	}
	if d > 0 {
		f.fs.charged.Add(int64(d))
		f.fs.sleep(d)
	}
}

func (f *file) write() error {
	if err := f.fs.injected(); err != nil {
		return err
	}
	f.fs.writes.Add(1)
	return nil
}

func (f *file) sync() error {
	if err := f.fs.injected(); err != nil {
		return err
	}
	f.fs.syncs.Add(1)
	if f.wal {
		f.fs.walSyncs.Add(1)
	}
	if d := f.fs.profile.Load().SyncLatency; d > 0 {
		f.fs.sleep(d)
	}
	return nil
}

func (f *file) Read(p []byte) (int, error) {
	f.charge(-1, len(p))
	n, err := f.File.Read(p)
	if n < len(p) {
		// A short read (the end of the file): the next Read continues
		// where this one stopped.
		f.mu.Lock()
		f.pos -= int64(len(p) - n)
		f.next = f.pos
		f.mu.Unlock()
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.charge(off, len(p))
	return f.File.ReadAt(p, off)
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.write(); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.write(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Preallocate(off, n int64) error {
	if err := f.fs.injected(); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}

func (f *file) Sync() error {
	if err := f.sync(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *file) SyncData() error {
	if err := f.sync(); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *file) SyncTo(length int64) (bool, error) {
	if err := f.sync(); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}
