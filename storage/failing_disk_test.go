package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCommitRefusedOnFailingDisk checks invariant 5: when the disk fails
// under a commit, the commit is not acknowledged, the engine refuses further
// writes and reads, and after a restart on the healed disk every
// acknowledged write is there.
func TestCommitRefusedOnFailingDisk(t *testing.T) {
	fs := simfs.New(vfs.NewMem(), simfs.Options{})
	var reported []error
	e, err := Open("db", Options{FS: fs, OnFatal: func(err error) { reported = append(reported, err) }})
	if err != nil {
		t.Fatal(err)
	}
	put := func(e *Engine, k string) error {
		b := e.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(MVCCKey{Key: []byte(k)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		return b.Commit()
	}
	if err := put(e, "acked"); err != nil {
		t.Fatal(err)
	}

	errFull := errors.New("no space left on device")
	fs.InjectWriteError(errFull)
	err = put(e, "refused")
	if !errors.Is(err, ErrEngineFailed) || !errors.Is(err, errFull) {
		t.Fatalf("commit on a failing disk returned %v, want ErrEngineFailed wrapping the disk error", err)
	}
	if len(reported) != 1 || !errors.Is(reported[0], errFull) {
		t.Fatalf("OnFatal was told %v, want the disk error once", reported)
	}
	fs.InjectWriteError(nil)
	// Healing the disk does not revive the engine: Pebble's commit pipeline
	// is gone, and the refused write must not be read back.
	if err := put(e, "later"); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("commit after failure returned %v", err)
	}
	if err := e.ApplyBatchRepr(nil); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("ApplyBatchRepr after failure returned %v", err)
	}
	if _, _, err := e.Get(MVCCKey{Key: []byte("refused")}); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("Get after failure returned %v", err)
	}
	if len(reported) != 1 {
		t.Fatalf("OnFatal called %d times", len(reported))
	}
	if _, err := e.NewIter(IterOptions{}); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("NewIter after failure returned %v", err)
	}
	snap := e.NewSnapshot()
	if _, _, err := snap.Get(MVCCKey{Key: []byte("refused")}); !errors.Is(err, ErrEngineFailed) {
		t.Fatalf("snapshot Get after failure returned %v", err)
	}
	snap.Close()
	// Close reports the disk error it saw; the restart is what matters.
	_ = e.Close()

	e2, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e2.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if _, ok, err := e2.Get(MVCCKey{Key: []byte("acked")}); err != nil || !ok {
		t.Fatalf("acknowledged write lost after restart: ok=%v err=%v", ok, err)
	}
	if err := put(e2, "after-restart"); err != nil {
		t.Fatalf("commit after restart on a healed disk: %v", err)
	}
}

// TestAckedWritesSurviveDiskFailure runs concurrent committers (sharing
// fsyncs through group commit) until the disk fails under them — full
// (ENOSPC) or broken (EIO) — then loses whatever was not synced, as a
// power cut would, and reopens the store on a healthy disk: every write
// that was acknowledged is there. The commit that met the failure reports
// the disk's error (so a disk-full can be told apart), and a commit begun
// after it is refused.
func TestAckedWritesSurviveDiskFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"disk full", syscall.ENOSPC},
		{"io error", syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			fs := simfs.New(mem, simfs.Options{})
			e, err := Open("db", Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu       sync.Mutex
				acked    []string
				sawDisk  bool
				injected = make(chan struct{})
				wg       sync.WaitGroup
			)
			for w := range 4 {
				wg.Go(func() {
					for i := 0; ; i++ {
						k := fmt.Sprintf("w%d-%05d", w, i)
						b := e.NewWriteOnlyBatch()
						if err := b.Put(MVCCKey{Key: []byte(k)}, []byte("v")); err != nil {
							t.Error(err)
						}
						err := b.Commit()
						b.Close()
						mu.Lock()
						if err == nil {
							acked = append(acked, k)
						} else {
							if !errors.Is(err, ErrEngineFailed) {
								t.Errorf("commit on a failing disk: %v, want ErrEngineFailed", err)
							}
							if errors.Is(err, tc.err) {
								sawDisk = true
							}
						}
						mu.Unlock()
						if err != nil {
							return
						}
						if w == 0 && i == 200 {
							fs.InjectWriteError(tc.err)
							close(injected)
						}
					}
				})
			}
			<-injected
			wg.Wait()
			// A commit begun after the failure is refused.
			b := e.NewWriteOnlyBatch()
			_ = b.Put(MVCCKey{Key: []byte("after")}, []byte("v"))
			if err := b.Commit(); !errors.Is(err, ErrEngineFailed) {
				t.Errorf("a commit after the failure returned %v", err)
			}
			b.Close()
			if !sawDisk {
				t.Errorf("no commit reported the disk's error %v", tc.err)
			}
			_ = e.Close()

			// A power cut keeps what was synced and a random part of the
			// rest; then the disk is healthy again.
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 2))})
			e2, err := Open("db", Options{FS: crashed})
			if err != nil {
				t.Fatalf("reopening on a healthy disk: %v", err)
			}
			defer e2.Close()
			for _, k := range acked {
				if _, ok, err := e2.Get(MVCCKey{Key: []byte(k)}); err != nil || !ok {
					t.Fatalf("acknowledged write %s lost (ok=%v err=%v)", k, ok, err)
				}
			}
			t.Logf("%d writes acknowledged before the disk failed, all present after the restart", len(acked))
		})
	}
}

// TestDiskStallReported: a commit stuck on a disk that stops answering
// fails nothing, so only the stall watcher can tell; OnDiskStall hears of
// it while the commit is still stuck, and the commit completes once the
// disk answers again.
func TestDiskStallReported(t *testing.T) {
	fs := simfs.New(vfs.NewMem(), simfs.Options{})
	stalled := make(chan vfs.DiskSlowInfo, 1)
	e, err := Open("db", Options{FS: fs, DiskStallThreshold: time.Millisecond, OnDiskStall: func(info vfs.DiskSlowInfo) {
		select {
		case stalled <- info:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	fs.Stall()
	done := make(chan error)
	go func() {
		b := e.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(MVCCKey{Key: []byte("k")}, []byte("v")); err != nil {
			done <- err
			return
		}
		done <- b.Commit()
	}()
	info := <-stalled
	select {
	case err := <-done:
		t.Fatalf("the commit returned (%v) during the stall", err)
	default:
	}
	if info.Duration < time.Millisecond {
		t.Fatalf("reported a stall of %s, under the threshold", info.Duration)
	}
	fs.Unstall()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
