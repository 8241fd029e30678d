package session

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// setting is one run-time parameter of the registry. Values are kept in
// their canonical text form (what SHOW prints); check turns user input into
// that form or fails with Postgres's error.
type setting struct {
	// name is the canonical spelling (SHOW's column name): TimeZone,
	// DateStyle, ... Lookups are case-insensitive.
	name string
	def  string
	desc string
	// report: sent as ParameterStatus when it changes (GUC_REPORT).
	report bool
	// readOnly settings reject SET with 55P02 (server_version, ...).
	readOnly bool
	// restart: a read-only setting the server takes from its command
	// line (PostgreSQL's postmaster context); sighup: one from its
	// configuration. Each changes the wording of the 55P02.
	restart, sighup bool
	// check canonicalizes a value; nil accepts any text.
	check func(s *Session, v string) (string, error)
}

// settingsList is the registry. A name not here is 42704, as in Postgres;
// the ones Cairn cannot honour accept only the value it implements, so a
// client that asks for something else learns it instead of being ignored.
var settingsList = []*setting{
	{name: "application_name", def: "", report: true, desc: "Sets the application name to be reported in statistics and logs."},
	{name: "client_encoding", def: "UTF8", report: true, check: checkEncoding, desc: "Sets the client's character set encoding."},
	{name: "client_min_messages", def: "notice", check: checkEnum("debug5", "debug4", "debug3", "debug2", "debug1", "log", "notice", "warning", "error"), desc: "Sets the message levels that are sent to the client."},
	{name: "DateStyle", def: "ISO, MDY", report: true, check: checkDateStyle, desc: "Sets the display format for date and time values."},
	{name: "IntervalStyle", def: "postgres", report: true, check: checkOnly("postgres"), desc: "Sets the display format for interval values."},
	{name: "TimeZone", def: "Etc/UTC", report: true, check: checkTimeZone, desc: "Sets the time zone for displaying and interpreting time stamps."},
	{name: "search_path", def: `"$user", public`, check: checkSearchPath, desc: "Sets the schema search order for names that are not schema-qualified."},
	{name: "statement_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed duration of any statement."},
	{name: "work_mem", def: "4MB", check: checkWorkMem, desc: "Sets the maximum memory to be used for query workspaces."},
	{name: "lock_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed duration of any wait for a lock."},
	{name: "idle_in_transaction_session_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed idle time between queries, when in a transaction."},
	{name: "idle_session_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed idle time between queries, when not in a transaction."},
	{name: "default_transaction_isolation", def: "read committed", check: checkIsolation, desc: "Sets the transaction isolation level of each new transaction."},
	{name: "transaction_isolation", def: "read committed", check: checkIsolation, desc: "Sets the current transaction's isolation level."},
	{name: "default_transaction_read_only", def: "off", report: true, check: checkBool, desc: "Sets the default read-only status of new transactions."},
	{name: "transaction_read_only", def: "off", check: checkBool, desc: "Sets the current transaction's read-only status."},
	{name: "extra_float_digits", def: "1", check: checkIntRange(-15, 3), desc: "Sets the number of digits displayed for floating-point values."},
	{name: "standard_conforming_strings", def: "on", report: true, check: checkOnly("on"), desc: "Causes '...' strings to treat backslashes literally."},
	{name: "integer_datetimes", def: "on", report: true, readOnly: true, desc: "Shows whether datetimes are integer based."},
	{name: "server_version", def: "15.18", report: true, readOnly: true, desc: "Shows the server version."},
	{name: "server_version_num", def: "150018", readOnly: true, desc: "Shows the server version as an integer."},
	{name: "server_encoding", def: "UTF8", report: true, readOnly: true, desc: "Shows the server (database) character set encoding."},
	{name: "max_identifier_length", def: "63", readOnly: true, desc: "Shows the maximum identifier length."},
	{name: "is_superuser", def: "off", report: true, readOnly: true, desc: "Shows whether the current user is a superuser."},
	{name: "session_authorization", def: "", report: true, readOnly: true, desc: "Sets the session user name."},
	{name: "in_hot_standby", def: "off", report: true, readOnly: true, desc: "Shows whether hot standby is currently active."},
	// The connection limits are the node's (cairn start flags); NewSession
	// fills in their values.
	{name: "max_connections", def: "100", readOnly: true, restart: true, desc: "Sets the maximum number of concurrent connections."},
	{name: "superuser_reserved_connections", def: "3", readOnly: true, restart: true, desc: "Sets the number of connection slots reserved for superusers."},
	{name: "authentication_timeout", def: "10s", readOnly: true, sighup: true, desc: "Sets the maximum allowed time to complete client authentication."},
	{name: "bytea_output", def: "hex", check: checkOnly("hex"), desc: "Sets the output format for bytea."},
	{name: "lc_messages", def: "C", desc: "Sets the language in which messages are displayed."},
	{name: "lc_monetary", def: "C", desc: "Sets the locale for formatting monetary amounts."},
	{name: "lc_numeric", def: "C", desc: "Sets the locale for formatting numbers."},
	{name: "lc_time", def: "C", desc: "Sets the locale for formatting date and time values."},
	{name: "synchronous_commit", def: "on", check: checkEnum("local", "remote_write", "remote_apply", "on", "off"), desc: "Sets the current transaction's synchronization level."},
	{name: "row_security", def: "on", check: checkBool, desc: "Enable row security."},
	// pg_dump's output sets these two. Cairn has no function bodies to
	// validate and no xml type, so either value changes nothing.
	{name: "check_function_bodies", def: "on", check: checkBool, desc: "Check routine bodies during CREATE FUNCTION and CREATE PROCEDURE."},
	{name: "xmloption", def: "content", check: checkEnum("content", "document"), desc: "Sets whether XML data in implicit parsing and serialization operations is to be considered as documents or content fragments."},
	// Cairn's scans always start at the first key, which is what off asks
	// for (pg_dump sets it); on only allows PostgreSQL to start elsewhere.
	{name: "synchronize_seqscans", def: "on", check: checkBool, desc: "Enable synchronized sequential scans."},
	// Clients read these two: asyncpg reads jit inside the transaction
	// it introspects types in (an unknown name would abort it), pgjdbc's
	// getImportedKeys reads max_index_keys. Cairn compiles nothing, as a
	// PostgreSQL built without LLVM, where jit is accepted and does nothing.
	{name: "jit", def: "off", check: checkBool, desc: "Allow JIT compilation."},
	{name: "max_index_keys", def: "32", readOnly: true, desc: "Shows the maximum number of index keys."},
	// Every relation is a heap in pg_class/pg_am and lives in pg_default
	// (SQLAlchemy's reflection reads the first; pg_dump's output sets both).
	{name: "default_table_access_method", def: "heap", check: checkOnly("heap"), desc: "Sets the default table access method for new tables."},
	{name: "default_tablespace", def: "", check: checkOnly(""), desc: "Sets the default tablespace to create tables and indexes in."},
	{name: "cairn_buffered_writes", def: "auto", check: checkBufferedWrites, desc: "Buffers a transaction's writes in the coordinator until commit, so one whose writes land on one tablet commits in one phase; auto buffers every transaction, with a lock per written row except in simple-protocol autocommit statements, on takes the locks there too, off writes intents (docs/architecture.md)."},
	{name: "storage.packed_rows.enabled", def: "on", check: checkBool, desc: "Stores each row's columns packed in one value."},
	{name: "sql.stats.automatic_collection.enabled", def: "on", check: checkBool, desc: "Collects table statistics in the background when this session's changes make them stale."},
	{name: "sql.testing.work_mem_bytes", def: "0", check: checkIntRange(0, 1<<40), desc: "For tests: when above 0, the per-operator memory limit in bytes, overriding work_mem (so tiny inputs spill)."},
	{name: "sql.testing.lookup_batch", def: "0", check: checkIntRange(0, 1<<20), desc: "For benchmarks: when above 0, the input rows an index or lookup join looks up per batch, overriding the storage profile's size."},
	{name: "sql.testing.lookup_input_order", def: "off", check: checkBool, desc: "For benchmarks: index and lookup joins read their keys in input order, unsorted, as Cairn did before reads in storage order (bench/readplan's baseline)."},
	{name: "storage.packed_rows.size_limit", def: "0", check: checkIntRange(0, 1<<30), desc: "Largest packed row in bytes (0: no limit); larger rows are stored one column per key."},
	{name: "distsql", def: "auto", check: checkEnum("off", "auto", "on"), desc: "Sets when a statement runs as distributed fragments on the tablets' leaseholders (off; auto: when its fragments are on more than one node; on: whenever it qualifies)."},
	{name: "citus.shard_count", def: "32", check: checkIntRange(1, 64000), desc: "Sets the number of shards (tablets) create_distributed_table gives a table without shard_count, as in Citus."},
	{name: "sql.testing.distsql_pushdown", def: "on", check: checkBool, desc: "For tests: off keeps filters, projections, aggregation and sorting at the gateway of a distributed statement (its fragments ship KVs), to measure what pushdown saves."},
	{name: "sql.testing.distsql_join", def: "auto", check: checkEnum("auto", "off", "colocated", "reference", "broadcast", "repartition"), desc: "For tests: how a distributed join runs when that way applies (auto: the cost model chooses; off: joins run at the gateway)."},
	{name: "join_collapse_limit", def: "8", check: checkIntRange(1, math.MaxInt32), desc: "Sets the FROM-list size beyond which JOIN constructs are not flattened."},
	{name: "from_collapse_limit", def: "8", check: checkIntRange(1, math.MaxInt32), desc: "Sets the FROM-list size beyond which subqueries are not collapsed."},
	{name: "enable_seqscan", def: "on", check: checkBool, desc: "Enables the planner's use of sequential-scan plans."},
	{name: "enable_indexscan", def: "on", check: checkBool, desc: "Enables the planner's use of index-scan plans."},
	{name: "enable_mergejoin", def: "on", check: checkBool, desc: "Enables the planner's use of merge-join plans."},
	{name: "enable_hashjoin", def: "on", check: checkBool, desc: "Enables the planner's use of hash join plans."},
	{name: "enable_nestloop", def: "on", check: checkBool, desc: "Enables the planner's use of nested-loop join plans."},
	{name: "geqo", def: "on", check: checkBool, desc: "Enables the heuristic join search (Cairn's is greedy, not genetic) for FROM lists of geqo_threshold items or more."},
	// storage.profile prices the planner's reads (sql/opt's Costs): its
	// default is the node's --store-profile (NewSession), and SET
	// overrides it for the session (docs/sql.md, "Storage profiles").
	{name: "storage.profile", def: "ssd", check: checkEnum("ssd", "hdd", "object-store"), desc: "Sets the storage profile the planner prices reads by (ssd, hdd, object-store); defaults to the node's --store-profile."},
	{name: "geqo_threshold", def: "12", check: checkIntRange(2, math.MaxInt32), desc: "Sets the threshold of FROM items beyond which the heuristic join search is used."},
}

