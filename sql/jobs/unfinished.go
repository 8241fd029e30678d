package jobs

import (
	"context"
	"sync"
	"time"
)

// Unfinished lists the jobs that may still be running, for a caller that
// asks again and again: every node looks for orphaned jobs every few
// seconds (server, ddl.ResumeOrphanedIndexBuilds and the rebalances).
// Listing every job for that read and decoded every record ever written,
// one per CREATE INDEX: with 5,000 tables it was most of an idle node's
// CPU (issue 16, bench/README.md, bench/ddl).
//
// Jobs are numbered in creation order, and a final status is final (no
// write makes a succeeded, failed or canceled record running again), so
// an Unfinished remembers the first job that was not final when it last
// listed and reads from there on. Two cases keep a running record below
// that mark from being missed:
//
//  1. An ID is allocated before its record is written, so a missing ID
//     below a later record may be a job being created: the mark does not
//     pass a missing ID until a later record is GapWait old (a create
//     that has not written its record by then failed).
//  2. Every FullEvery the list starts again from the first job, which
//     bounds how long anything written against these rules (an owner that
//     wakes from a long pause and heartbeats a job another node has
//     finished) goes unseen.
//
// Safe for concurrent use.
type Unfinished struct {
	mu     sync.Mutex
	from   int64     // no record below this ID is running
	fullAt time.Time // when the list last started from the first job
	read   int64     // records read so far (tests count them)
}

// GapWait and FullEvery are Unfinished's bounds (see there); variables so
// that tests can shorten them.
var (
	GapWait   = time.Minute
	FullEvery = 10 * time.Minute
)

// List returns, oldest first, the records from the mark on: every job
// that may be running (and finished ones among them, which the caller
// skips as it would in List's answer).
func (u *Unfinished) List(ctx context.Context, rd Reader) ([]Record, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	if now.Sub(u.fullAt) >= FullEvery {
		u.from, u.fullAt = 0, now
	}
	recs, err := listFrom(ctx, rd, u.from)
	if err != nil {
		return nil, err
	}
	u.read += int64(len(recs))
	next := max(u.from, 1) // IDs start at 1 (the counter's first increment)
	for _, r := range recs {
		if r.ID > next && now.Sub(r.Created) < GapWait {
			break // IDs next .. r.ID-1 may still be written (1)
		}
		if r.Status == StatusRunning {
			next = r.ID
			break
		}
		next = r.ID + 1
	}
	u.from = next
	return recs, nil
}
