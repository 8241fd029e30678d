// Package githubevents owns `cairn workload github-events`: rows shaped
// like the github_events table of the parallel-indexing seed
// (/work/shared/seeds/parallel-indexing.txt, the GitHub archive of
// 2015-01-01): the same nine columns, PushEvent payloads with a commits
// array of authors (name and email), sha, message and url, and repo,
// actor and org objects as jsonb.
//
// It has a small Go API for benchmarks and tests (bench/distsql,
// bench/parallelindex): Event(i) is the i-th row, the same every time;
// WriteCSV writes rows as `COPY ... WITH (FORMAT csv)` reads them (the
// seed loads its CSV files that way); Init creates the table and loads
// rows over one connection with COPY.
//
// Who calls it: cmd/cairn (workload.go), bench programs, tests. It calls
// pgx only; it never imports the server.
//
// Invariants:
//
//  1. Rows are a function of their index: Event(i) never changes between
//     calls, runs or machines (a PRNG seeded by i), so two loads of the
//     same range hold the same data and answers can be compared.
//  2. Event IDs are the row indexes, so they are unique; the primary key
//     (repo_id, event_id) is unique too.
//  3. Event i is in repo SeedRepoID exactly when i % SeedRepoEvery = 0,
//     and is a PushEvent whose first commit is by SeedEmail exactly when
//     i % SeedEmailEvery = 0 (no other commit is by SeedEmail), so the
//     seed's two SELECTs find rows at any size over a few thousand rows,
//     and how many is known (SeedMatches).
package githubevents

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The values the seed's queries look for.
const (
	SeedRepoID     = 17330407
	SeedEmail      = "test@gmail.com"
	SeedRepoEvery  = 1000
	SeedEmailEvery = 100
	// Repos is how many other repositories events fall in.
	Repos = 5000
)

// SeedContains is the seed's containment pattern for commits by
// SeedEmail (the jsonb @> operand of its two SELECTs).
const SeedContains = `{"commits":[{"author":{"email":"test@gmail.com"}}]}`

// SeedDDL is the seed's own CREATE TABLE of table: its columns and no
// primary key (the hidden rowid is the key; create_distributed_table by
// repo_id makes it (repo_id, rowid), docs/distributed.md). Init and
// bench/distsql create this.
func SeedDDL(table string) string {
	return fmt.Sprintf(`CREATE TABLE %s (%s)`, table, columnsDDL)
}

// DDL is SeedDDL with PRIMARY KEY (repo_id, event_id), for programs that
// want a declared key (bench/parallelindex).
func DDL(table string) string {
	return fmt.Sprintf(`CREATE TABLE %s (%s,
  PRIMARY KEY (repo_id, event_id))`, table, columnsDDL)
}

// columnsDDL are the seed's columns.
const columnsDDL = `
  event_id bigint,
  event_type text,
  event_public boolean,
  repo_id bigint,
  payload jsonb,
  repo jsonb,
  actor jsonb,
  org jsonb,
  created_at timestamp`

// Row is one event. Payload, Repo, Actor and Org are JSON text; Org is
// "" for events without an organisation (a NULL, as in the archive).
type Row struct {
	EventID     int64
	EventType   string
	EventPublic bool
	RepoID      int64
	Payload     string
	Repo        string
	Actor       string
	Org         string
	CreatedAt   time.Time
}

// eventTypes are the archive's event types with weights close to its
// mix (about half are PushEvents).
var eventTypes = []struct {
	name   string
	weight int
}{
	{"PushEvent", 50}, {"CreateEvent", 12}, {"WatchEvent", 10}, {"IssueCommentEvent", 8},
	{"PullRequestEvent", 6}, {"IssuesEvent", 5}, {"ForkEvent", 4}, {"DeleteEvent", 3}, {"GollumEvent", 2},
}

// Start is the created_at of event 0; event i is i/3 seconds later
// (the archive's day holds about 219k events).
var Start = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)

