package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-db/cairn/security"
	"github.com/cairn-db/cairn/server"
)

// insecureWarning is what `cairn start --insecure` prints before anything
// else: each thing the node gives up, in terms of its own addresses.
func insecureWarning(cfg server.Config) string {
	lines := []string{
		"WARNING: RUNNING IN INSECURE MODE (--insecure)",
		"",
		fmt.Sprintf("- Any client that can reach %s logs in as any role, the superuser postgres", cfg.SQLAddr),
		"  included, without a password.",
		fmt.Sprintf("- Any process that can reach %s can join the cluster as a node, and read", cfg.RPCAddr),
		"  and write every table through it.",
		fmt.Sprintf("- The admin UI and API at %s, /debug/pprof included, ask nobody to log in.", cfg.HTTPAddr),
		"- Nothing is encrypted: SQL, HTTP and node-to-node traffic cross the network in clear.",
		"",
		"For a secure node: `cairn cert` and --certs-dir (docs/security.md).",
	}
	var b strings.Builder
	b.WriteString("*\n")
	for _, l := range lines {
		b.WriteString(strings.TrimRight("* "+l, " ") + "\n")
	}
	b.WriteString("*\n")
	return b.String()
}

// startBanner is what `cairn start` prints on stdout once the node serves:
// how to reach it, with a SQL URL that works as printed (the sslmode and
// certificate files a secure node wants), and what it is.
func startBanner(srv *server.Server, f startFlags) string {
	var b strings.Builder
	row := func(k, v string) { fmt.Fprintf(&b, "%-12s %s\n", k+":", v) }
	b.WriteString("CAIRN NODE STARTED\n")
	row("build", buildLine())
	row("sql", sqlURL(srv.Addr(), f))
	scheme := "http"
	if srv.Secure() {
		scheme = "https"
	}
	row("admin UI", scheme+"://"+dialable(srv.HTTPAddr())+"/")
	if a := srv.RPCAddr(); a != "" {
		row("rpc", a+" (other nodes join with --join "+a+")")
	}
	row("store", f.cfg.StoreDir)
	if srv.Secure() {
		row("certs", f.certsDir)
	} else {
		row("security", "INSECURE (--insecure): no TLS, no passwords")
	}
	row("node ID", fmt.Sprint(srv.NodeID()))
	if id := srv.ClusterID(); id != "" {
		row("cluster ID", id)
	}
	return b.String()
}

// sqlURL is a postgresql:// URL for the superuser on addr: with
// sslmode=disable on an insecure node; on a secure one verify-full
// against the cluster CA, with the superuser's client certificate when
// the certificates directory holds one (else the password is asked for).
func sqlURL(addr net.Addr, f startFlags) string {
	q := url.Values{}
	if f.cfg.Insecure {
		q.Set("sslmode", "disable")
	} else {
		dir, err := filepath.Abs(f.certsDir)
		if err != nil {
			dir = f.certsDir
		}
		q.Set("sslmode", "verify-full")
		q.Set("sslrootcert", filepath.Join(dir, security.CACertFile))
		crt, key := filepath.Join(dir, security.ClientCertFile("postgres")), filepath.Join(dir, security.ClientKeyFile("postgres"))
		if _, err := os.Stat(crt); err == nil {
			q.Set("sslcert", crt)
			q.Set("sslkey", key)
		}
	}
	u := url.URL{Scheme: "postgresql", User: url.User("postgres"), Host: dialable(addr), Path: "/postgres", RawQuery: q.Encode()}
	return u.String()
}

// dialable is addr with an unspecified host (0.0.0.0, ::) replaced by
// localhost, which a client on this host can dial.
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if unspecifiedHost(host) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
