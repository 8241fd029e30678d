package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/server"
)

// startNode starts an in-memory insecure node for the shell tests and
// returns its URL.
func startNode(t *testing.T) string {
	t.Helper()
	s, err := server.Start(context.Background(), server.Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return fmt.Sprintf("postgresql://postgres@%s/postgres?sslmode=disable", s.Addr())
}

// TestShellCommands runs psql's backslash commands the shell has, with
// their outputs, and the errors of the ones it has not.
func TestShellCommands(t *testing.T) {
	url := startNode(t)
	script := `CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL DEFAULT 'x');
CREATE INDEX t_name ON t (name);
\dt
\d t
\d nosuch
\l
\x
SELECT 1 AS a, 'hello' AS bbb;
\x off
\timing
SELECT 2 AS two;
\timing off
\bogus
\?
`
	var out, errOut bytes.Buffer
	if err := shell(context.Background(), url, "", strings.NewReader(script), &out, &errOut); err != nil {
		t.Fatalf("shell: %v\n%s", err, errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"        List of relations\n Schema | Name | Type  |  Owner\n--------+------+-------+----------\n public | t    | table | postgres\n(1 row)\n",
		"Table \"public.t\"",
		" id     | integer | not null |\n",
		" name   | text    | not null | 'x'::text\n",
		"Indexes:\n",
		`"t_name" btree (name)`,
		"List of databases",
		"Expanded display is on.\n-[ RECORD 1 ]\na   | 1\nbbb | hello\n",
		"Expanded display is off.\n",
		"Timing is on.\n two\n-----\n   2\n(1 row)\n\nTime: ",
		"Timing is off.\n",
		"list tables",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stdout lacks %q:\n%s", want, got)
		}
	}
	for _, want := range []string{`Did not find any relation named "nosuch".`, `invalid command \bogus`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	// -e runs a backslash command too.
	out.Reset()
	if err := shell(context.Background(), url, `\dt`, strings.NewReader(""), &out, &errOut); err != nil || !strings.Contains(out.String(), " public | t    | table") {
		t.Errorf("-e '\\dt': %v\n%s", err, out.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the shell's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestShellInterrupt: SIGINT (Ctrl-C) while a statement runs cancels the
// statement, and the shell goes on.
func TestShellInterrupt(t *testing.T) {
	url := startNode(t)
	ctx := context.Background()
	in, feed := io.Pipe()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() { done <- shell(ctx, url, "", in, &out, &errOut) }()
	io.WriteString(feed, "SELECT pg_sleep(60);\n")
	watcher, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	for {
		var n int
		if err := watcher.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60);\n' AND state = 'active'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	io.WriteString(feed, "SELECT 42 AS answer;\n\\q\n")
	if err := <-done; err != nil {
		t.Fatalf("shell: %v", err)
	}
	if e := errOut.String(); !strings.Contains(e, "Cancel request sent\n") || !strings.Contains(e, "ERROR:  canceling statement due to user request") {
		t.Errorf("stderr: %q", errOut.String())
	}
	if !strings.Contains(out.String(), "answer\n--------\n     42\n") {
		t.Errorf("stdout: %q", out.String())
	}
}

// TestCommandTree: the help of a command shows its description, examples
// and flags; completion scripts are generated and complete flag names.
func TestCommandTree(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"start", "--help"}, []string{"Start a node on the store in --store", "Examples:", "--store string", "--certs-dir string", "--insecure"}},
		{[]string{"help", "cert"}, []string{"create-node", "create a node's certificate"}},
		{[]string{"cert", "create-node", "--help"}, []string{"--ca-key string", "cairn cert create-node 10.0.0.1"}},
		{[]string{"sql", "--help"}, []string{"Ctrl-C cancels the running", "--url string"}},
		{[]string{"completion", "bash"}, []string{"__start_cairn"}},
		{[]string{"__complete", "start", "--sto"}, []string{"--store\t", "--store-profile\t"}},
		{[]string{"__complete", "cert", ""}, []string{"create-ca\t", "list\t"}},
		{[]string{"--version"}, []string{"commit:"}},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Errorf("cairn %s: exit %d: %s", strings.Join(tc.args, " "), code, errOut.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("cairn %s lacks %q:\n%s", strings.Join(tc.args, " "), w, out.String())
			}
		}
	}
}

// TestShellCompletion: Tab completes backslash commands, keywords in the
// case they were typed, and the database's relations, read again after
// DDL.
func TestShellCompletion(t *testing.T) {
	url := startNode(t)
	var out, errOut bytes.Buffer
	sh, closeShell := openShell(t, url, &out, &errOut)
	defer closeShell()
	c := newCompleter(sh)
	do := func(line string) []string {
		cands, n := c.Do([]rune(line), len([]rune(line)))
		var got []string
		for _, r := range cands {
			got = append(got, string(r))
		}
		if len(cands) > 0 && n == 0 {
			t.Errorf("Do(%q): candidates for an empty word", line)
		}
		return got
	}
	if got := do(`\ti`); len(got) != 1 || got[0] != "ming " {
		t.Errorf(`\ti: %q`, got)
	}
	if got := do("sel"); len(got) != 1 || got[0] != "ect " {
		t.Errorf("sel: %q", got)
	}
	if got := do("SELECT * FROM accou"); len(got) != 0 {
		t.Errorf("before CREATE TABLE: %q", got)
	}
	if err := sh.run(context.Background(), "CREATE TABLE accounts (id int PRIMARY KEY)", true); err != nil {
		t.Fatal(err)
	}
	c.changed("CREATE TABLE accounts (id int PRIMARY KEY)")
	if got := do("SELECT * FROM accou"); len(got) != 1 || got[0] != "nts " {
		t.Errorf("after CREATE TABLE: %q", got)
	}
}

// openShell connects a sqlShell to url.
func openShell(t *testing.T, url string, out, errOut io.Writer) (*sqlShell, func()) {
	t.Helper()
	conn, err := pgconn.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return &sqlShell{conn: conn, out: out, errOut: errOut}, func() { conn.Close(context.Background()) }
}