// Event returns the i-th row (invariant 1).
func Event(i int64) Row {
	rng := rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))
	r := Row{EventID: i, EventPublic: true, CreatedAt: Start.Add(time.Duration(i) * time.Second / 3)}
	w := rng.IntN(100)
	for _, et := range eventTypes {
		if w < et.weight {
			r.EventType = et.name
			break
		}
		w -= et.weight
	}
	if r.EventType == "" || i%SeedEmailEvery == 0 {
		r.EventType = "PushEvent"
	}
	// Repos are skewed: a few busy ones, many quiet ones.
	repo := int64(1 + rng.IntN(Repos))
	if rng.IntN(4) == 0 {
		repo = int64(1 + rng.IntN(50))
	}
	if i%SeedRepoEvery == 0 {
		repo = SeedRepoID
	}
	r.RepoID = repo
	owner := fmt.Sprintf("owner%d", repo%700)
	repoName := fmt.Sprintf("%s/repo%d", owner, repo)
	r.Repo = mustJSON(map[string]any{"id": repo, "name": repoName, "url": "https://api.github.com/repos/" + repoName})
	actorID := int64(1 + rng.IntN(30000))
	login := fmt.Sprintf("user%d", actorID)
	r.Actor = mustJSON(map[string]any{"id": actorID, "login": login, "gravatar_id": "",
		"url": "https://api.github.com/users/" + login, "avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?", actorID)})
	if repo%3 == 0 {
		orgID := 100000 + repo%700
		r.Org = mustJSON(map[string]any{"id": orgID, "login": owner, "gravatar_id": "",
			"url": "https://api.github.com/orgs/" + owner, "avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?", orgID)})
	}
	switch r.EventType {
	case "PushEvent":
		n := 1 + rng.IntN(3)
		if rng.IntN(10) == 0 {
			n += rng.IntN(10)
		}
		commits := make([]any, n)
		for c := range commits {
			author := int64(1 + rng.IntN(20000))
			email := fmt.Sprintf("dev%d@example.com", author)
			if c == 0 && i%SeedEmailEvery == 0 {
				email = SeedEmail
			}
			sha := sha(i, c)
			commits[c] = map[string]any{
				"sha":      sha,
				"author":   map[string]any{"email": email, "name": fmt.Sprintf("Developer %d", author)},
				"message":  fmt.Sprintf("Fix #%d: update %s", rng.IntN(5000), []string{"README.md", "main.go", "index.js", "setup.py", "Makefile"}[rng.IntN(5)]),
				"distinct": rng.IntN(10) != 0,
				"url":      "https://api.github.com/repos/" + repoName + "/commits/" + sha,
			}
		}
		r.Payload = mustJSON(map[string]any{"push_id": 536740000 + i, "size": n, "distinct_size": n,
			"ref": "refs/heads/master", "head": sha(i, n), "before": sha(i, n+1), "commits": commits})
	case "CreateEvent":
		r.Payload = mustJSON(map[string]any{"ref": "master", "ref_type": "branch", "master_branch": "master",
			"description": fmt.Sprintf("Project %d", repo), "pusher_type": "user"})
	case "WatchEvent":
		r.Payload = `{"action": "started"}`
	case "IssueCommentEvent", "IssuesEvent", "PullRequestEvent":
		r.Payload = mustJSON(map[string]any{"action": []string{"opened", "closed", "created"}[rng.IntN(3)],
			"number": 1 + rng.IntN(2000), "body": fmt.Sprintf("Comment %d on %s", i, repoName)})
	default:
		r.Payload = "{}"
	}
	return r
}

// SeedMatches is how many of events 0..rows-1 the seed's SELECTs find:
// PushEvents with a commit by SeedEmail in all repos, and those in repo
// SeedRepoID (invariant 3).
func SeedMatches(rows int64) (allRepos, oneRepo int64) {
	if rows <= 0 {
		return 0, 0
	}
	return (rows-1)/SeedEmailEvery + 1, (rows-1)/SeedRepoEvery + 1
}

func sha(i int64, c int) string {
	h := sha1.Sum(fmt.Appendf(nil, "%d/%d", i, c))
	return hex.EncodeToString(h[:])
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("githubevents: %v", err)) // maps of plain values always marshal
	}
	return string(b)
}

