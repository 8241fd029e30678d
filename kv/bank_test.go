package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestBank is the classic bank invariant under concurrency: money moves
// between accounts on many tablets in transactions while auditors read all
// balances in one snapshot. It checks that
//
//   - every audit sees the same total (snapshots are consistent across
//     tablets and no transfer is half-visible),
//   - every acknowledged transfer is applied and nothing else is: at the end
//     each balance equals its initial value plus the acknowledged transfers
//     into it minus those out of it.
//
// Transfers use every isolation level and commit their two writes in the
// committing batch, so same-tablet transfers take the one-phase path and
// cross-tablet ones the two-phase path; conflicts, pushes, refreshes,
// restarts and deadlocks all happen along the way. Half the transfers
// instead buffer their writes (txn_buffer.go) as two batches and commit
// with Commit: the same paths, reached through the write buffer, racing
// the others.
func TestBank(t *testing.T) {
	const (
		accounts  = 100
		initial   = 1000
		workers   = 16
		auditors  = 2
		perTablet = 12 // accounts per tablet: 9 tablets
	)
	duration, maxTransfers := 3*time.Second, int64(4000)
	if raceEnabled {
		duration, maxTransfers = 1500*time.Millisecond, 1000
	}
	acct := func(i int) []byte { return []byte(fmt.Sprintf("acct/%03d", i)) }
	var splits []string
	for i := perTablet; i < accounts; i += perTablet {
		splits = append(splits, string(acct(i)))
	}
	e := newTestEnv(t, envOptions{splits: splits})
	if n := len(e.store.Tablets()); n < 8 {
		t.Fatalf("%d tablets, want at least 8", n)
	}
	ctx := context.Background()
	b := &Batch{}
	for i := range accounts {
		b.Put(acct(i), []byte(strconv.Itoa(initial)))
	}
	if err := e.db.Txn(ctx, Snapshot, func(ctx context.Context, txn *Txn) error { return txn.Run(ctx, b) }); err != nil {
		t.Fatal(err)
	}

	type transfer struct {
		id       uuid.UUID
		from, to int
		amount   int
	}
	var (
		logMu    sync.Mutex
		log      []transfer
		started  atomic.Int64
		failed   atomic.Int64
		onePC    atomic.Int64
		attempts atomic.Int64
		audits   atomic.Int64
		slowest  atomic.Int64 // nanoseconds, for the log only
		stop     = make(chan struct{})
		errs     = make(chan error, workers+auditors)
	)
	levels := []IsolationLevel{ReadCommitted, Snapshot, Serializable}
	doTransfer := func(rng *rand.Rand) error {
		from := rng.IntN(accounts)
		to := (from + 1 + rng.IntN(accounts-1)) % accounts
		want := 1 + rng.IntN(50)
		var tr transfer
		var txnUsed *Txn
		buffered := rng.IntN(2) == 0
		begin := time.Now()
		defer func() {
			d := int64(time.Since(begin))
			for old := slowest.Load(); d > old && !slowest.CompareAndSwap(old, d); old = slowest.Load() {
			}
		}()
		err := e.db.Txn(ctx, levels[rng.IntN(len(levels))], func(ctx context.Context, txn *Txn) error {
			attempts.Add(1)
			txnUsed = txn
			rb := &Batch{}
			rb.Get(acct(from))
			rb.Get(acct(to))
			if err := txn.Run(ctx, rb); err != nil {
				return err
			}
			fb, err := strconv.Atoi(string(rb.Results[0].Rows[0].Value))
			if err != nil {
				return err
			}
			tb, err := strconv.Atoi(string(rb.Results[1].Rows[0].Value))
			if err != nil {
				return err
			}
			amount := min(want, fb)
			tr = transfer{id: txn.ID(), from: from, to: to, amount: amount}
			if buffered {
				txn.EnableWriteBuffering()
				// Two writing batches of the statement that read (a
				// Step between would let READ COMMITTED lose the second
				// key's update, buffered or not).
				if err := txn.Put(ctx, acct(from), []byte(strconv.Itoa(fb-amount))); err != nil {
					return err
				}
				return txn.Put(ctx, acct(to), []byte(strconv.Itoa(tb+amount)))
			}
			wb := &Batch{}
			wb.Put(acct(from), []byte(strconv.Itoa(fb-amount)))
			wb.Put(acct(to), []byte(strconv.Itoa(tb+amount)))
			return txn.CommitInBatch(ctx, wb)
		})
		if err != nil {
			var exhausted *RetriesExhaustedError
			if errors.As(err, &exhausted) {
				// Not acknowledged: must not be applied, which the final
				// balances check.
				failed.Add(1)
				return nil
			}
			return fmt.Errorf("transfer %d->%d: %w", from, to, err)
		}
		if txnUsed.OnePhaseCommitted() {
			onePC.Add(1)
		}
		logMu.Lock()
		log = append(log, tr)
		logMu.Unlock()
		return nil
	}
	audit := func() error {
		return e.db.Txn(ctx, Snapshot, func(ctx context.Context, txn *Txn) error {
			rows, err := txn.Scan(ctx, acct(0), acct(accounts), 0)
			if err != nil {
				return err
			}
			if len(rows) != accounts {
				return fmt.Errorf("audit saw %d accounts, want %d", len(rows), accounts)
			}
			total := 0
			for _, r := range rows {
				v, err := strconv.Atoi(string(r.Value))
				if err != nil {
					return err
				}
				total += v
			}
			if total != accounts*initial {
				return fmt.Errorf("audit at %s: total %d, want %d", txn.ReadTimestamp(), total, accounts*initial)
			}
			return nil
		})
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if started.Add(1) > maxTransfers {
					return
				}
				if err := doTransfer(rng); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range auditors {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := audit(); err != nil {
					errs <- err
					return
				}
				audits.Add(1)
			}
		})
	}
	timer := time.AfterFunc(duration, func() { close(stop) })
	// Workers also stop on their own once maxTransfers have started;
	// auditors need the stop signal, so close it early in that case.
	workersDone := make(chan struct{})
	go func() {
		for started.Load() <= maxTransfers {
			select {
			case <-stop:
				close(workersDone)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if timer.Stop() {
			close(stop)
		}
		close(workersDone)
	}()
	wg.Wait()
	<-workersDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if err := audit(); err != nil {
		t.Fatal(err)
	}

	want := make([]int, accounts)
	for i := range want {
		want[i] = initial
	}
	for _, tr := range log {
		want[tr.from] -= tr.amount
		want[tr.to] += tr.amount
	}
	rows, err := e.db.Scan(ctx, acct(0), acct(accounts), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		got, _ := strconv.Atoi(string(r.Value))
		if got != want[i] {
			t.Errorf("account %d: balance %d, want %d from the acknowledged transfers", i, got, want[i])
		}
	}
	t.Logf("%d transfers acknowledged (%d one-phase), %d gave up after retries, %d closure attempts, %d audits; slowest transfer %s",
		len(log), onePC.Load(), failed.Load(), attempts.Load(), audits.Load(), time.Duration(slowest.Load()))
	if len(log) == 0 || audits.Load() == 0 {
		t.Fatalf("no progress: %d transfers, %d audits", len(log), audits.Load())
	}
}
