package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/test/chaos/elle"
	"github.com/jackc/pgx/v5"
)

// ListAppend is the list-append workload (invariant 2): rows of a table
// whose text column holds a comma-separated list; each transaction
// appends unique values to and reads one to four of them, at Level. Keys
// rows are in play at a time; a key that has taken MaxAppends appends
// leaves play and the next unused key takes its place (an append to a
// key with no row yet inserts it). Without the rotation a 15-minute run
// grew each of its 12 lists to about 5,000 values (30 KB rewritten, and
// kept as a new MVCC version, by every append), and the cluster's commits
// per minute fell from 31,000 to 12,000 over the run: the harness
// measured its own lists, not the database. Jepsen's list-append rotates
// keys the same way.
type ListAppend struct {
	Keys, Clients int
	Level         elle.Level
	// MaxAppends is how many appends a key takes before it leaves play
	// (0: defaultMaxAppends).
	MaxAppends int

	table string
	mu    sync.Mutex
	h     []elle.Txn
	next  atomic.Int64

	// keys are the keys in play and appends the appends each has been
	// given; nextKey is the next key never in play. Under keyMu.
	keyMu   sync.Mutex
	keys    []int
	appends map[int]int
	nextKey int
}

// defaultMaxAppends keeps a list under about 2 KB.
const defaultMaxAppends = 256

// initKeys puts keys 0 to Keys-1 in play.
func (l *ListAppend) initKeys() {
	l.keys, l.appends, l.nextKey = make([]int, l.Keys), map[int]int{}, l.Keys
	for i := range l.keys {
		l.keys[i] = i
	}
}

// pick returns a key in play for a read, or for an append (counted, and
// rotating the key out once it has had MaxAppends).
func (l *ListAppend) pick(rng *rand.Rand, appending bool) int {
	l.keyMu.Lock()
	defer l.keyMu.Unlock()
	i := rng.IntN(len(l.keys))
	k := l.keys[i]
	if appending {
		l.appends[k]++
		max := l.MaxAppends
		if max == 0 {
			max = defaultMaxAppends
		}
		if l.appends[k] >= max {
			l.keys[i] = l.nextKey
			l.nextKey++
		}
	}
	return k
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
	l.initKeys()
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
					if rng.IntN(2) == 0 {
						tx.Mops = append(tx.Mops, elle.Mop{Key: strconv.Itoa(l.pick(rng, false))})
					} else {
						tx.Mops = append(tx.Mops, elle.Mop{Append: true, Key: strconv.Itoa(l.pick(rng, true)), Value: int(l.next.Add(1))})
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
							if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %[1]s VALUES ($2, $1) ON CONFLICT (k) DO UPDATE SET v = %[1]s.v || excluded.v", l.table), ","+strconv.Itoa(m.Value), k); err != nil {
								return err
							}
							continue
						}
						// A key never appended to has no row: its list is empty.
						var v string
						if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT v FROM %s WHERE k = $1", l.table), k).Scan(&v); err != nil && !errors.Is(err, pgx.ErrNoRows) {
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
	l.keyMu.Lock()
	used := l.nextKey
	l.keyMu.Unlock()
	return fmt.Sprintf("%s: %d transactions ok, %d failed, %d unknown, %d appends over %d keys%s",
		l.Name(), counts[elle.OK], counts[elle.Fail], counts[elle.Unknown], l.next.Load(), used, allowed), anomalies
}
