package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/security"
	"github.com/cairn-db/cairn/server"
)

// cmdNode is `cairn node status|decommission`, a client of a node's HTTP
// API (/api/nodes; server/nodes.go). A secure node wants a SQL role's
// password (server/admin_auth.go): --user, and the password from
// --password-file or the environment (CAIRN_PASSWORD, else PGPASSWORD),
// never a prompt, so scripts can run it. status needs any role that can
// log in, decommission a superuser.
// nodeFlags are node status's and node decommission's flags.
type nodeFlags struct {
	host, url, certsDir, user, pwFile string
	wait                              time.Duration
}

func nodeFlagSet(sub string, f *nodeFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("node "+sub, flag.ContinueOnError)
	fs.StringVar(&f.host, "host", "", "HTTP address of any node (its --http-addr)")
	fs.StringVar(&f.url, "url", "", "base URL of any node's HTTP API (http://HOST:PORT or https://...); instead of --host")
	fs.StringVar(&f.certsDir, "certs-dir", "", "certificates directory whose ca.crt verifies a secure node's HTTPS (with it --host means https://)")
	fs.DurationVar(&f.wait, "wait", 10*time.Minute, "decommission: how long to wait for the replicas to move")
	fs.StringVar(&f.user, "user", "postgres", "SQL role to log in as (a secure node; decommission needs a superuser)")
	fs.StringVar(&f.pwFile, "password-file", "", "file holding the role's password (else $CAIRN_PASSWORD, else $PGPASSWORD)")
	return fs
}

func cmdNode(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("node needs a subcommand: status or decommission")
	}
	sub, args := args[0], args[1:]
	var nf nodeFlags
	fs := nodeFlagSet(sub, &nf)
	fs.SetOutput(stderr)
	host, url, certsDir, wait, user, pwFile := &nf.host, &nf.url, &nf.certsDir, &nf.wait, &nf.user, &nf.pwFile
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
	case *host != "" && *certsDir != "":
		base = "https://" + *host
	case *host != "":
		base = "http://" + *host
	case base == "":
		return usagef("--host or --url is required")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if *certsDir != "" {
		pem, err := os.ReadFile(filepath.Join(*certsDir, security.CACertFile))
		if err != nil {
			return fmt.Errorf("reading the CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s holds no certificate", filepath.Join(*certsDir, security.CACertFile))
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	c := &apiClient{c: hc, base: base, user: *user}
	switch {
	case *pwFile != "":
		b, err := os.ReadFile(*pwFile)
		if err != nil {
			return fmt.Errorf("reading --password-file: %w", err)
		}
		c.password = strings.TrimRight(string(b), "\r\n")
	case os.Getenv("CAIRN_PASSWORD") != "":
		c.password = os.Getenv("CAIRN_PASSWORD")
	default:
		c.password = os.Getenv("PGPASSWORD")
	}
	switch sub {
	case "status":
		if target != "" {
			return usagef("unexpected arguments: %s", target)
		}
		nodes, err := c.nodes()
		if err != nil {
			return err
		}
		v, err := c.version()
		if err != nil {
			return err
		}
		printVersion(stdout, v)
		printNodes(stdout, nodes)
		return nil
	case "decommission":
		id, err := strconv.ParseUint(target, 10, 64)
		if err != nil || id == 0 {
			return usagef("decommission needs a node ID, not %q", target)
		}
		return decommission(c, id, *wait, stdout)
	}
	return usagef("unknown node subcommand %q: want status or decommission", sub)
}

// apiClient calls a node's HTTP API, with HTTP Basic credentials when it
// has a password.
type apiClient struct {
	c              *http.Client
	base           string
	user, password string
}

// call sends method path and returns the body of a 200; any other status
// is an error that says what to do about a 401 or a 403.
func (a *apiClient) call(method, path string) ([]byte, error) {
	req, err := http.NewRequest(method, a.base+path, nil)
	if err != nil {
		return nil, err
	}
	if a.password != "" {
		req.SetBasicAuth(a.user, a.password)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return b, nil
	}
	msg := strings.TrimSpace(string(b))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized && a.password == "":
		return nil, fmt.Errorf("%s %s: the node requires a login (%s): give --user and the role's password in CAIRN_PASSWORD or --password-file", method, path, resp.Status)
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("%s %s: logging in as %q failed (%s): %s", method, path, a.user, resp.Status, msg)
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%s %s: role %q is not allowed to (%s): %s", method, path, a.user, resp.Status, msg)
	}
	return nil, &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, msg)}
}

// statusError is call's error for a status it has no advice for.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func (a *apiClient) nodes() ([]server.NodeInfo, error) {
	b, err := a.call(http.MethodGet, "/api/nodes")
	if err != nil {
		return nil, err
	}
	var nodes []server.NodeInfo
	if err := json.Unmarshal(b, &nodes); err != nil {
		return nil, fmt.Errorf("GET /api/nodes: %w", err)
	}
	return nodes, nil
}

// version reads the answering node's versions (GET /api/version). A
// node whose build predates the endpoint answers 404: nil, no error, so
// status still lists the nodes in the middle of a rolling upgrade.
func (a *apiClient) version() (*server.VersionInfo, error) {
	b, err := a.call(http.MethodGet, "/api/version")
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusNotFound {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var v server.VersionInfo
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("GET /api/version: %w", err)
	}
	return &v, nil
}

// printVersion prints the cluster version above the node table (the
// binary of each node is a column of it).
func printVersion(w io.Writer, v *server.VersionInfo) {
	if v == nil {
		fmt.Fprintln(w, "cluster version: unknown (the node asked predates /api/version)")
		return
	}
	fmt.Fprintf(w, "cluster version: %s (as node %d knows it)\n", v.ClusterVersion, v.NodeID)
}

func printNodes(w io.Writer, nodes []server.NodeInfo) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	// The binary before the liveness: scripts read the last three
	// columns as liveness, replicas and leaders.
	fmt.Fprintln(tw, "id\trpc address\tsql address\tlocality\tstorage\tbinary\tliveness\treplicas\tleaders")
	for _, n := range nodes {
		profile := n.StoreProfile
		if profile == "" {
			profile = "-" // a node whose record predates storage profiles
		}
		binary := n.BinaryVersion
		if binary == "" {
			binary = "-" // a node whose build predates cluster versions
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n.NodeID, n.RPCAddr, n.SQLAddr, n.Locality, profile, binary, n.Liveness, n.Replicas, n.Leaders)
	}
	tw.Flush()
}

// decommission marks node id decommissioning, waits until no tablet's
// leader counts a replica on it (twice in a row, a heartbeat apart), then
// marks it decommissioned.
func decommission(c *apiClient, id uint64, wait time.Duration, out io.Writer) error {
	path := fmt.Sprintf("/api/nodes/%d/decommission", id)
	if _, err := c.call(http.MethodPost, path); err != nil {
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
		nodes, err := c.nodes()
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
	if _, err := c.call(http.MethodPost, path+"?done=1"); err != nil {
		return fmt.Errorf("marking node %d decommissioned: %w", id, err)
	}
	fmt.Fprintf(out, "node %d is decommissioned\n", id)
	return nil
}
