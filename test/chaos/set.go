package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Set is the set workload (invariant 4): Clients clients insert unique
// values into a table without a primary key (so a write applied twice
// would show), in autocommit, through the nodes in turn.
type Set struct {
	Clients int

	mu  sync.Mutex
	ops map[int]Outcome
}

// Name implements Workload.
func (s *Set) Name() string { return "set" }

// Setup implements Workload.
func (s *Set) Setup(ctx context.Context, c *Cluster) error {
	s.ops = map[int]Outcome{}
	return execAll(ctx, c, 0, "CREATE TABLE sets (v INT NOT NULL)")
}

// Run implements Workload.
func (s *Set) Run(ctx context.Context, c *Cluster, seed uint64, commits *Commits) {
	var wg sync.WaitGroup
	for cl := range s.Clients {
		wg.Go(func() {
			ss := newSession(c, cl)
			defer ss.close()
			for k := 0; ctx.Err() == nil; k++ {
				v := cl*10_000_000 + k
				conn, node := ss.next(ctx)
				if conn == nil {
					continue
				}
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				began := time.Now()
				_, err := conn.Exec(tctx, "INSERT INTO sets VALUES ($1)", v)
				cancel()
				commits.Took(fmt.Sprintf("sets/%d", cl), node, began, err)
				out := Classify(err, true)
				ss.after(err, out)
				if out == OK {
					commits.Add()
				} else {
					commits.Fail(node, err)
				}
				s.mu.Lock()
				s.ops[v] = out
				s.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// Check implements Workload.
func (s *Set) Check(ctx context.Context, c *Cluster) (string, []string) {
	var anomalies []string
	counts := map[Outcome]int{}
	for _, o := range s.ops {
		counts[o]++
	}
	for _, i := range c.Live() {
		got := map[int]int{}
		err := retry(ctx, 60*time.Second, func() error {
			conn, err := c.ConnectWait(ctx, i, 30*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			rows, err := conn.Query(ctx, "SELECT v FROM sets")
			if err != nil {
				return err
			}
			got = map[int]int{}
			for rows.Next() {
				var v int
				if err := rows.Scan(&v); err != nil {
					return err
				}
				got[v]++
			}
			return rows.Err()
		})
		if err != nil {
			anomalies = append(anomalies, fmt.Sprintf("set: node %d: cannot read: %v", i+1, err))
			continue
		}
		for v, n := range got {
			o, ok := s.ops[v]
			switch {
			case !ok:
				anomalies = append(anomalies, fmt.Sprintf("set: node %d: %d present, never inserted", i+1, v))
			case n > 1:
				anomalies = append(anomalies, fmt.Sprintf("set: node %d: %d present %d times", i+1, v, n))
			case o == Fail:
				anomalies = append(anomalies, fmt.Sprintf("set: node %d: %d present, its insert failed", i+1, v))
			}
		}
		for v, o := range s.ops {
			if o == OK && got[v] == 0 {
				anomalies = append(anomalies, fmt.Sprintf("set: node %d: acknowledged insert of %d is missing", i+1, v))
			}
		}
	}
	return fmt.Sprintf("set: %d inserts acknowledged, %d failed, %d unknown", counts[OK], counts[Fail], counts[Unknown]), anomalies
}
