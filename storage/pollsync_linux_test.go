//go:build linux && (amd64 || arm64)

package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPollSyncEngineWAL: an engine on the OS's files syncs its WAL as
// AIO requests waited for in the poller (pollsync.go), and what a synced
// commit wrote is there after the engine reopens. Where the kernel makes
// no AIO context the test cannot see the path and says so.
func TestPollSyncEngineWAL(t *testing.T) {
	if !pollSyncSupported() {
		t.Skip("this kernel refuses io_setup: WAL files sync plainly (pollSyncSupported)")
	}
	dir := t.TempDir()
	e, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := pollSyncs.Load()
	const n = 20
	for i := range n {
		b := e.NewWriteOnlyBatch()
		if err := b.Put(MVCCKey{Key: []byte{0x05, byte(i)}}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if got := pollSyncs.Load() - before; got == 0 {
		t.Fatalf("%d synced commits made no AIO sync", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range n {
		if _, ok, err := e.Get(MVCCKey{Key: []byte{0x05, byte(i)}}); err != nil || !ok {
			t.Fatalf("key %d after reopen: found %v, err %v", i, ok, err)
		}
	}
}

// TestPollSyncFileErrors: a sync the kernel fails is the caller's error,
// never swallowed, whether the AIO request or the plain call it falls
// back to fails; and a file wrapped after it was closed underneath does
// not report success.
func TestPollSyncFileErrors(t *testing.T) {
	if !pollSyncSupported() {
		t.Skip("this kernel refuses io_setup: WAL files sync plainly (pollSyncSupported)")
	}
	fs := NewPollSyncFS(vfs.Default)
	path := filepath.Join(t.TempDir(), "000001.log")
	f, err := fs.Create(path, walCategory)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*pollSyncFile); !ok {
		t.Fatalf("a WAL file is a %T, want *pollSyncFile", f)
	}
	if _, err := f.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	before := pollSyncs.Load()
	if err := f.SyncData(); err != nil {
		t.Fatalf("SyncData: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := pollSyncs.Load() - before; got != 2 {
		t.Fatalf("%d AIO syncs for SyncData and Sync, want 2", got)
	}
	// Close the descriptor underneath the file: the request fails
	// (EBADF), and so does the plain call it falls back to.
	if err := os.NewFile(f.Fd(), path).Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err == nil {
		t.Fatal("SyncData of a closed descriptor reported success")
	}
	if err := f.Sync(); err == nil {
		t.Fatal("Sync of a closed descriptor reported success")
	}
	// Other files are Pebble's own.
	g, err := fs.Create(filepath.Join(filepath.Dir(path), "000002.sst"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, ok := g.(*pollSyncFile); ok {
		t.Fatal("an SST is wrapped; only WAL files are")
	}
}

// TestPollSyncPlainFallback: a WAL file the kernel refused an AIO sync
// for once (a file system without AIO fsync answers EINVAL; here the
// descriptor is closed under it, EBADF) syncs plainly from then on, and a
// file in that state makes no AIO request.
func TestPollSyncPlainFallback(t *testing.T) {
	if !pollSyncSupported() {
		t.Skip("this kernel refuses io_setup: WAL files sync plainly (pollSyncSupported)")
	}
	fs := NewPollSyncFS(vfs.Default)
	dir := t.TempDir()
	f, err := fs.Create(filepath.Join(dir, "000001.log"), walCategory)
	if err != nil {
		t.Fatal(err)
	}
	pf := f.(*pollSyncFile)
	if err := os.NewFile(f.Fd(), "closed").Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err == nil {
		t.Fatal("SyncData of a closed descriptor reported success")
	}
	if pf.state != pollPlain {
		t.Fatalf("after a refused request the file's state is %d, want pollPlain (%d)", pf.state, pollPlain)
	}

	g, err := fs.Create(filepath.Join(dir, "000002.log"), walCategory)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.(*pollSyncFile).state = pollPlain
	before := pollSyncs.Load()
	if err := g.SyncData(); err != nil {
		t.Fatalf("plain SyncData: %v", err)
	}
	if n := pollSyncs.Load() - before; n != 0 {
		t.Fatalf("a file syncing plainly made %d AIO syncs", n)
	}
}
