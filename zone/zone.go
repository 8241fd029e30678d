// Package zone owns placement settings per table group ("zone
// configurations", as CockroachDB calls them): the number of voters a
// tablet aims for, where its lease should be, and how long old versions
// stay readable before the GC queue removes them (gc.ttlseconds). The SQL layer stores a
// database's and a table's settings in their descriptors (ALTER ...
// CONFIGURE ZONE) and writes, in the same transaction, the effective
// settings of each table group as a small record under the system keys,
// keyed by the group's key prefix (Key). The KV-level queues below SQL
// (the replicate queue, the lease balancer) know tablets, not tables: a
// Cache scans the records and finds a tablet's settings by its start key.
package zone

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/cairn-db/cairn/clusterversion"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// MaxReplicas bounds num_replicas: every write waits for a majority of
// the voters, and a raft group of more than 7 buys no failure tolerance a
// cluster of this size needs.
const MaxReplicas = 7

// Config is a zone's settings; a zero field is inherited (from the
// database for a table, from the cluster's flags for a database).
type Config struct {
	// NumReplicas is the number of voters (0: inherited).
	NumReplicas int `json:"num_replicas,omitempty"`
	// LeasePreferences are regions in order of preference (nil:
	// inherited; an empty, non-nil list: none, whatever the flag says).
	LeasePreferences []string `json:"lease_preferences,omitempty"`
	// PrefsSet tells an explicit empty preference list from an inherited
	// one.
	PrefsSet bool `json:"prefs_set,omitempty"`
	// GCTTLSeconds is gc.ttlseconds: how long a version stays readable
	// after a newer one replaced it (0: inherited).
	GCTTLSeconds int64 `json:"gc_ttlseconds,omitempty"`
	// GlobalReads makes the group's tablets readable at the present time
	// from every replica (CockroachDB's global_reads): their leaseholders
	// close timestamps in the future (tablet/closedts.go). Set for a
	// Citus reference table (create_reference_table); never inherited
	// from the database.
	GlobalReads bool `json:"global_reads,omitempty"`
	// BucketSplits says the group is a distributed table's
	// hash-partitioned group, which the tables colocated with it share
	// (docs/distributed.md): the split queue may divide it, so a grown
	// shard splits, but only between buckets, so that the rows of one
	// bucket of every table in the group stay in one tablet (rowenc.SplitUnit
	// keeps every other group whose ID is not its table's whole). Set by
	// the SQL layer, never inherited.
	BucketSplits bool `json:"bucket_splits,omitempty"`
	// BucketBlocks, when not zero, narrows BucketSplits: the group's
	// buckets are cut into this many blocks (block i is buckets
	// [i*65536/n, (i+1)*65536/n), rowenc.BlockUnit), and a split falls
	// only between two blocks, because a table of the group has a local
	// GIN index whose entries of a row sit at the start of its block
	// (docs/distributed.md, "Local GIN indexes"). Set by the SQL layer,
	// never inherited.
	BucketBlocks int `json:"bucket_blocks,omitempty"`
	// OneTable is what records written before BucketSplits say instead
	// (a distributed group then held one table, split at any row); it is
	// read as BucketSplits.
	OneTable bool `json:"one_table,omitempty"`
}

// MaxGCTTLSeconds bounds gc.ttlseconds (CockroachDB's bound, 2^31-1).
const MaxGCTTLSeconds = 1<<31 - 1

// IsZero reports a config that sets nothing.
func (c Config) IsZero() bool {
	return c.NumReplicas == 0 && !c.PrefsSet && c.GCTTLSeconds == 0 && !c.GlobalReads && !c.BucketSplits && !c.OneTable && c.BucketBlocks == 0
}

// Merge returns c with the fields it leaves unset taken from parent.
func (c Config) Merge(parent Config) Config {
	if c.NumReplicas == 0 {
		c.NumReplicas = parent.NumReplicas
	}
	if !c.PrefsSet {
		c.LeasePreferences, c.PrefsSet = parent.LeasePreferences, parent.PrefsSet
	}
	if c.GCTTLSeconds == 0 {
		c.GCTTLSeconds = parent.GCTTLSeconds
	}
	return c
}

