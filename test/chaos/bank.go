package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bank is issue 13's bank workload: Accounts accounts of Initial each,
// and Clients clients each moving an amount between two accounts in one
// transaction (two UPDATEs and an INSERT into the transfer log), each
// client connecting to the nodes in turn.
type Bank struct {
	Accounts, Initial, Clients int

	mu  sync.Mutex
	ops map[string]*transfer
}

type transfer struct {
	src, dst, amount int
	// srcNew, dstNew are the balances the UPDATEs returned (0: not
	// known), for diagnosing a lost update: two committed transfers that
	// started from the same balance of one account.
	srcNew, dstNew int64
	outcome        Outcome
	err            error
	node           int
	start, end     time.Time
}

// Name implements Workload.
func (b *Bank) Name() string { return "bank" }

// Setup implements Workload.
func (b *Bank) Setup(ctx context.Context, c *Cluster) error {
	b.ops = map[string]*transfer{}
	return execAll(ctx, c, 0,
		"CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT)",
		"CREATE TABLE transfers (tid TEXT PRIMARY KEY, src INT, dst INT, amount INT)",
		fmt.Sprintf("INSERT INTO accounts SELECT g, %d FROM generate_series(1, %d) AS g", b.Initial, b.Accounts))
}

// Run implements Workload.
func (b *Bank) Run(ctx context.Context, c *Cluster, seed uint64, commits *Commits) {
	var wg sync.WaitGroup
	for cl := range b.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(cl)))
			s := newSession(c, cl)
			defer s.close()
			for k := 0; ctx.Err() == nil; k++ {
				src, dst := 1+rng.IntN(b.Accounts), 1+rng.IntN(b.Accounts)
				if src == dst {
					continue
				}
				amount := 1 + rng.IntN(50)
				tid := fmt.Sprintf("c%d-%d", cl, k)
				conn, node := s.next(ctx)
				if conn == nil {
					continue
				}
				tr := &transfer{src: src, dst: dst, amount: amount, node: node, start: time.Now()}
				tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				tr.outcome, tr.err = Txn(tctx, conn, "BEGIN", func(ctx context.Context) error {
					if err := conn.QueryRow(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2 RETURNING balance", amount, src).Scan(&tr.srcNew); err != nil {
						return err
					}
					if err := conn.QueryRow(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2 RETURNING balance", amount, dst).Scan(&tr.dstNew); err != nil {
						return err
					}
					_, err := conn.Exec(ctx, "INSERT INTO transfers VALUES ($1, $2, $3, $4)", tid, src, dst, amount)
					return err
				})
				cancel()
				tr.end = time.Now()
				commits.Took(fmt.Sprintf("bank/%d", cl), node, tr.start, tr.err)
				if tr.outcome == OK {
					commits.Add()
				} else {
					commits.Fail(node, tr.err)
				}
				s.after(tr.err, tr.outcome)
				b.mu.Lock()
				b.ops[tid] = tr
				b.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// Check implements Workload: invariant 1 of the package, through every
// live node.
func (b *Bank) Check(ctx context.Context, c *Cluster) (string, []string) {
	var anomalies []string
	counts := map[Outcome]int{}
	for _, tr := range b.ops {
		counts[tr.outcome]++
	}
	unknownPresent := 0
	for _, i := range c.Live() {
		var bal map[int]int64
		var log map[string][3]int
		err := retry(ctx, 60*time.Second, func() error {
			conn, err := c.ConnectWait(ctx, i, 30*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			if bal, err = readBalances(ctx, conn); err != nil {
				return err
			}
			log, err = readTransfers(ctx, conn)
			return err
		})
		if err != nil {
			anomalies = append(anomalies, fmt.Sprintf("bank: node %d: cannot read: %v", i+1, err))
			continue
		}
		var total int64
		for _, v := range bal {
			total += v
		}
		if len(bal) != b.Accounts || total != int64(b.Accounts*b.Initial) {
			anomalies = append(anomalies, fmt.Sprintf("bank: node %d: %d accounts summing to %d, want %d summing to %d",
				i+1, len(bal), total, b.Accounts, b.Accounts*b.Initial))
		}
		want := map[int]int64{}
		for id := 1; id <= b.Accounts; id++ {
			want[id] = int64(b.Initial)
		}
		unknownPresent = 0
		for tid, l := range log {
			want[l[0]] -= int64(l[2])
			want[l[1]] += int64(l[2])
			tr := b.ops[tid]
			switch {
			case tr == nil:
				anomalies = append(anomalies, fmt.Sprintf("bank: node %d: transfer %s in the log was never attempted", i+1, tid))
			case tr.src != l[0] || tr.dst != l[1] || tr.amount != l[2]:
				anomalies = append(anomalies, fmt.Sprintf("bank: node %d: transfer %s logged as %v, sent as %d->%d %d", i+1, tid, l, tr.src, tr.dst, tr.amount))
			case tr.outcome == Fail:
				anomalies = append(anomalies, fmt.Sprintf("bank: node %d: transfer %s is in the log but failed (%v) on node %d at %s",
					i+1, tid, tr.err, tr.node+1, tr.end.Format("15:04:05.000")))
			case tr.outcome == Unknown:
				unknownPresent++
			}
		}
		ids := make([]int, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			if d := bal[id] - want[id]; d != 0 {
				anomalies = append(anomalies, fmt.Sprintf("bank: node %d: account %d holds %d, the transfer log says %d; transfers of that amount touching it: %s; candidates for a transfer that did not see an earlier one: %s",
					i+1, id, bal[id], want[id], b.explain(log, id, int(d)), b.stale(log, id)))
			}
		}
		for tid, tr := range b.ops {
			if _, ok := log[tid]; !ok && tr.outcome == OK {
				anomalies = append(anomalies, fmt.Sprintf("bank: node %d: acknowledged transfer %s (%d->%d %d, node %d, %s) is missing",
					i+1, tid, tr.src, tr.dst, tr.amount, tr.node+1, tr.end.Format("15:04:05.000")))
			}
		}
	}
	return fmt.Sprintf("bank: %d transfers acknowledged, %d failed, %d unknown (%d of them committed)",
		counts[OK], counts[Fail], counts[Unknown], unknownPresent), anomalies
}

// explain lists the transfers of |d| from or to account id, logged or not.
func (b *Bank) explain(log map[string][3]int, id, d int) string {
	var out []string
	for tid, tr := range b.ops {
		if tr.amount != d && tr.amount != -d || tr.src != id && tr.dst != id {
			continue
		}
		_, logged := log[tid]
		out = append(out, fmt.Sprintf("%s (%d->%d %d, %s on node %d, logged %v, returned %d/%d, %s..%s: %v)", tid, tr.src, tr.dst, tr.amount, tr.outcome,
			tr.node+1, logged, tr.srcNew, tr.dstNew, tr.start.Format("15:04:05.000"), tr.end.Format("15:04:05.000"), tr.err))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// stale lists pairs of committed (logged) transfers of account id where
// the second began after the first had ended and still started from the
// same balance (the RETURNING values): the second did not see the first,
// whose write it then overwrote (a lost update), or the first's write to
// this account was removed (a transaction applied in part).
func (b *Bank) stale(log map[string][3]int, id int) string {
	type use struct {
		tid string
		tr  *transfer
	}
	from := map[int64][]use{}
	for tid := range log {
		tr := b.ops[tid]
		if tr == nil {
			continue
		}
		if tr.src == id && tr.srcNew != 0 {
			from[tr.srcNew+int64(tr.amount)] = append(from[tr.srcNew+int64(tr.amount)], use{tid, tr})
		}
		if tr.dst == id && tr.dstNew != 0 {
			from[tr.dstNew-int64(tr.amount)] = append(from[tr.dstNew-int64(tr.amount)], use{tid, tr})
		}
	}
	var out []string
	for old, us := range from {
		for _, a := range us {
			for _, c := range us {
				if a.tr != c.tr && !c.tr.start.Before(a.tr.end) {
					out = append(out, fmt.Sprintf("%s (%d->%d %d, %s on node %d, %s..%s: %v) then %s (%d->%d %d, %s on node %d, %s..%s) both from balance %d",
						a.tid, a.tr.src, a.tr.dst, a.tr.amount, a.tr.outcome, a.tr.node+1, a.tr.start.Format("15:04:05.000"), a.tr.end.Format("15:04:05.000"), a.tr.err,
						c.tid, c.tr.src, c.tr.dst, c.tr.amount, c.tr.outcome, c.tr.node+1, c.tr.start.Format("15:04:05.000"), c.tr.end.Format("15:04:05.000"), old))
				}
			}
		}
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// UnknownErrors lists the errors of transfers with an unknown outcome
// (for the report).
func (b *Bank) UnknownErrors(max int) []string {
	var out []string
	for tid, tr := range b.ops {
		if tr.outcome == Unknown && len(out) < max {
			out = append(out, fmt.Sprintf("%s: %v", tid, tr.err))
		}
	}
	return out
}

func readBalances(ctx context.Context, conn *pgx.Conn) (map[int]int64, error) {
	rows, err := conn.Query(ctx, "SELECT id, balance FROM accounts")
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for rows.Next() {
		var id int
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, err
		}
		out[id] = v
	}
	return out, rows.Err()
}

func readTransfers(ctx context.Context, conn *pgx.Conn) (map[string][3]int, error) {
	rows, err := conn.Query(ctx, "SELECT tid, src, dst, amount FROM transfers")
	if err != nil {
		return nil, err
	}
	out := map[string][3]int{}
	for rows.Next() {
		var tid string
		var l [3]int
		if err := rows.Scan(&tid, &l[0], &l[1], &l[2]); err != nil {
			return nil, err
		}
		out[tid] = l
	}
	return out, rows.Err()
}
