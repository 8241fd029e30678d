package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/test/proc"
	"github.com/jackc/pgx/v5"
)

// Cluster is a cluster of cairn processes under test.
type Cluster struct {
	bin, dir string
	// join is the --join list of the initial members; an added node joins
	// through it too.
	join []string
	// extra are flags every node starts with.
	extra []string
	logf  func(format string, args ...any)

	mu sync.Mutex
	// Nodes are the members, by index (node ID index+1 for the initial
	// ones; an added node's ID is asked from it).
	Nodes []*proc.Node
	ids   []uint64
	// dead marks a node decommissioned: no nemesis or client touches it.
	dead []bool
}

// StartCluster starts n joined nodes and waits until each serves SQL.
func StartCluster(ctx context.Context, bin, dir string, n int, logf func(string, ...any), extra ...string) (*Cluster, error) {
	// A stalled disk fences its node after DiskStallFence (the stall
	// nemesis lasts longer).
	// Each node's memory target is its share of a shared machine
	// (memory.go, NodeMemory).
	c := &Cluster{bin: bin, dir: dir, logf: logf, extra: append([]string{"--debug-fault-injection", "--disk-stall-fence=" + DiskStallFence.String(),
		"--max-memory=" + NodeMemory}, extra...)}
	for i := range n {
		nd, err := proc.NewNode(filepath.Join(dir, fmt.Sprintf("n%d", i+1)))
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, nd)
		c.ids = append(c.ids, uint64(i+1))
		c.dead = append(c.dead, false)
		c.join = append(c.join, nd.RPC)
	}
	for _, nd := range c.Nodes {
		if err := nd.Start(bin, c.join, c.extra...); err != nil {
			return nil, err
		}
	}
	for i := range c.Nodes {
		if err := c.waitSQL(ctx, i, 90*time.Second); err != nil {
			// The logs are the only witness of why a node never served:
			// the cluster's directory is gone once the test ends.
			err = fmt.Errorf("%w\n%s", err, c.Logs(8000))
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// waitSQL waits until node i answers a query.
func (c *Cluster) waitSQL(ctx context.Context, i int, timeout time.Duration) error {
	conn, err := c.Nodes[i].Connect(ctx, timeout)
	if err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(timeout)
	for {
		var one int
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := conn.QueryRow(qctx, "SELECT 1").Scan(&one)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d never answered SELECT 1: %w", i+1, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, nd := range c.Nodes {
		nd.Kill()
	}
}

// Len is the number of nodes ever started (decommissioned ones included).
func (c *Cluster) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.Nodes)
}

// Node returns node i.
func (c *Cluster) Node(i int) *proc.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Nodes[i]
}

// Live returns the indexes of the nodes not decommissioned.
func (c *Cluster) Live() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i := range c.Nodes {
		if !c.dead[i] {
			out = append(out, i)
		}
	}
	return out
}

// Kill SIGKILLs node i.
func (c *Cluster) Kill(i int) { c.Node(i).Kill() }

// Restart starts node i again on its store.
func (c *Cluster) Restart(i int) error {
	return c.Node(i).Start(c.bin, c.join, c.extra...)
}

// Pause SIGSTOPs node i; Resume SIGCONTs it.
func (c *Cluster) Pause(i int) error  { return c.Node(i).Signal(syscall.SIGSTOP) }
func (c *Cluster) Resume(i int) error { return c.Node(i).Signal(syscall.SIGCONT) }

// debug posts to node i's /debug/faults route and decodes its answer.
func (c *Cluster) debug(i int, route string, q map[string]string) (map[string]any, error) {
	var args []string
	for k, v := range q {
		args = append(args, k+"="+v)
	}
	u := "http://" + c.Node(i).HTTP + "/debug/faults" + route
	if len(args) > 0 {
		u += "?" + strings.Join(args, "&")
	}
	method := http.MethodPost
	if route == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return nil, err
	}
	cl := &http.Client{Timeout: 15 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return out, nil
}

// ID returns node i's node ID.
func (c *Cluster) ID(i int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[i]
}

