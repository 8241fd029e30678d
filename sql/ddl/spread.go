package ddl

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// spreadLeaseTimeout bounds how long a DDL statement waits for the
// replicas and leases of the bucket tablets it split off to reach their
// nodes. It is best effort: past it the statement returns with the rest
// where they are, and the replicate queue and the lease balancer even
// the counts out later. Placing a bucket's replicas on five nodes takes
// up to two moves of three configuration changes each (add a learner,
// promote it, remove a voter), all buckets at once: 3.6 s for 10 buckets
// at a load average of 10 on two cores (server.TestBucketsPlacedAtCreation).
var spreadLeaseTimeout = 20 * time.Second

// spreadLeaseRetry is the pause between rounds of asking the tablets
// whose lease has not arrived yet (a split's new replicas are probed for
// a raft round or two before a transfer to them may start).
const spreadLeaseRetry = 20 * time.Millisecond

// spreadLeases places the tablet starting at starts[i] as the bucket at
// ordinal offset+i (kvpb.SpreadLeaseRequest with Place): its voters
// round-robin over the live nodes in node ID order, from the node at
// that place on, and its lease on that node (membership.Member.Place).
// So a new index's buckets put their write load on every node in equal
// shares from the first write, without waiting for the replicate queue
// and the periodic lease balancer (issue 16; CockroachDB leaves this to
// its load-based rebalancer, which needs load to be seen first). On as
// many nodes as the replication factor only the leases move. offset
// varies the starting node between indexes, so that many small indexes
// do not all put their first bucket on the same node.
//
// Best effort: errors and a lapsed spreadLeaseTimeout leave leases where
// they are and are not the statement's failure.
func (e *executor) spreadLeases(ctx context.Context, starts [][]byte, offset int) {
	if e.x.DB == nil || len(starts) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, spreadLeaseTimeout)
	defer cancel()
	pending := make([]int, len(starts))
	for i := range pending {
		pending[i] = i
	}
	sem := make(chan struct{}, maxParallelSplits)
	for len(pending) > 0 && ctx.Err() == nil {
		var (
			mu   sync.Mutex
			left []int
			wg   sync.WaitGroup
		)
		for _, i := range pending {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				ba := &kvpb.BatchRequest{}
				ba.Add(&kvpb.SpreadLeaseRequest{Key: starts[i], Ordinal: offset + i, Place: true})
				br, err := e.x.DB.Send(ctx, ba)
				if err == nil && len(br.Responses) == 1 {
					if r, ok := br.Responses[0].(*kvpb.SpreadLeaseResponse); ok && r.Done {
						return
					}
				}
				mu.Lock()
				left = append(left, i)
				mu.Unlock()
			})
		}
		wg.Wait()
		pending = left
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(spreadLeaseRetry):
			}
		}
	}
}
