package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/test/chaos/elle"
)

// ListAppend is the list-append workload (invariant 2): Keys rows of a
// table whose text column holds a comma-separated list; each transaction
// appends unique values to and reads one to four of them, at Level.
type ListAppend struct {
	Keys, Clients int
	Level         elle.Level

	table string
	mu    sync.Mutex
	h     []elle.Txn
	next  atomic.Int64
}

// Name implements Workload.
func (l *ListAppend) Name() string {
	if l.Level == elle.Serializable {
		return "list-append serializable"
	}
	return "list-append repeatable read"
}

func (l *ListAppend) begin() string {
	if l.Level == elle.Serializable {
		return "BEGIN ISOLATION LEVEL SERIALIZABLE"
	}
	return "BEGIN ISOLATION LEVEL REPEATABLE READ"
}

// Setup implements Workload.
func (l *ListAppend) Setup(ctx context.Context, c *Cluster) error {
	l.table = "la_ser"
	if l.Level != elle.Serializable {
		l.table = "la_rr"
	}
	return execAll(ctx, c, 0,
		fmt.Sprintf("CREATE TABLE %s (k INT PRIMARY KEY, v TEXT NOT NULL)", l.table),
		fmt.Sprintf("INSERT INTO %s SELECT g, '' FROM generate_series(0, %d) AS g", l.table, l.Keys-1))
}

// parseList reads "" or ",1,5,9" as a list.
func parseList(s string) ([]int, error) {
	out := []int{}
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bad list %q", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// Run implements Workload.
func (l *ListAppend) Run(ctx context.Context, c *Cluster, seed uint64, commits *Commits) {
	var wg sync.WaitGroup
	for cl := range l.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(cl)))
			s := newSession(c, cl)
			defer s.close()
			for ctx.Err() == nil {
				n := 1 + rng.IntN(4)
				tx := elle.Txn{}
				for range n {
					k := rng.IntN(l.Keys)
					if rng.IntN(2) == 0 {
						tx.Mops = append(tx.Mops, elle.Mop{Key: strconv.Itoa(k)})
					} else {
						tx.Mops = append(tx.Mops, elle.Mop{Append: true, Key: strconv.Itoa(k), Value: int(l.next.Add(1))})
					}
				}
				conn, node := s.next(ctx)
				if conn == nil {
					continue
				}
				tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				began := time.Now()
				out, err := Txn(tctx, conn, l.begin(), func(ctx context.Context) error {
					for i := range tx.Mops {
						m := &tx.Mops[i]
						k, _ := strconv.Atoi(m.Key)
						if m.Append {
							if _, err := conn.Exec(ctx, fmt.Sprintf("UPDATE %s SET v = v || $1 WHERE k = $2", l.table), ","+strconv.Itoa(m.Value), k); err != nil {
								return err
							}
							continue
						}
						var v string
						if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT v FROM %s WHERE k = $1", l.table), k).Scan(&v); err != nil {
							return err
						}
						list, err := parseList(v)
						if err != nil {
							return err
						}
						m.List = list
					}
					return nil
				})
				cancel()
				commits.Took(fmt.Sprintf("%s/%d", l.table, cl), node, began, err)
				s.after(err, out)
				commits.Fail(node, err)
				switch out {
				case OK:
					commits.Add()
					tx.Status = elle.OK
				case Fail:
					tx.Status = elle.Fail
				case Unknown:
					// A transaction that may not have committed proves
					// nothing by what it read.
					tx.Status = elle.Unknown
					for i := range tx.Mops {
						tx.Mops[i].List = nil
					}
				}
				l.mu.Lock()
				tx.ID = len(l.h) + 1
				l.h = append(l.h, tx)
				l.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// Check implements Workload: the history through elle, the final lists
// read through every live node (each must agree).
func (l *ListAppend) Check(ctx context.Context, c *Cluster) (string, []string) {
	var anomalies []string
	var final map[string][]int
	for _, i := range c.Live() {
		var f map[string][]int
		err := retry(ctx, 60*time.Second, func() error {
			conn, err := c.ConnectWait(ctx, i, 30*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			rows, err := conn.Query(ctx, fmt.Sprintf("SELECT k, v FROM %s", l.table))
			if err != nil {
				return err
			}
			f = map[string][]int{}
			for rows.Next() {
				var k int
				var v string
				if err := rows.Scan(&k, &v); err != nil {
					return err
				}
				if f[strconv.Itoa(k)], err = parseList(v); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		if err != nil {
			anomalies = append(anomalies, fmt.Sprintf("%s: node %d: cannot read: %v", l.Name(), i+1, err))
			continue
		}
		if final == nil {
			final = f
		} else if fmt.Sprint(f) != fmt.Sprint(final) {
			anomalies = append(anomalies, fmt.Sprintf("%s: node %d's final lists differ from another node's", l.Name(), i+1))
		}
	}
	res := elle.Check(l.h, final)
	level := elle.Serializable
	if l.Level != elle.Serializable {
		level = elle.SnapshotIsolation
	}
	for _, k := range res.Forbidden(level) {
		for _, e := range res[k] {
			anomalies = append(anomalies, fmt.Sprintf("%s: %s: %s", l.Name(), k, e))
		}
	}
	counts := map[elle.Status]int{}
	for _, t := range l.h {
		counts[t.Status]++
	}
	allowed := ""
	if len(res[elle.G2Item]) > 0 && level == elle.SnapshotIsolation {
		allowed = fmt.Sprintf(" (G2-item seen, allowed: %s)", res[elle.G2Item][0])
	}
	return fmt.Sprintf("%s: %d transactions ok, %d failed, %d unknown, %d appends%s",
		l.Name(), counts[elle.OK], counts[elle.Fail], counts[elle.Unknown], l.next.Load(), allowed), anomalies
}
