package server

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// lockWaitMetrics sums the lock-wait counters of s's replicas.
func lockWaitMetrics(s *Server) (timeouts, canceled, waiting int64) {
	for _, d := range s.store.Tablets() {
		if r := s.store.Replica(d.TabletID); r != nil {
			m := r.Metrics()
			timeouts += m.LockTimeouts.Load()
			canceled += m.LockWaitsCanceled.Load()
			waiting += m.LockWaiting.Load()
		}
	}
	return
}

// TestLockWaitEndsAcrossNodes: the row's lease is on node 1 and the
// waiting statement's gateway is node 2, so the wait happens in node 1's
// tablet at the end of a gRPC call. statement_timeout (the deadline) and a
// CancelRequest (a cancel) must reach that wait and end it there, not just
// abandon it at the gateway; lock_timeout travels in the batch and fires
// in node 1's tablet. Node 1's replica counters show each.
func TestLockWaitEndsAcrossNodes(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "region=a")
	n2 := c.start([]string{c.addrs[1]}, "region=b")
	ctx := context.Background()
	admin := connect(t, n1)
	defer admin.Close(ctx)
	mustExec(t, admin, "CREATE TABLE t (id int PRIMARY KEY, v int)", "INSERT INTO t VALUES (1, 0)",
		"ALTER TABLE t CONFIGURE ZONE USING lease_preferences = '[[+region=a]]'")
	waitFor(t, "t's lease on node 1", 60*time.Second, func() (bool, string) {
		var leader *int32
		err := admin.QueryRow(ctx, "SELECT leader FROM cairn_catalog.tablets WHERE table_name = 't'").Scan(&leader)
		return err == nil && leader != nil && *leader == 1, fmt.Sprint(leader, err)
	})
	holder := connect(t, n1)
	defer holder.Close(ctx)
	mustExec(t, holder, "BEGIN", "UPDATE t SET v = 100 WHERE id = 1")

	waitIdle := func(what string) {
		waitFor(t, what, 30*time.Second, func() (bool, string) {
			_, _, waiting := lockWaitMetrics(n1)
			return waiting == 0, fmt.Sprint(waiting, " waiting")
		})
	}
	for _, tc := range []struct {
		setting, code string
		counter       func() int64
	}{
		{"statement_timeout", "57014", func() int64 { _, n, _ := lockWaitMetrics(n1); return n }},
		{"lock_timeout", "55P03", func() int64 { n, _, _ := lockWaitMetrics(n1); return n }},
	} {
		before := tc.counter()
		w := connect(t, n2)
		mustExec(t, w, fmt.Sprintf("SET %s = '300ms'", tc.setting))
		_, err := w.Exec(ctx, "UPDATE t SET v = v + 1 WHERE id = 1")
		if code, _ := pgErr(err); code != tc.code {
			t.Fatalf("%s from node 2: %v, want %s", tc.setting, err, tc.code)
		}
		w.Close(ctx)
		waitIdle(tc.setting + ": node 1's wait ended")
		if after := tc.counter(); after <= before {
			t.Fatalf("%s: node 1's counter stayed at %d: the wait there did not end by it", tc.setting, after)
		}
	}

	// A CancelRequest to node 2 while the wait sits in node 1.
	_, canceledBefore, _ := lockWaitMetrics(n1)
	w := connect(t, n2)
	defer w.Close(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := w.Exec(ctx, "UPDATE t SET v = v + 1 WHERE id = 1")
		done <- err
	}()
	waitFor(t, "the waiter queued on node 1", 30*time.Second, func() (bool, string) {
		_, _, waiting := lockWaitMetrics(n1)
		return waiting == 1, fmt.Sprint(waiting, " waiting")
	})
	if err := w.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	if code, msg := pgErr(<-done); code != "57014" || msg != "canceling statement due to user request" {
		t.Fatalf("cancel from node 2: got %s %q", code, msg)
	}
	waitIdle("cancel: node 1's wait ended")
	if _, canceled, _ := lockWaitMetrics(n1); canceled <= canceledBefore {
		t.Fatalf("node 1's cancelled waits stayed at %d", canceled)
	}
	mustExec(t, holder, "COMMIT")
	var v int
	if err := admin.QueryRow(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != 100 {
		t.Fatalf("v = %d, %v; want the holder's 100", v, err)
	}
}