// AppendCSV appends r as one CSV line (COPY ... WITH (FORMAT csv)): JSON
// fields quoted, a missing org as an unquoted empty field (NULL).
func (r Row) AppendCSV(b []byte) []byte {
	b = fmt.Appendf(b, "%d,%s,%t,%d,", r.EventID, r.EventType, r.EventPublic, r.RepoID)
	for _, j := range []string{r.Payload, r.Repo, r.Actor, r.Org} {
		if j != "" {
			b = append(b, '"')
			b = append(b, strings.ReplaceAll(j, `"`, `""`)...)
			b = append(b, '"')
		}
		b = append(b, ',')
	}
	b = r.CreatedAt.AppendFormat(b, "2006-01-02 15:04:05")
	return append(b, '\n')
}

// WriteCSV writes rows lo..hi-1 to w as CSV.
func WriteCSV(w io.Writer, lo, hi int64) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	for i := lo; i < hi; i++ {
		line = Event(i).AppendCSV(line[:0])
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Config configures Init.
type Config struct {
	// Table is the table's name ("github_events" if empty).
	Table string
	// Rows is how many events to load: event IDs 0..Rows-1.
	Rows int64
	// Drop drops an existing table of that name first.
	Drop bool
	// Distributed, when set, distributes the table on repo_id before the
	// load (create_distributed_table), with Shards shards (0: the
	// server's citus.shard_count).
	Distributed bool
	Shards      int
	// Batch is the rows per COPY statement (10,000 if 0).
	Batch int64
	// Out, when set, receives a progress line per batch.
	Out io.Writer
}

// Init creates cfg's table on conn and loads its rows with COPY, one
// statement per batch.
func Init(ctx context.Context, conn *pgx.Conn, cfg Config) error {
	if cfg.Table == "" {
		cfg.Table = "github_events"
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 10_000
	}
	if cfg.Rows < 0 {
		return fmt.Errorf("githubevents: --rows must not be negative")
	}
	ident := pgx.Identifier{cfg.Table}.Sanitize()
	if cfg.Drop {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+ident); err != nil {
			return fmt.Errorf("githubevents: dropping %s: %w", cfg.Table, err)
		}
	}
	if _, err := conn.Exec(ctx, SeedDDL(ident)); err != nil {
		return fmt.Errorf("githubevents: creating %s: %w", cfg.Table, err)
	}
	if cfg.Distributed {
		q := "SELECT create_distributed_table($1, 'repo_id')"
		args := []any{cfg.Table}
		if cfg.Shards > 0 {
			q = fmt.Sprintf("SELECT create_distributed_table($1, 'repo_id', shard_count => %d)", cfg.Shards)
		}
		// The function runs as DDL only when its arguments are
		// constants in the text (docs/distributed.md).
		q = strings.Replace(q, "$1", quoteLiteral(args[0].(string)), 1)
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("githubevents: distributing %s: %w", cfg.Table, err)
		}
	}
	start := time.Now()
	for lo := int64(0); lo < cfg.Rows; lo += cfg.Batch {
		hi := min(lo+cfg.Batch, cfg.Rows)
		if err := Copy(ctx, conn, cfg.Table, lo, hi); err != nil {
			return err
		}
		if cfg.Out != nil {
			fmt.Fprintf(cfg.Out, "loaded %d of %d rows into %s (%.1fs)\n", hi, cfg.Rows, cfg.Table, time.Since(start).Seconds())
		}
	}
	return nil
}

// Copy loads rows lo..hi-1 into table (created with DDL) with one COPY
// ... FROM STDIN WITH (FORMAT csv).
func Copy(ctx context.Context, conn *pgx.Conn, table string, lo, hi int64) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(WriteCSV(pw, lo, hi)) }()
	_, err := conn.PgConn().CopyFrom(ctx, pr, "COPY "+pgx.Identifier{table}.Sanitize()+" FROM STDIN WITH (FORMAT csv)")
	pr.Close()
	if err != nil {
		return fmt.Errorf("githubevents: loading rows %d..%d of %s: %w", lo, hi-1, table, err)
	}
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
