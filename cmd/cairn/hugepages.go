package main

import (
	"os"
	"strings"
	"syscall"
)

// Transparent huge pages for the C heap (issue 22). Pebble allocates each
// memtable's arena (64 MiB) and its block cache's blocks with C's malloc,
// and a point read's seek down the memtable's skiplist touches a node on
// another 4 KiB page at every step: under pgbench -S the seek was 15–18%
// of the node's CPU, most of it waiting on memory, a TLB miss at each
// step (a walk of two page tables on a virtual machine). With the kernel's
// THP mode "madvise" (Debian's and most distributions' default) nothing
// backs malloc's memory with huge pages unless malloc asks, and glibc asks
// only when its tunable glibc.malloc.hugetlb=1 was in the environment when
// the process started: the tunables are read before any of the program's
// code runs. So `cairn start` and `cairn demo` run themselves again, once,
// with it set (bench/README.md, "Issue 22, eleventh session").
//
// What it does not change: the process ID (exec(2) keeps it), the
// arguments, the rest of the environment. Where it does nothing: another
// THP mode ("always" backs the arena already; "never" cannot), a C library
// other than glibc (the tunable is ignored), or CAIRN_MALLOC_HUGEPAGES set
// to anything (off: the operator's choice; on: this process was already
// run again, which also stops a loop should the C library drop
// GLIBC_TUNABLES from the environment, as it does for set-user-ID
// programs).

// hugePagesEnv is the variable that turns the re-execution off and marks
// a process that was run again.
const hugePagesEnv = "CAIRN_MALLOC_HUGEPAGES"

// hugePagesTunable is glibc's tunable asking malloc for madvise(2)'s
// MADV_HUGEPAGE on the memory it maps.
const hugePagesTunable = "glibc.malloc.hugetlb=1"

// thpModeFile holds the kernel's THP mode, the chosen one in brackets.
const thpModeFile = "/sys/kernel/mm/transparent_hugepage/enabled"

// mallocHugePages runs the process again with hugePagesTunable in
// GLIBC_TUNABLES when args (os.Args) start a node and the kernel backs
// with huge pages only the memory that asks (see above). It returns
// without doing anything when it should not, or when exec fails: the node
// then runs as it would have.
func mallocHugePages(args []string) {
	env, ok := hugePagesExecEnv(args, os.Environ(), readTHPMode())
	if !ok {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, args, env)
}

// hugePagesExecEnv returns the environment to run args again with, and
// whether to, given the environment environ and the kernel's THP mode.
func hugePagesExecEnv(args, environ []string, thpMode string) ([]string, bool) {
	if len(args) < 2 || (args[1] != "start" && args[1] != "demo") || thpMode != "madvise" {
		return nil, false
	}
	tunables, tunablesAt := "", -1
	for i, kv := range environ {
		if strings.HasPrefix(kv, hugePagesEnv+"=") {
			return nil, false
		}
		if v, ok := strings.CutPrefix(kv, "GLIBC_TUNABLES="); ok {
			tunables, tunablesAt = v, i
		}
	}
	if strings.Contains(tunables, "glibc.malloc.hugetlb=") {
		// The operator chose a value.
		return nil, false
	}
	if tunables != "" {
		tunables += ":"
	}
	env := make([]string, 0, len(environ)+2)
	for i, kv := range environ {
		if i != tunablesAt {
			env = append(env, kv)
		}
	}
	return append(env, "GLIBC_TUNABLES="+tunables+hugePagesTunable, hugePagesEnv+"=on"), true
}

// readTHPMode returns the kernel's THP mode (always, madvise or never),
// or "" when it cannot tell.
func readTHPMode() string {
	b, err := os.ReadFile(thpModeFile)
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}
