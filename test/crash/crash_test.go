// Package crash tests that a process killed with SIGKILL at a random point
// loses no acknowledged write and leaves no partial transaction.
//
// The test binary re-executes itself as a child writer (CAIRN_CRASH_CHILD
// names the store directory). The child runs transactions on an on-disk
// store; each transaction i writes two keys, a/i and b/i, on two different
// tablets (even i, a two-phase commit with intents and a record) or on one
// tablet (odd i, a one-phase commit), and increments a counter key. It prints
// "ack i" only after Commit returned. The parent kills it at a random moment,
// starts a new child on the same store (which must cope with whatever the
// dead one left behind: pending records, unresolved intents), and finally
// reopens the store itself and checks:
//
//  1. every acknowledged transaction's keys hold its values;
//  2. every transaction is all-or-nothing: a/i present iff b/i present;
//  3. the counter equals the number of transactions present (no increment
//     without its writes, no writes without their increment).
package crash

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/testcluster"
)

const (
	envChild = "CAIRN_CRASH_CHILD"
	envStart = "CAIRN_CRASH_START"
	// liveness is short so a restarted writer (and the final check) abort
	// the dead writer's pending transactions quickly.
	liveness = 300 * time.Millisecond
)

var counterKey = []byte("\x03c/n")

func keyA(i int) []byte { return []byte(fmt.Sprintf("\x03c/a/%09d", i)) }
func keyB(i int) []byte {
	if i%2 == 1 {
		// Odd transactions stay on tablet a: a one-phase commit.
		return []byte(fmt.Sprintf("\x03c/a/%09d/b", i))
	}
	return []byte(fmt.Sprintf("\x03c/b/%09d", i))
}
func value(i int) []byte { return []byte("v" + strconv.Itoa(i)) }

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChild); dir != "" {
		start, _ := strconv.Atoi(os.Getenv(envStart))
		if err := runChild(dir, start); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// open starts a node on the on-disk store in dir, split in two tablets
// (only when fresh: a restarted store keeps its tablets).
func open(ctx context.Context, dir string) (*testcluster.Node, error) {
	n, err := testcluster.Start(ctx, testcluster.Options{
		Dir:       dir,
		MaxOffset: 500 * time.Millisecond,
		Store:     store.Config{TxnLivenessThreshold: liveness},
		DB:        kv.Options{HeartbeatInterval: liveness / 4},
	})
	if err != nil {
		return nil, err
	}
	if len(n.Store.Tablets()) == 1 {
		if _, _, err := n.Store.Split(ctx, []byte("\x03c/b")); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// runChild writes transactions until it is killed (or runs for 30 s).
func runChild(dir string, start int) error {
	ctx := context.Background()
	n, err := open(ctx, dir)
	if err != nil {
		return err
	}
	var next atomic.Int64
	next.Store(int64(start))
	var mu sync.Mutex // serializes "ack" lines
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := int(next.Add(1) - 1)
				err := n.DB.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
					c, _, err := txn.Get(ctx, counterKey)
					if err != nil {
						return err
					}
					cnt, _ := strconv.Atoi(string(c))
					b := &kv.Batch{}
					b.Put(keyA(i), value(i))
					b.Put(keyB(i), value(i))
					b.Put(counterKey, []byte(strconv.Itoa(cnt+1)))
					return txn.CommitInBatch(ctx, b)
				})
				if err != nil {
					errc <- fmt.Errorf("txn %d: %w", i, err)
					return
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %d\n", i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func TestCrash(t *testing.T) {
	dir := t.TempDir()
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[int]bool{}
	for r := 0; r < rounds; r++ {
		start := r * 1_000_000
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+dir, envStart+"="+strconv.Itoa(start))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acks := make(chan int, 1<<16)
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var i int
				if _, err := fmt.Sscanf(sc.Text(), "ack %d", &i); err == nil {
					acks <- i
				}
			}
		}()
		// Kill at a random moment after the first few acknowledgements, so
		// the child is mid-flight: intents written, records pending,
		// resolution in progress.
		want := 20 + rng.Intn(200)
		got := 0
		timeout := time.After(20 * time.Second)
	wait:
		for got < want {
			select {
			case i := <-acks:
				acked[i] = true
				got++
			case <-done:
				break wait
			case <-timeout:
				break wait
			}
		}
		time.Sleep(time.Duration(rng.Intn(30)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done // the reader has seen every line the child printed
	drain:
		for {
			select {
			case i := <-acks:
				acked[i] = true
			default:
				break drain
			}
		}
		werr := cmd.Wait()
		if ee, ok := werr.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die by SIGKILL (after %d acks): %v", r, got, werr)
		}
		t.Logf("round %d: killed after %d acknowledged transactions", r, got)
	}
	verify(t, dir, acked)
}

func verify(t *testing.T, dir string, acked map[int]bool) {
	ctx := context.Background()
	n, err := open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	present := map[int]bool{}
	var counter int
	err = n.DB.Txn(ctx, kv.Snapshot, func(ctx context.Context, txn *kv.Txn) error {
		clear(present)
		rows, err := txn.Scan(ctx, []byte("\x03c/"), []byte("\x03c0"), 0)
		if err != nil {
			return err
		}
		vals := map[string]string{}
		for _, kv := range rows {
			vals[string(kv.Key)] = string(kv.Value)
		}
		counter, _ = strconv.Atoi(vals[string(counterKey)])
		for k, v := range vals {
			if !strings.HasPrefix(k, "\x03c/a/") || strings.HasSuffix(k, "/b") {
				continue
			}
			var i int
			if _, err := fmt.Sscanf(k[len("\x03c/a/"):], "%d", &i); err != nil {
				return fmt.Errorf("bad key %q", k)
			}
			if v != string(value(i)) {
				return fmt.Errorf("txn %d: a holds %q", i, v)
			}
			if vb, ok := vals[string(keyB(i))]; !ok || vb != v {
				return fmt.Errorf("txn %d half-applied: a=%q b=%q (present %v)", i, v, vb, ok)
			}
			present[i] = true
		}
		for k := range vals {
			if strings.HasPrefix(k, "\x03c/b/") {
				var i int
				fmt.Sscanf(k[len("\x03c/b/"):], "%d", &i)
				if !present[i] {
					return fmt.Errorf("txn %d half-applied: b without a", i)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i := range acked {
		if !present[i] {
			lost++
			t.Errorf("acknowledged transaction %d is missing", i)
		}
	}
	if counter != len(present) {
		t.Errorf("counter = %d, but %d transactions are present", counter, len(present))
	}
	t.Logf("%d acknowledged, %d present (unacknowledged but committed: %d), lost: %d", len(acked), len(present), len(present)-len(acked), lost)
	if len(acked) == 0 {
		t.Fatal("no transaction was acknowledged: the test proved nothing")
	}
}