var settingsByName = func() map[string]*setting {
	m := make(map[string]*setting, len(settingsList))
	for _, s := range settingsList {
		m[strings.ToLower(s.name)] = s
	}
	return m
}()

// reportedSettings are the settings sent as ParameterStatus, with their
// lower-case names (the keys of Session.vars): flushReports checks them
// before every statement.
var reportedSettings = func() []reportedSetting {
	var out []reportedSetting
	for _, s := range settingsList {
		if s.report {
			out = append(out, reportedSetting{name: s.name, key: strings.ToLower(s.name)})
		}
	}
	return out
}()

type reportedSetting struct{ name, key string }

func lookupSetting(name string) (*setting, error) {
	if s, ok := settingsByName[strings.ToLower(name)]; ok {
		return s, nil
	}
	err := pgerror.New(pgerrcode.UndefinedObject, "unrecognized configuration parameter %q", name)
	if cs, ok := lookupClusterSetting(name); ok {
		// SHOW finds cluster settings by name; SET and RESET set a
		// session's parameters only.
		return nil, err.WithHint("%s is a cluster setting: SET CLUSTER SETTING %s = value, or ALTER SYSTEM SET.", cs.name, cs.name)
	}
	return nil, err
}

func invalidValue(name, v string) error {
	return pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %q", name, v)
}

