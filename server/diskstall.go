package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// stallJudge decides, from the disk-health watcher's reports (one per
// tick for each store operation in flight past the threshold), when a
// disk has stalled for longer than the fence.
//
// One report is not enough: the watcher measures an operation's age on
// the monotonic clock, which runs on while the whole process is stopped
// (SIGSTOP, a frozen VM, a host that does not schedule it). Woken, the
// watcher's first tick finds every operation that was in flight as old as
// the pause and, fencing on that alone, a node stopped for 4 s fenced
// itself on waking with a 2 s fence: seven times in a 30-minute chaos run.
// An operation the disk itself holds up is still in flight at the next
// tick, a tick later in the process's own time; one the pause held up has
// finished by then. So the judge fences on an operation past the fence
// that an earlier tick had already reported.
type stallJudge struct {
	fence time.Duration
	now   func() time.Time

	mu sync.Mutex
	// seen are the slow operations reported, by file and kind, with the
	// estimated start of each and when it was last reported.
	seen map[stallKey]stallSeen
}

type stallKey struct {
	path string
	op   vfs.OpType
}

type stallSeen struct {
	start, last time.Time
}

// sameOp is how far apart two estimates of one operation's start may
// be: each is a report's time minus the age it gives.
const sameOp = 500 * time.Millisecond

func newStallJudge(fence time.Duration, now func() time.Time) *stallJudge {
	if now == nil {
		now = time.Now
	}
	return &stallJudge{fence: fence, now: now, seen: map[stallKey]stallSeen{}}
}

// report takes one report and says whether the node must fence itself.
func (j *stallJudge) report(info vfs.DiskSlowInfo) bool {
	now := j.now()
	start := now.Add(-info.Duration)
	k := stallKey{info.Path, info.OpType}
	j.mu.Lock()
	defer j.mu.Unlock()
	// Forget operations no longer reported (they finished).
	for key, s := range j.seen {
		if now.Sub(s.last) > 10*time.Second {
			delete(j.seen, key)
		}
	}
	prev, ok := j.seen[k]
	same := ok && prev.start.Sub(start).Abs() <= sameOp && now.Sub(prev.last) >= sameOp
	if !ok || !same && prev.start.Sub(start).Abs() > sameOp {
		prev = stallSeen{start: start}
	}
	prev.last = now
	j.seen[k] = prev
	return same && info.Duration >= j.fence
}

// diskProbeEvery is how often a node whose store is watched for stalls
// probes its disk (storage.Engine.ProbeDisk): a write and a sync of a
// few bytes. The watcher times only writes, so a node that only reads
// (restarted onto a disk that then stopped answering, its SSTs cold)
// was never fenced; with a probe each second, a stall is reported like a
// stuck write of the store's within the threshold of a second, and the
// judge fences on it after the fence.
const diskProbeEvery = time.Second

// startDiskProbe probes the store's disk every diskProbeEvery until ctx
// ends. A probe stuck on a stalled disk is not waited for: the next
// tick finds it in flight and skips, and the fence ends the process.
func (s *Server) startDiskProbe(ctx context.Context) {
	var inFlight atomic.Bool
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(diskProbeEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !inFlight.CompareAndSwap(false, true) {
				continue
			}
			go func() {
				defer inFlight.Store(false)
				if err := s.eng.ProbeDisk(); err != nil && ctx.Err() == nil {
					s.log.Warn("cairn: probing the store's disk", "err", err)
				}
			}()
		}
	}()
}
