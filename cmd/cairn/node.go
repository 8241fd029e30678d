package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/server"
)

// cmdNode is `cairn node status|decommission`, a client of a node's HTTP
// API (/api/nodes; server/nodes.go).
func cmdNode(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("node needs a subcommand: status or decommission")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("node "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "", "HTTP address of any node (its --http-addr)")
	url := fs.String("url", "", "base URL of any node's HTTP API (http://HOST:PORT); instead of --host")
	wait := fs.Duration("wait", 10*time.Minute, "decommission: how long to wait for the replicas to move")
	// The node ID of decommission may come before the flags.
	var target string
	if sub == "decommission" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		target, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if target == "" && fs.NArg() > 0 {
		target = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	base := strings.TrimSuffix(*url, "/")
	switch {
	case base != "" && *host != "":
		return usagef("give --host or --url, not both")
	case *host != "":
		base = "http://" + *host
	case base == "":
		return usagef("--host or --url is required")
	}
	c := &http.Client{Timeout: 30 * time.Second}
	switch sub {
	case "status":
		if target != "" {
			return usagef("unexpected arguments: %s", target)
		}
		nodes, err := getNodes(c, base)
		if err != nil {
			return err
		}
		printNodes(stdout, nodes)
		return nil
	case "decommission":
		id, err := strconv.ParseUint(target, 10, 64)
		if err != nil || id == 0 {
			return usagef("decommission needs a node ID, not %q", target)
		}
		return decommission(c, base, id, *wait, stdout)
	}
	return usagef("unknown node subcommand %q: want status or decommission", sub)
}

func getNodes(c *http.Client, base string) ([]server.NodeInfo, error) {
	resp, err := c.Get(base + "/api/nodes")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /api/nodes: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var nodes []server.NodeInfo
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return nil, fmt.Errorf("GET /api/nodes: %w", err)
	}
	return nodes, nil
}

func printNodes(w io.Writer, nodes []server.NodeInfo) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "id\trpc address\tsql address\tlocality\tliveness\treplicas\tleaders")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\n", n.NodeID, n.RPCAddr, n.SQLAddr, n.Locality, n.Liveness, n.Replicas, n.Leaders)
	}
	tw.Flush()
}

func post(c *http.Client, url string) error {
	resp, err := c.Post(url, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// decommission marks node id decommissioning, waits until no tablet's
// leader counts a replica on it (twice in a row, a heartbeat apart), then
// marks it decommissioned.
func decommission(c *http.Client, base string, id uint64, wait time.Duration, out io.Writer) error {
	url := fmt.Sprintf("%s/api/nodes/%d/decommission", base, id)
	if err := post(c, url); err != nil {
		return fmt.Errorf("decommissioning node %d: %w", id, err)
	}
	fmt.Fprintf(out, "node %d is decommissioning; moving its replicas\n", id)
	deadline := time.Now().Add(wait)
	zero := 0
	last := -1
	for zero < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d still holds %d replicas after %s", id, last, wait)
		}
		time.Sleep(time.Second)
		nodes, err := getNodes(c, base)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if uint64(n.NodeID) == id {
				if n.Replicas != last {
					fmt.Fprintf(out, "node %d: %d replicas\n", id, n.Replicas)
				}
				last = n.Replicas
			}
		}
		if last == 0 {
			zero++
		} else {
			zero = 0
		}
	}
	if err := post(c, url+"?done=1"); err != nil {
		return fmt.Errorf("marking node %d decommissioned: %w", id, err)
	}
	fmt.Fprintf(out, "node %d is decommissioned\n", id)
	return nil
}