// checkEncoding reads an encoding name as PostgreSQL's
// clean_encoding_name does: every character but letters and digits is
// dropped and case is ignored, so 'utf-8' with its quotes (asyncpg's
// startup packet), utf_8 and UTF8 all name UTF8.
func checkEncoding(_ *Session, v string) (string, error) {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, v)
	switch clean {
	case "utf8", "unicode":
		return "UTF8", nil
	}
	return "", pgerror.New(pgerrcode.FeatureNotSupported, "client_encoding %q is not supported: Cairn speaks UTF8 only", v)
}

func checkOnly(allowed string) func(*Session, string) (string, error) {
	return func(_ *Session, v string) (string, error) {
		if strings.EqualFold(strings.TrimSpace(v), allowed) {
			return allowed, nil
		}
		return "", pgerror.New(pgerrcode.FeatureNotSupported, "value %q is not supported: Cairn implements only %q", v, allowed)
	}
}

func checkEnum(vals ...string) func(*Session, string) (string, error) {
	return func(_ *Session, v string) (string, error) {
		lv := strings.ToLower(strings.TrimSpace(v))
		for _, a := range vals {
			if lv == a {
				return a, nil
			}
		}
		return "", fmt.Errorf("enum") // replaced by the caller with the named error
	}
}

// checkDateStyle accepts the spellings of ISO, MDY: the only output style
// sql/types prints and the only input order it reads.
func checkDateStyle(_ *Session, v string) (string, error) {
	for _, part := range strings.Split(v, ",") {
		switch p := strings.ToUpper(strings.TrimSpace(part)); p {
		case "ISO", "MDY", "US", "NONEURO", "NONEUROPEAN", "DEFAULT":
		case "DMY", "EURO", "EUROPEAN", "YMD":
			// sql/types reads ambiguous numeric dates in MDY order only;
			// accepting another order would silently misread them.
			return "", pgerror.New(pgerrcode.FeatureNotSupported, "DateStyle %q is not supported: Cairn reads dates in MDY order only", strings.TrimSpace(part))
		case "SQL", "POSTGRES", "GERMAN":
			return "", pgerror.New(pgerrcode.FeatureNotSupported, "DateStyle %q is not supported: Cairn prints dates in ISO style only", strings.TrimSpace(part))
		default:
			return "", pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter \"DateStyle\": %q", v).WithDetail("Unrecognized key word: %q.", strings.TrimSpace(part))
		}
	}
	return "ISO, MDY", nil
}