// PrefsString is the lease preferences in CockroachDB's form.
func (c Config) PrefsString() string {
	parts := make([]string, len(c.LeasePreferences))
	for i, r := range c.LeasePreferences {
		parts[i] = "[+region=" + r + "]"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// SQL is the config as the USING list of ALTER ... CONFIGURE ZONE.
func (c Config) SQL() string {
	var parts []string
	if c.GCTTLSeconds != 0 {
		parts = append(parts, fmt.Sprintf("gc.ttlseconds = %d", c.GCTTLSeconds))
	}
	if c.NumReplicas != 0 {
		parts = append(parts, fmt.Sprintf("num_replicas = %d", c.NumReplicas))
	}
	if c.PrefsSet {
		parts = append(parts, "lease_preferences = '"+c.PrefsString()+"'")
	}
	return strings.Join(parts, ", ")
}

// ParseLeasePreferences parses CockroachDB's lease_preferences value: a
// list, in order of preference, of constraint lists, each here exactly
// one required region: '[[+region=us-west], [+region=us-east]]'. '[]' is
// no preference. Other constraint keys are not supported (leases are
// placed by region only).
func ParseLeasePreferences(s string) ([]string, error) {
	t := strings.TrimSpace(s)
	bad := func(why string) error {
		return fmt.Errorf("invalid lease_preferences %q: %s; want a list like '[[+region=us-west], [+region=us-east]]'", s, why)
	}
	if !strings.HasPrefix(t, "[") || !strings.HasSuffix(t, "]") {
		return nil, bad("not a bracketed list")
	}
	t = strings.TrimSpace(t[1 : len(t)-1])
	regions := []string{}
	for t != "" {
		if t[0] != '[' {
			return nil, bad("each preference must be a bracketed constraint list")
		}
		end := strings.IndexByte(t, ']')
		if end < 0 {
			return nil, bad("unbalanced brackets")
		}
		inner := strings.TrimSpace(t[1:end])
		if strings.ContainsAny(inner, "[,") {
			return nil, bad("only one constraint per preference is supported")
		}
		k, v, ok := strings.Cut(inner, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || v == "":
			return nil, bad(fmt.Sprintf("constraint %q is not +key=value", inner))
		case k != "+region":
			return nil, bad(fmt.Sprintf("constraint %q: only required region constraints (+region=NAME) are supported", inner))
		case slices.Contains(regions, v):
			return nil, bad(fmt.Sprintf("region %s given twice", v))
		}
		regions = append(regions, v)
		t = strings.TrimSpace(t[end+1:])
		if t == "" {
			break
		}
		if t[0] != ',' {
			return nil, bad("preferences must be separated by commas")
		}
		t = strings.TrimSpace(t[1:])
		if t == "" {
			return nil, bad("trailing comma")
		}
	}
	return regions, nil
}

// prefix starts the zone records under the system keys.
var prefix = []byte("z/")

// Key is the record key of the table group whose keys start with
// groupPrefix (rowenc.GroupPrefix).
func Key(groupPrefix []byte) []byte {
	return keys.System(append(slices.Clone(prefix), groupPrefix...))
}

// Span holds every zone record.
func Span() kvpb.Span {
	p := keys.System(prefix)
	return kvpb.Span{Key: p, EndKey: keys.PrefixEnd(p)}
}

// Format is the format version of a zone record: a JSON object with a
// "format_version" member (clusterversion.MarshalFormat; a 1.0 binary
// skips the member). A record without it was written by 1.0: version 0,
// the same shape.
const Format = 1

// Encode is a record's value.
func Encode(c Config) ([]byte, error) { return clusterversion.MarshalFormat(c, Format) }

// Decode reads a record's value, refusing a format version this binary
// does not know.
func Decode(b []byte) (Config, error) {
	if _, err := clusterversion.JSONFormat("zone record", b, Format); err != nil {
		return Config{}, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("zone record: %w", err)
	}
	return c, nil
}

// Scanner reads a span (kv.DB.Scan).
type Scanner func(ctx context.Context, start, end []byte, maxRows int64) ([]kvpb.KeyValue, error)

// Cache is a node's copy of the zone records, refreshed by Refresh (the
// server calls it every second), looked up by tablet start key.
type Cache struct {
	mu   sync.RWMutex
	recs []record // by group prefix
}

type record struct {
	group []byte
	cfg   Config
}

// Refresh replaces the cache's records with those scan reads.
func (c *Cache) Refresh(ctx context.Context, scan Scanner) error {
	sp := Span()
	rows, err := scan(ctx, sp.Key, sp.EndKey, 0)
	if err != nil {
		return fmt.Errorf("reading zone records: %w", err)
	}
	recs := make([]record, 0, len(rows))
	base := len(sp.Key)
	for _, kv := range rows {
		cfg, err := Decode(kv.Value)
		if err != nil {
			return err
		}
		recs = append(recs, record{group: slices.Clone(kv.Key[base:]), cfg: cfg})
	}
	sort.Slice(recs, func(i, j int) bool { return bytes.Compare(recs[i].group, recs[j].group) < 0 })
	c.mu.Lock()
	c.recs = recs
	c.mu.Unlock()
	return nil
}

// Lookup returns the settings of the group holding key (a tablet's start
// key): the record whose group prefix key starts with. Group prefixes
// are self-delimiting (ordered ints), so at most one matches, and it is
// the greatest one not above key. ok is false when no record applies.
func (c *Cache) Lookup(key []byte) (Config, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := sort.Search(len(c.recs), func(i int) bool { return bytes.Compare(c.recs[i].group, key) > 0 })
	if i == 0 {
		return Config{}, false
	}
	r := c.recs[i-1]
	if !bytes.HasPrefix(key, r.group) {
		return Config{}, false
	}
	return r.cfg, true
}

// GlobalSpans returns the key spans of the groups whose settings ask for
// global reads.
func (c *Cache) GlobalSpans() []kvpb.Span {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []kvpb.Span
	for _, r := range c.recs {
		if r.cfg.GlobalReads {
			out = append(out, kvpb.Span{Key: r.group, EndKey: keys.PrefixEnd(r.group)})
		}
	}
	return out
}
