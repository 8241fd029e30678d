// Package chaos runs workloads against a cluster of real `cairn start`
// processes on loopback while nemeses break it, and checks the histories
// the workloads record for anomalies.
//
// The cluster (cluster.go) is N processes started through test/proc,
// joined with --join and started with --debug-fault-injection, which
// serves /debug/faults (server/debug_faults.go): the harness partitions
// real processes through each node's in-process fault injector
// (rpc.Faults), skews a node's clock (the HLC's test offset), moves leases
// and splits tablets there, and slows or stalls its disk (storage/simfs
// under the node's Pebble). The nemeses (nemesis.go) are SIGKILL and
// restart, SIGSTOP and SIGCONT, partitions, clock offsets, lease
// transfers, splits, a slow disk, a stalled disk (the node must fence
// itself: it exits after --disk-stall-fence, and is restarted), and
// membership changes (a node added, one decommissioned), on a schedule
// drawn from the run's seed.
//
// The workloads and what their checkers must find true:
//
//  1. bank (bank.go): the sum of the balances is what it started as; every
//     account's balance is its initial balance plus the amounts of the
//     transfers to it in the transfer log, minus those from it (so no
//     transaction applied in part); every acknowledged transfer is in the
//     log, no transfer the database refused is; a transfer whose COMMIT
//     was lost in flight (ambiguous) may be either. Read through every
//     node.
//  2. list-append (listappend.go, checked by package elle): no G0, G1a,
//     G1b, G1c at any level; at SERIALIZABLE no G-single and no G2-item;
//     at REPEATABLE READ (snapshot isolation) no G-single; no lost,
//     duplicated or aborted-read append; every read's list is a prefix of
//     the key's final list (read through every node).
//  3. registers (register.go): the reads and writes of single registers,
//     through every node, are linearizable (porcupine).
//  4. sets (set.go): every acknowledged insert is present exactly once,
//     no refused insert is present, through every node.
//  5. monotonic reads (register.go): within one session a register's
//     version never goes backwards.
//  6. availability (history.go): the longest window with no commit
//     anywhere in the cluster is printed with its distribution; under
//     single-node kills it stays under AvailabilityTarget. Each of the
//     longest windows is explained by the failures the clients met in it
//     and by the operations longer than SlowOp that overlapped it (which
//     client, through which node, from when to when, how it ended): a
//     window with no commit is one in which every client is held.
//  7. memory (memory.go): each node's resident memory is sampled every
//     second; the peak per node is printed, and a peak past MaxRSS
//     (2 GiB; CHAOS_MAX_RSS_MIB) is an anomaly. Nodes run with
//     --max-memory NodeMemory (1.5 GiB), their share of the machine. A node that exits by a
//     SIGKILL the harness did not send is reported as such (the
//     kernel's OOM killer sends one and the node logs nothing).
//
// Every run prints its seed (-chaos.seed replays it: the same nemesis
// schedule and the same workload choices; the timings of real processes
// still differ). `go test ./test/chaos/` runs the CI subset (a few minutes);
// `make chaos` runs TestChaosLong, every nemesis mixed, for -chaos.long
// (CHAOS_DURATION, 30m by default there).
//
// The package touches nothing of Cairn's but through its processes: SQL
// over pgwire and the HTTP endpoints, and the kernel's account of each
// process (/proc/PID/status, for check 7).
package chaos