func checkTimeZone(_ *Session, v string) (string, error) {
	_, canon, err := loadZone(v)
	return canon, err
}

// loadZone resolves a TimeZone value: an IANA name, UTC, or a number of
// hours east of UTC as SET TIME ZONE 2 gives (POSIX sign, as Postgres
// prints "<+02>-02").
func loadZone(v string) (*time.Location, string, error) {
	t := strings.TrimSpace(v)
	switch strings.ToLower(t) {
	case "utc", "etc/utc", "z", "zulu", "gmt", "etc/gmt", "universal":
		if strings.EqualFold(t, "etc/utc") {
			return time.UTC, "Etc/UTC", nil
		}
		if strings.EqualFold(t, "utc") {
			return time.UTC, "UTC", nil
		}
		return time.UTC, t, nil
	case "local", "default":
		return time.UTC, "Etc/UTC", nil
	}
	if h, err := strconv.ParseFloat(t, 64); err == nil && h > -24 && h < 24 {
		secs := int(h * 3600)
		return time.FixedZone(fmtOffsetName(secs), secs), fmtOffsetName(secs), nil
	}
	loc, err := time.LoadLocation(t)
	if err != nil || t == "" {
		return nil, "", invalidValue("TimeZone", v)
	}
	return loc, t, nil
}

func fmtOffsetName(secs int) string {
	sign, neg := "+", "-"
	if secs < 0 {
		sign, neg, secs = "-", "+", -secs
	}
	h, m := secs/3600, secs%3600/60
	if m == 0 {
		return fmt.Sprintf("<%s%02d>%s%02d", sign, h, neg, h)
	}
	return fmt.Sprintf("<%s%02d%02d>%s%02d:%02d", sign, h, m, neg, h, m)
}

// parseSearchPath splits a search_path value into schema names, removing
// quotes; "$user" stays as written (resolved against the user at lookup).
func parseSearchPath(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if len(p) >= 2 && p[0] == '"' && p[len(p)-1] == '"' {
			p = strings.ReplaceAll(p[1:len(p)-1], `""`, `"`)
		} else {
			p = strings.ToLower(p)
		}
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func checkSearchPath(_ *Session, v string) (string, error) {
	parts := parseSearchPath(v)
	for i, p := range parts {
		if p == "$user" || strings.ContainsAny(p, ` ,"`) || p != strings.ToLower(p) {
			parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
		}
	}
	return strings.Join(parts, ", "), nil
}

// checkDuration accepts milliseconds or a number with a unit and prints
// it as Postgres does: in the largest unit that divides it exactly.
func checkDuration(_ *Session, v string) (string, error) {
	d, err := parseDuration(v)
	if err != nil {
		return "", err
	}
	return formatDuration(d), nil
}

// readOnlyError is the 55P02 of a SET of a read-only setting, worded as
// PostgreSQL words it for the setting's context.
func (st *setting) readOnlyError() error {
	switch {
	case st.restart:
		return pgerror.New(pgerrcode.CantChangeRuntimeParam, "parameter %q cannot be changed without restarting the server", st.name)
	case st.sighup:
		return pgerror.New(pgerrcode.CantChangeRuntimeParam, "parameter %q cannot be changed now", st.name)
	}
	return pgerror.New(pgerrcode.CantChangeRuntimeParam, "parameter %q cannot be changed", st.name)
}

func parseDuration(v string) (time.Duration, error) {
	t := strings.TrimSpace(v)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || (i == 0 && (t[i] == '-' || t[i] == '+'))) {
		i++
	}
	n, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %q", "statement_timeout", v)
	}
	unit := time.Millisecond
	switch strings.TrimSpace(t[i:]) {
	case "", "ms":
	case "us":
		unit = time.Microsecond
	case "s":
		unit = time.Second
	case "min":
		unit = time.Minute
	case "h":
		unit = time.Hour
	case "d":
		unit = 24 * time.Hour
	default:
		return 0, pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %q", "statement_timeout", v).
			WithHint(`Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".`)
	}
	if n < 0 {
		return 0, pgerror.New(pgerrcode.InvalidParameterValue, "%s ms is outside the valid range for parameter \"statement_timeout\" (0 .. 2147483647)", strconv.FormatFloat(n, 'f', -1, 64))
	}
	return time.Duration(n * float64(unit)).Round(time.Millisecond), nil
}

