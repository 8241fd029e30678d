package main

import (
	"fmt"
	"github.com/cairn-db/cairn/clusterversion"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release, set at link time (-ldflags "-X main.version=v1.2.3");
// a plain go build reports the module version Go recorded, "(devel)" for a
// build from a work tree.
var version = ""

// versionText is `cairn version`: the release, the commit it was built
// from (with "+modified" when the work tree had changes) and when, and the
// Go toolchain and platform, and the binary's cluster versions, as one
// line each.
func versionText() string {
	v, commit, when := buildInfo()
	var b strings.Builder
	fmt.Fprintf(&b, "cairn %s\n", v)
	fmt.Fprintf(&b, "commit:   %s\n", commit)
	fmt.Fprintf(&b, "built:    %s\n", when)
	fmt.Fprintf(&b, "go:       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	// What a rolling upgrade needs to know of this binary
	// (docs/operations.md, "Upgrade").
	fmt.Fprintf(&b, "binary:   version %s, runs in clusters at version %s or later\n", clusterversion.Binary, clusterversion.MinSupported)
	return b.String()
}

// buildLine is the version on one line, for the start banner.
func buildLine() string {
	v, commit, _ := buildInfo()
	return fmt.Sprintf("cairn %s, commit %s, %s %s/%s", v, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// buildInfo returns the release, the commit and its time.
func buildInfo() (v, commit, when string) {
	v, commit, when = version, "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified {
			commit += "+modified"
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v, commit, when
}
