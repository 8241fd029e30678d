package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// Workload is one workload: Setup makes its tables, Run drives clients
// until ctx ends (recording every commit in commits), and Check reads the
// database through every live node and returns a summary and the
// anomalies it found.
type Workload interface {
	Name() string
	Setup(ctx context.Context, c *Cluster) error
	Run(ctx context.Context, c *Cluster, seed uint64, commits *Commits)
	Check(ctx context.Context, c *Cluster) (summary string, anomalies []string)
}

// Config is one chaos run.
type Config struct {
	Bin, Dir string
	Nodes    int
	Seed     uint64
	Duration time.Duration
	// Nemeses are the kinds drawn, one every Interval, each lasting Dur
	// (kills: the restart comes Dur later).
	Nemeses       []string
	Interval, Dur time.Duration
	Workloads     []Workload
	// Flags are extra flags for every node.
	Flags []string
	Logf  func(format string, args ...any)
}

// Result is what a run found.
type Result struct {
	Seed         uint64
	Faults       []Fault
	Availability Availability
	Summaries    []string
	Anomalies    []string
	// PeakRSS is each node's largest resident memory sampled (memory.go).
	PeakRSS []int64
	Logs    string
}

// Run starts the cluster, runs the workloads under the nemesis for
// cfg.Duration, brings every node back and checks.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	logf := cfg.Logf
	res := &Result{Seed: cfg.Seed}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e656d))
	if len(cfg.Nemeses) > 0 {
		res.Faults = Schedule(rng, cfg.Nemeses, cfg.Interval, cfg.Dur, cfg.Duration)
	}
	c, err := StartCluster(ctx, cfg.Bin, cfg.Dir, cfg.Nodes, logf, cfg.Flags...)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	mem := WatchMemory(c)
	defer mem.Stop()
	for _, w := range cfg.Workloads {
		if err := w.Setup(ctx, c); err != nil {
			res.Logs = c.Logs(4000)
			return res, fmt.Errorf("%s setup: %w", w.Name(), err)
		}
	}
	logf("seed %d: %d nodes, %s, nemeses %v every %s for %s", cfg.Seed, cfg.Nodes, cfg.Duration, cfg.Nemeses, cfg.Interval, cfg.Dur)
	var commits Commits
	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for k, w := range cfg.Workloads {
		wg.Go(func() { w.Run(rctx, c, cfg.Seed+uint64(k)*1000, &commits) })
	}
	res.Anomalies = append(res.Anomalies, RunNemesis(rctx, c, start, res.Faults, logf)...)
	<-rctx.Done()
	end := time.Now()
	wg.Wait()
	res.Availability = commits.Windows(start, end)
	res.Availability.Charge(start, res.Faults)
	// Every node back, whole, before the checks.
	for _, i := range c.Live() {
		if c.Fenced(i) {
			_ = c.RestartExited(i)
		}
		if !c.Node(i).Running() {
			if err := c.Restart(i); err != nil {
				return res, err
			}
		}
		_ = c.Resume(i)
		_ = c.ClockOffset(i, 0)
		_ = c.Disk(i, 0, false)
	}
	if err := c.Heal(60 * time.Second); err != nil {
		logf("heal: %v", err)
	}
	for _, i := range c.Live() {
		if c.Node(i).Exited() {
			st := c.Node(i).ExitState()
			if st == "signal: killed" {
				// Not the harness's SIGKILL (Kill reaps and forgets the
				// process): the kernel's OOM killer sends it too.
				st += ", not by the harness: the kernel's OOM killer? (dmesg)"
			}
			res.Anomalies = append(res.Anomalies, fmt.Sprintf("node %d exited by itself (%s)", i+1, st))
		}
	}
	for _, w := range cfg.Workloads {
		s, a := w.Check(ctx, c)
		res.Summaries = append(res.Summaries, s)
		res.Anomalies = append(res.Anomalies, a...)
	}
	mem.Stop()
	res.Summaries = append(res.Summaries, mem.Summary())
	res.Anomalies = append(res.Anomalies, mem.Anomalies(maxRSS())...)
	for i := 0; i < c.Len(); i++ {
		res.PeakRSS = append(res.PeakRSS, mem.Peak(i))
	}
	if len(res.Anomalies) > 0 {
		res.Logs = c.Logs(6000)
	}
	// CHAOS_ARTIFACTS keeps the logs of a run with anomalies, or of a
	// run whose longest window without a commit missed the target (for
	// its post-mortem), or of every run with CHAOS_KEEP_LOGS set.
	if len(res.Anomalies) > 0 || res.Availability.Max > AvailabilityTarget || os.Getenv("CHAOS_KEEP_LOGS") != "" {
		if dir := os.Getenv("CHAOS_ARTIFACTS"); dir != "" {
			// The whole logs, for a post-mortem beyond their tails.
			for i := 0; i < c.Len(); i++ {
				b, _ := os.ReadFile(c.Node(i).Dir + ".log")
				_ = os.WriteFile(fmt.Sprintf("%s/seed-%d-n%d.log", dir, cfg.Seed, i+1), b, 0o644)
			}
		}
	}
	return res, nil
}

// envDuration reads a duration from the environment (def when unset).
func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}