func formatDuration(d time.Duration) string {
	ms := d.Milliseconds()
	if ms == 0 {
		return "0"
	}
	for _, u := range []struct {
		n    int64
		name string
	}{{86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}} {
		if ms%u.n == 0 {
			return strconv.FormatInt(ms/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

func checkIsolation(_ *Session, v string) (string, error) {
	switch l := strings.Join(strings.Fields(strings.ToLower(v)), " "); l {
	case "serializable", "repeatable read", "read committed", "read uncommitted":
		return l, nil
	}
	return "", fmt.Errorf("enum")
}

func checkBool(_ *Session, v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "yes", "1", "t", "y":
		return "on", nil
	case "off", "false", "no", "0", "f", "n":
		return "off", nil
	}
	return "", fmt.Errorf("bool")
}

// checkBufferedWrites accepts auto or a boolean.
func checkBufferedWrites(s *Session, v string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(v), "auto") {
		return "auto", nil
	}
	if b, err := checkBool(s, v); err == nil {
		return b, nil
	}
	return "", pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %q (auto, on or off)", "cairn_buffered_writes", v)
}

func checkIntRange(lo, hi int64) func(*Session, string) (string, error) {
	return func(_ *Session, v string) (string, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return "", fmt.Errorf("int")
		}
		if n < lo || n > hi {
			return "", fmt.Errorf("range %d %d %d", n, lo, hi)
		}
		return strconv.FormatInt(n, 10), nil
	}
}

// checkWorkMem accepts PostgreSQL's memory syntax (kB without a unit)
// within work_mem's range, shown in the largest unit that divides it.
func checkWorkMem(_ *Session, v string) (string, error) {
	kb, hint, ok := mon.ParseKB(v)
	if !ok {
		e := pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %q", "work_mem", v)
		if hint != "" {
			e = e.WithHint("%s", hint)
		}
		return "", e
	}
	if kb < mon.MinWorkMemKB || kb > mon.MaxWorkMemKB {
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "%d kB is outside the valid range for parameter \"work_mem\" (%d .. %d)", kb, mon.MinWorkMemKB, mon.MaxWorkMemKB)
	}
	return mon.FormatKB(kb), nil
}

// canonicalize checks v for st, turning the helpers' bare errors into
// Postgres's messages for the parameter.
func (st *setting) canonicalize(s *Session, v string) (string, error) {
	if st.check == nil {
		return v, nil
	}
	out, err := st.check(s, v)
	if err == nil {
		return out, nil
	}
	if pgerror.Code(err) != pgerrcode.InternalError {
		return "", err
	}
	msg := err.Error()
	switch {
	case msg == "bool":
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "parameter %q requires a Boolean value", st.name)
	case msg == "int":
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %q", st.name, v)
	case strings.HasPrefix(msg, "range"):
		var n, lo, hi int64
		fmt.Sscanf(msg, "range %d %d %d", &n, &lo, &hi)
		return "", pgerror.New(pgerrcode.InvalidParameterValue, "%d is outside the valid range for parameter %q (%d .. %d)", n, st.name, lo, hi)
	}
	return "", invalidValue(st.name, v)
}

// settingRows lists name, value and description of every setting, in
// name order, for pg_settings and SHOW ALL.
func (s *Session) settingRows() [][3]string {
	out := make([][3]string, 0, len(settingsList))
	for _, st := range settingsList {
		v := s.vars[strings.ToLower(st.name)]
		if tv, ok := s.txnSetting(st.name); ok {
			v = tv
		}
		out = append(out, [3]string{st.name, v, st.desc})
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i][0]) < strings.ToLower(out[j][0]) })
	return out
}
