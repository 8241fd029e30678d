package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/mon"
)

// checkStartFlags refuses combinations of cairn start's flags that cannot
// work, before anything is opened: every listen address is host:port,
// no two listeners share a fixed port, the locality is key=value pairs,
// and --join lists distinct, well-formed addresses. (--join without the
// node's own --rpc-addr among them is refused by parseStart.)
func checkStartFlags(f *startFlags) error {
	addrs := []struct{ flag, addr string }{
		{"--sql-addr", f.cfg.SQLAddr},
		{"--http-addr", f.cfg.HTTPAddr},
		{"--rpc-addr", f.cfg.RPCAddr},
	}
	for i, a := range addrs {
		_, port, err := net.SplitHostPort(a.addr)
		if err != nil {
			return usagef("%s %q: want HOST:PORT (%v)", a.flag, a.addr, err)
		}
		if port == "0" {
			continue // a free port each: they cannot clash
		}
		for _, b := range addrs[:i] {
			if sameListener(a.addr, b.addr) {
				return usagef("%s and %s are both %s: each listener needs its own address", b.flag, a.flag, a.addr)
			}
		}
	}
	if f.cfg.Locality != "" {
		seen := map[string]bool{}
		for _, kv := range strings.Split(f.cfg.Locality, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" || strings.ContainsAny(v, "=") {
				return usagef("--locality %q: want key=value[,key=value...], e.g. region=us-east1,zone=a", f.cfg.Locality)
			}
			if seen[k] {
				return usagef("--locality %q: key %q given twice", f.cfg.Locality, k)
			}
			seen[k] = true
		}
	}
	for i, a := range f.cfg.Join {
		if _, _, err := net.SplitHostPort(a); err != nil || a == "" {
			return usagef("--join %q: member %d (%q) is not HOST:PORT", f.join, i+1, a)
		}
		if slices.Index(f.cfg.Join[:i], a) >= 0 {
			return usagef("--join %q lists %s twice", f.join, a)
		}
	}
	return nil
}

// sameListener reports whether two host:port addresses would listen on
// the same port of the same interface (an empty or unspecified host means
// every interface).
func sameListener(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb {
		return false
	}
	return ha == hb || unspecifiedHost(ha) || unspecifiedHost(hb)
}

// unspecifiedHost reports whether a listen host means every interface.
func unspecifiedHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "" || (ip != nil && ip.IsUnspecified())
}

// parseMemoryFlag reads --max-sql-memory and --max-disk-temp-storage: a
// size (server.ParseByteSize) or a percentage of RAM.
func parseMemoryFlag(v string) (int64, error) {
	if p, ok := strings.CutSuffix(strings.TrimSpace(v), "%"); ok {
		pct, err := strconv.ParseFloat(p, 64)
		if err != nil || pct <= 0 || pct > 100 {
			return 0, fmt.Errorf("%q: want a size or a percentage of RAM in (0, 100]", v)
		}
		ram := mon.SystemMemory()
		if ram == 0 {
			return 0, fmt.Errorf("%q: the machine's RAM is unknown; give a size", v)
		}
		return int64(float64(ram) * pct / 100), nil
	}
	n, err := server.ParseByteSize(v)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("%q: want more than 0", v)
	}
	return n, nil
}
