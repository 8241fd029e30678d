package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// cpuLimit is a cgroup holding one node process under a CPU quota.
type cpuLimit struct{ dir string }

// limitCPU puts pid into a new cgroup named name whose CPU quota is cpus
// cores: cgroup v2's cpu.max where the unified hierarchy is mounted, else
// v1's cpu controller (cfs_quota_us over a 100 ms period). It needs root;
// the error says so rather than running unlimited.
func limitCPU(name string, pid int, cpus float64) (*cpuLimit, error) {
	const period = 100000
	quota := int(cpus * period)
	if quota < 1000 {
		return nil, fmt.Errorf("-node-cpu %v: below the 1%% a quota can express", cpus)
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir := filepath.Join("/sys/fs/cgroup", name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cgroup v2 %s: %w", dir, err)
		}
		l := &cpuLimit{dir: dir}
		if err := write(dir, "cpu.max", fmt.Sprintf("%d %d", quota, period)); err != nil {
			l.remove()
			return nil, err
		}
		return l, l.add(pid)
	}
	dir := filepath.Join("/sys/fs/cgroup/cpu", name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v1 %s (needs root and the cpu controller): %w", dir, err)
	}
	l := &cpuLimit{dir: dir}
	if err := write(dir, "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
		l.remove()
		return nil, err
	}
	if err := write(dir, "cpu.cfs_quota_us", strconv.Itoa(quota)); err != nil {
		l.remove()
		return nil, err
	}
	return l, l.add(pid)
}

// add moves every thread of pid into the group (cgroup.procs moves the
// whole process, its later threads included).
func (l *cpuLimit) add(pid int) error {
	return write(l.dir, "cgroup.procs", strconv.Itoa(pid))
}

// remove deletes the group; its processes must have exited (a group with
// members cannot be removed, and is left for the next run to reuse).
func (l *cpuLimit) remove() { _ = os.Remove(l.dir) }

func write(dir, file, v string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
		return fmt.Errorf("cgroup %s/%s = %s: %w", dir, file, v, err)
	}
	return nil
}

// cpuText prints -node-cpu for the run's header.
func cpuText() string {
	if *flagNodeCPU <= 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(*flagNodeCPU, 'f', -1, 64)
}