// Partition cuts the cluster in two: side against the other live nodes
// (each side's nodes cut off from every node of the other). It returns
// the first error; a node down misses its cut, which is harmless.
func (c *Cluster) Partition(side []int) error {
	in := map[int]bool{}
	for _, i := range side {
		in[i] = true
	}
	live := c.Live()
	var first error
	for _, i := range live {
		var cut []string
		for _, j := range live {
			if in[i] != in[j] {
				cut = append(cut, strconv.FormatUint(c.ID(j), 10))
			}
		}
		if _, err := c.debug(i, "/cut", map[string]string{"nodes": strings.Join(cut, ",")}); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Heal removes every cut, retrying a node that does not answer (down or
// paused) until timeout: a node left cut would stay partitioned.
func (c *Cluster) Heal(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, i := range c.Live() {
		for {
			_, err := c.debug(i, "/cut", map[string]string{"nodes": ""})
			if err == nil || !c.Node(i).Running() {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("healing node %d: %w", i+1, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// DiskStallFence is the nodes' --disk-stall-fence: above the 4 s a pause
// lasts (a node woken from one sees its pause as a slow sync; the server
// fences only on a second report, but a sync slow before the pause and
// still in flight after it would be reported twice), and leaving room for
// slow syncs of a disk all the nodes share.
const DiskStallFence = 5 * time.Second

// fenceMessage is what a node logs when it fences itself on a stalled
// disk (server.Start).
const fenceMessage = "the store's disk stalled; the node fences itself"

// Disk sets node i's disk latency (per read and sync) and stalls or
// unstalls it.
func (c *Cluster) Disk(i int, latency time.Duration, stall bool) error {
	_, err := c.debug(i, "/disk", map[string]string{"latency": latency.String(), "stall": strconv.FormatBool(stall)})
	return err
}

// Fenced reports whether node i's process exited by itself after logging
// that it fenced itself on a stalled disk: the exit the disk-stall
// nemesis expects, not a crash.
func (c *Cluster) Fenced(i int) bool {
	nd := c.Node(i)
	if !nd.Exited() {
		return false
	}
	b, err := os.ReadFile(nd.Dir + ".log")
	if err != nil {
		return false
	}
	// Only the last life of the node: the process has not been reaped
	// (Exited), so the last line proc wrote is its start.
	if k := strings.LastIndex(string(b), "=== "); k >= 0 {
		b = b[k:]
	}
	return strings.Contains(string(b), fenceMessage)
}

// RestartExited restarts node i if its process exited (Kill reaps it).
func (c *Cluster) RestartExited(i int) error {
	if !c.Node(i).Exited() {
		return nil
	}
	c.Kill(i)
	return c.Restart(i)
}

// ClockOffset skews node i's clock by d.
func (c *Cluster) ClockOffset(i int, d time.Duration) error {
	_, err := c.debug(i, "/clock-offset", map[string]string{"d": d.String()})
	return err
}

// TransferLeases asks node i to hand every lease it holds to node j.
func (c *Cluster) TransferLeases(i, j int) (map[string]any, error) {
	return c.debug(i, "/transfer-leases", map[string]string{"to": strconv.FormatUint(c.ID(j), 10)})
}

// Split asks node i to split the largest table tablet it leads.
func (c *Cluster) Split(i int) (map[string]any, error) { return c.debug(i, "/split", nil) }

// AddNode starts a new node joining the cluster and returns its index
// once it serves SQL.
func (c *Cluster) AddNode(ctx context.Context) (int, error) {
	c.mu.Lock()
	i := len(c.Nodes)
	c.mu.Unlock()
	nd, err := proc.NewNode(filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)))
	if err != nil {
		return 0, err
	}
	if err := nd.Start(c.bin, c.join, c.extra...); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, nd)
	c.ids = append(c.ids, 0)
	c.dead = append(c.dead, false)
	c.mu.Unlock()
	if err := c.waitSQL(ctx, i, 90*time.Second); err != nil {
		return i, err
	}
	out, err := c.debug(i, "", nil)
	if err != nil {
		return i, err
	}
	id, _ := out["node"].(float64)
	c.mu.Lock()
	c.ids[i] = uint64(id)
	c.mu.Unlock()
	return i, nil
}

// Decommission runs `cairn node decommission` for node i through node
// via, waiting until it holds no replica, then kills it. The node is then
// dead to the harness.
func (c *Cluster) Decommission(ctx context.Context, i, via int) error {
	c.mu.Lock()
	c.dead[i] = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := execCommand(ctx, c.bin, "node", "decommission", strconv.FormatUint(c.ID(i), 10), "--host", c.Node(via).HTTP)
	if err != nil {
		return fmt.Errorf("decommissioning node %d: %v: %s", c.ID(i), err, out)
	}
	c.Kill(i)
	return nil
}

// Connect opens a SQL connection to node i (one attempt, short timeout).
func (c *Cluster) Connect(ctx context.Context, i int) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return pgx.Connect(cctx, c.Node(i).URL())
}

// ConnectWait connects to node i, retrying until timeout.
func (c *Cluster) ConnectWait(ctx context.Context, i int, timeout time.Duration) (*pgx.Conn, error) {
	return c.Node(i).Connect(ctx, timeout)
}

// Logs returns the tail of every node's log.
func (c *Cluster) Logs(max int) string {
	var b strings.Builder
	for i := 0; i < c.Len(); i++ {
		fmt.Fprintf(&b, "--- node %d (%s):\n%s\n", i+1, c.Node(i).Dir, c.Node(i).LogTail(max))
	}
	return b.String()
}

// execCommand runs a command and returns its combined output.
func execCommand(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
