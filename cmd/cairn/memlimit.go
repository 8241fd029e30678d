package main

import (
	"fmt"

	"github.com/cairn-db/cairn/storage"
)

// The node's memory target (--max-memory; docs/architecture.md, "Node
// memory"). A node's memory is the Go heap (raft messages and logs, the
// lock table, SQL operators under --max-sql-memory, connections) and C
// memory that Pebble allocates with malloc (the block cache, --cache-mib,
// and the memtables). Go's collector lets the heap grow to twice what is
// live (GOGC=100) before it collects: a node whose live heap rose for a
// while to a few GiB (issue 22, twelfth session: raft appends queued for
// followers) had twice that mapped, and the kernel killed it. With a soft
// limit (runtime/debug.SetMemoryLimit) the collector runs as often as it
// must to stay under it, and returns freed memory to the kernel at once.
// It bounds nothing that is live: the byte bounds on what the node holds
// do that (the transport's queues, raft's uncommitted entries and entry
// cache, the SQL budget). Above it the collector may take up to half of
// the CPU (the runtime's cap) instead of letting the process grow.

// defaultMaxMemory is --max-memory's default: a node that has its machine
// to itself, with room left for the kernel's page cache.
const defaultMaxMemory = "75%"

// memtablesHeld is the C memory --max-memory reserves for memtables: the
// one being written and two waiting for a flush.
const memtablesHeld = 3 * storage.MemTableSize

// minGoMemory is the smallest Go limit --max-memory may leave.
const minGoMemory = 256 << 20

// goMemoryLimit returns the Go runtime's soft memory limit for
// --max-memory v (a size or a percentage of RAM), given whether the flag
// was on the command line, the GOMEMLIMIT environment variable and the
// block cache's size: v less the block cache and the memtables. It is 0
// (the runtime's own limit stays) when GOMEMLIMIT is set and the flag was
// not given: the operator chose a limit already.
func goMemoryLimit(v string, given bool, gomemlimit string, cacheBytes int64) (int64, error) {
	if gomemlimit != "" && !given {
		return 0, nil
	}
	total, err := parseMemoryFlag(v)
	if err != nil {
		return 0, err
	}
	limit := total - cacheBytes - memtablesHeld
	if limit < minGoMemory {
		return 0, fmt.Errorf("%s (%d MiB) leaves %d MiB for the Go heap after the block cache (%d MiB, --cache-mib) and memtables (%d MiB); want at least %d MiB",
			v, total>>20, limit>>20, cacheBytes>>20, memtablesHeld>>20, minGoMemory>>20)
	}
	return limit, nil
}

// maxDefaultRowCache is the row cache cairn start gives a node whose Go
// memory limit is at least 32 times as much.
const maxDefaultRowCache = 256 << 20

// defaultRowCache is the row cache (tablet.RowCache) of a node whose Go
// memory limit is goLimit: 256 MiB, or a 32nd of the limit when that is
// less. The cache's entries are live Go heap, and under GOGC=400 the
// collector lets the heap grow to five times what is live before it runs,
// so a full cache can stand for five times its size in resident memory: a
// 32nd keeps that near a sixth of the limit. 256 MiB holds most of
// pgbench's scale-10 accounts table (about 860,000 of its 1M rows;
// docs/architecture.md, "Node memory").
func defaultRowCache(goLimit int64) int64 {
	return min(maxDefaultRowCache, goLimit/32)
}
