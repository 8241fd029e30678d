package logic

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"testing"
)

// TestLogic runs every file in testdata/ against a server, each in its own
// database. By default the server is an in-memory Cairn node this test
// starts (server_test.go); it is part of the default test command.
//
//	make logic-pg     against a throwaway PostgreSQL 15 (validates the files)
//	CAIRN_LOGIC_URL=postgres://... go test -run TestLogic ./test/logic/
//
// CAIRN_LOGIC_URL names the server; CAIRN_LOGIC_ENGINE (postgres or cairn,
// default cairn) selects onlyif/skipif records.
//
// TestLogicSpill runs every file again with each operator's memory limit
// at 1 byte (Cairn's sql.testing.work_mem_bytes; PostgreSQL's smallest
// work_mem, 64kB, against PostgreSQL), so every sort, hash table and
// window spills to disk, against the same expected results.
//
// -rewrite replaces each file's expected results with the server's answers
// (author against PostgreSQL, then read the diff); -file limits the run to
// files whose names match a regexp.
var (
	rewrite    = flag.Bool("rewrite", false, "rewrite expected results from the server's answers")
	fileFilter = flag.String("file", "", "run only files whose names match this regexp")
)

// newServer starts a Cairn server for TestLogic when CAIRN_LOGIC_URL is unset.
var newServer ServerFactory

func TestLogic(t *testing.T) { runLogic(t, nil, *rewrite) }

// TestLogicSpill: every operator that holds rows spills on the smallest
// inputs, and no result may change (issue 15). It never rewrites files:
// TestLogic's answers are the expected ones.
func TestLogicSpill(t *testing.T) {
	settings := map[string]string{"sql.testing.work_mem_bytes": "1"}
	if os.Getenv("CAIRN_LOGIC_ENGINE") == EnginePostgres {
		settings = map[string]string{"work_mem": "64kB"}
	}
	runLogic(t, settings, false)
}

func runLogic(t *testing.T, settings map[string]string, rewrite bool) {
	url := os.Getenv("CAIRN_LOGIC_URL")
	engine := os.Getenv("CAIRN_LOGIC_ENGINE")
	if engine == "" {
		engine = EngineCairn
	}
	if engine != EngineCairn && engine != EnginePostgres {
		t.Fatalf("CAIRN_LOGIC_ENGINE=%q: want %s or %s", engine, EngineCairn, EnginePostgres)
	}
	var onTimeout func(string, int)
	if url == "" {
		if newServer == nil {
			t.Fatalf("no server: set CAIRN_LOGIC_URL, or assign newServer once Cairn's SQL server exists")
		}
		url = newServer(t)
		// The server runs in this process: a record that times out
		// leaves the stacks of what the server was doing.
		onTimeout = func(file string, line int) {
			t.Logf("%s:%d timed out; the server's goroutines in cairn's code:\n%s", file, line, cairnGoroutines(400))
		}
	}
	filter, err := regexp.Compile(*fileFilter)
	if err != nil {
		t.Fatalf("-file: %v", err)
	}
	paths, err := Files("testdata")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, path := range paths {
		name := filepath.Base(path)
		if !filter.MatchString(name) {
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			cfg := Config{URL: url, Engine: engine, Rewrite: rewrite, Settings: settings, OnTimeout: onTimeout}
			rep, err := RunFile(context.Background(), cfg, path)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Failures {
				if rewrite {
					t.Log("rewritten: ", f)
				} else {
					t.Error(f)
				}
			}
			if rewrite {
				if err := os.WriteFile(path, []byte(rep.Rewritten), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: %d records run, %d skipped, %d failed", name, rep.Ran, rep.Skipped, len(rep.Failures))
		})
	}
	if ran == 0 {
		t.Fatalf("no logic file matches -file=%q", *fileFilter)
	}
}

// cairnGoroutines returns the stacks of this process's goroutines that
// run Cairn's code outside this test package, at most maxLines lines;
// those in the SQL layer (statements, jobs) come first, the node's
// background loops after them.
func cairnGoroutines(maxLines int) string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		return err.Error()
	}
	var sql, other []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		switch {
		case !strings.Contains(g, "cairn-db/cairn/") || strings.Contains(g, "cairn-db/cairn/test/logic."):
		case strings.Contains(g, "cairn-db/cairn/sql/"):
			sql = append(sql, g)
		default:
			other = append(other, g)
		}
	}
	out := strings.Split(strings.Join(append(sql, other...), "\n\n"), "\n")
	if len(out) > maxLines {
		out = append(out[:maxLines], "...")
	}
	return strings.Join(out, "\n")
}
