package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// TestBankTransfers runs concurrent transfers between accounts on two
// tablets through a minimal coordinator (read both, write both, commit;
// restart on any retryable error) and checks the total never changes. It
// exercises lock waiting, pushes, deadlock breaking across tablets, 1PC
// (both accounts on one tablet) and two-phase commits (on two).
func TestBankTransfers(t *testing.T) {
	e := newEnv(t, Config{PushPollInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, _, err := e.s.Split(ctx, []byte("acct2")); err != nil {
		t.Fatal(err)
	}
	const (
		accounts  = 4
		initial   = 100
		workers   = 4
		transfers = 15
	)
	acct := func(i int) string { return "acct" + strconv.Itoa(i) }
	for i := range accounts {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PutRequest{Key: []byte(acct(i)), Value: []byte(strconv.Itoa(initial))})
		if _, err := e.send(ctx, ba); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	stats := map[string]int{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range transfers {
				from, to := (w+i)%accounts, (w+2*i+1)%accounts
				if from == to {
					to = (to + 1) % accounts
				}
				outcome, err := transfer(ctx, e, acct(from), acct(to), 1+i%3)
				if err != nil {
					t.Errorf("worker %d transfer %d: %v", w, i, err)
					return
				}
				mu.Lock()
				stats[outcome]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for i := range accounts {
		v, err := strconv.Atoi(string(e.get(acct(i))))
		if err != nil {
			t.Fatal(err)
		}
		total += v
	}
	if total != accounts*initial {
		t.Fatalf("total = %d, want %d (outcomes %v)", total, accounts*initial, stats)
	}
	t.Logf("outcomes: %v", stats)
}

// transfer moves amount between two accounts in a transaction, restarting
// it on retryable errors. It reports how the committing attempt went.
func transfer(ctx context.Context, e *env, from, to string, amount int) (string, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 1000 {
			return "", errors.New("too many restarts")
		}
		if attempt > 0 {
			// Back off a little so restarting transactions do not keep
			// pushing each other in lockstep.
			time.Sleep(time.Duration(attempt%5) * time.Millisecond)
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		txn := newTxn("T", 0, e.clock.Now(), 1)
		txn.ID = uuid.New()
		outcome, err := tryTransfer(ctx, e, txn, from, to, amount)
		if err == nil {
			if attempt > 0 {
				outcome += "-after-restart"
			}
			return outcome, nil
		}
		if !kvpb.IsRetryable(err) {
			return "", err
		}
	}
}

func tryTransfer(ctx context.Context, e *env, txn *kvpb.Transaction, from, to string, amount int) (outcome string, err error) {
	rollback := func() {
		if len(txn.Key) == 0 {
			return
		}
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
		ba.Add(&kvpb.EndTxnRequest{Key: txn.Key, LockSpans: []kvpb.Span{{Key: []byte(from)}, {Key: []byte(to)}}})
		_, _ = e.send(ctx, ba)
	}
	read := func(k string) (int, error) {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
		ba.Add(&kvpb.GetRequest{Key: []byte(k)})
		br, err := e.send(ctx, ba)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(string(br.Responses[0].(*kvpb.GetResponse).Value))
	}
	a, err := read(from)
	if err != nil {
		return "", err
	}
	b, err := read(to)
	if err != nil {
		return "", err
	}
	txn.Key = []byte(from)
	write := func(k string, v int) error {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
		ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte(strconv.Itoa(v))})
		br, err := e.send(ctx, ba)
		if err != nil {
			return err
		}
		txn = br.Txn
		return nil
	}
	// The writes are intents on the first tablet touched, then 1PC on the
	// second when both accounts share it; otherwise two phases.
	sameTablet := (from < "acct2") == (to < "acct2")
	if sameTablet {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
		ba.Add(
			&kvpb.PutRequest{Key: []byte(from), Value: []byte(strconv.Itoa(a - amount))},
			&kvpb.PutRequest{Key: []byte(to), Value: []byte(strconv.Itoa(b + amount))},
			&kvpb.EndTxnRequest{Key: txn.Key, Commit: true, LockSpans: []kvpb.Span{{Key: []byte(from)}, {Key: []byte(to)}}},
		)
		br, err := e.send(ctx, ba)
		if err != nil {
			rollback()
			return "", err
		}
		if !br.OnePhaseCommit {
			return "", fmt.Errorf("single-tablet commit was not 1PC")
		}
		return "1pc", nil
	}
	if err := write(from, a-amount); err != nil {
		rollback()
		return "", err
	}
	if err := write(to, b+amount); err != nil {
		rollback()
		return "", err
	}
	if txn.ReadTimestamp.Less(txn.WriteTimestamp) {
		// Pushed: refresh the two reads up to the write timestamp, as a
		// serializable coordinator does; restart if that fails.
		for _, k := range []string{from, to} { // on two tablets: one batch each
			ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
			ba.Txn.ReadTimestamp = txn.WriteTimestamp
			ba.Add(&kvpb.RefreshRequest{Key: []byte(k), From: txn.ReadTimestamp})
			if _, err := e.send(ctx, ba); err != nil {
				rollback()
				return "", err
			}
		}
		txn.ReadTimestamp = txn.WriteTimestamp
	}
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
	ba.Add(&kvpb.EndTxnRequest{Key: txn.Key, Commit: true, LockSpans: []kvpb.Span{{Key: []byte(from)}, {Key: []byte(to)}}})
	if _, err := e.send(ctx, ba); err != nil {
		rollback()
		return "", err
	}
	return "2pc", nil
}
