package stats

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// statsPrefix is the system key prefix of table statistics, next to the
// catalog's d/, v/, n/, r/ and id keys and the sequences' q/:
//
//	st/<table id: 4 bytes BE>   one table's statistics (wireTable, JSON)
var statsPrefix = []byte("st/")

// Key is the key holding table id's statistics.
func Key(id catalog.ID) []byte {
	return keys.System(binary.BigEndian.AppendUint32(append([]byte(nil), statsPrefix...), uint32(id)))
}

// wireVersion is the stored format's version; an entry of another version
// is ignored (the next ANALYZE rewrites it).
const wireVersion = 1

type wireTable struct {
	V     int       `json:"v"`
	Rows  float64   `json:"rows"`
	Bytes int64     `json:"bytes"`
	Disk  int64     `json:"disk_bytes,omitempty"`
	At    time.Time `json:"at"`
	Cols  []wireCol `json:"cols"`
}

// wireCol stores datums in their key encoding (Compare-exact, rowenc
// invariant 1), decoded with the column's type, which Oid and Typmod name
// (invariant 2).
type wireCol struct {
	ID       rowenc.ColumnID `json:"id"`
	Oid      uint32          `json:"oid"`
	Typmod   int32           `json:"typmod"`
	NullFrac float64         `json:"null_frac"`
	Distinct float64         `json:"distinct"`
	Width    int             `json:"width"`
	MCV      [][]byte        `json:"mcv,omitempty"`
	MCVFreq  []float64       `json:"mcv_freq,omitempty"`
	Hist     [][]byte        `json:"hist,omitempty"`
	Corr     float64         `json:"corr,omitempty"`
}

// Encode returns t's stored form.
func Encode(t *Table) ([]byte, error) {
	w := wireTable{V: wireVersion, Rows: t.RowCount, Bytes: t.Bytes, Disk: t.DiskBytes, At: t.CollectedAt}
	for _, c := range t.Columns {
		wc := wireCol{ID: c.ID, NullFrac: c.NullFrac, Distinct: c.Distinct, Width: c.AvgWidth, MCVFreq: c.MCVFreq, Corr: c.Correlation}
		if c.Type != nil {
			wc.Oid, wc.Typmod = c.Type.Oid, c.Type.Typmod()
		}
		var err error
		if wc.MCV, err = encodeDatums(c.MCV); err != nil {
			return nil, err
		}
		if wc.Hist, err = encodeDatums(c.Histogram); err != nil {
			return nil, err
		}
		w.Cols = append(w.Cols, wc)
	}
	return json.Marshal(w)
}

func encodeDatums(ds []types.Datum) ([][]byte, error) {
	var out [][]byte
	for _, d := range ds {
		k, err := rowenc.EncodeKey(nil, d, rowenc.Asc)
		if err != nil {
			return nil, fmt.Errorf("stats: encoding %s: %w", d, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// Decode reads a stored form for table t as its descriptor is now:
// columns dropped or retyped since the collection are left out. A value
// of another format version decodes to nil.
func Decode(b []byte, t *catalog.Table) (*Table, error) {
	var w wireTable
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("stats: decoding statistics of %q: %w", t.Name, err)
	}
	if w.V != wireVersion {
		return nil, nil
	}
	out := &Table{TableID: t.ID, RowCount: w.Rows, Bytes: w.Bytes, DiskBytes: w.Disk, CollectedAt: w.At}
	for _, wc := range w.Cols {
		col := t.ColumnByID(wc.ID)
		if col == nil || col.Type == nil || col.Type.Oid != wc.Oid || col.Type.Typmod() != wc.Typmod {
			continue
		}
		c := &Column{ID: wc.ID, Type: col.Type, NullFrac: wc.NullFrac, Distinct: wc.Distinct, AvgWidth: wc.Width, MCVFreq: wc.MCVFreq, Correlation: wc.Corr}
		var err error
		if c.MCV, err = decodeDatums(wc.MCV, col.Type); err != nil || len(c.MCV) != len(c.MCVFreq) {
			continue
		}
		if c.Histogram, err = decodeDatums(wc.Hist, col.Type); err != nil {
			continue
		}
		out.Columns = append(out.Columns, c)
	}
	return out, nil
}

func decodeDatums(bs [][]byte, t *types.T) ([]types.Datum, error) {
	var out []types.Datum
	for _, b := range bs {
		d, rest, err := rowenc.DecodeKey(b, t, rowenc.Asc)
		if err != nil {
			return nil, err
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("stats: %d trailing bytes after a %s value", len(rest), t)
		}
		out = append(out, d)
	}
	return out, nil
}

// Save stores t in txn, replacing the table's previous statistics.
func Save(ctx context.Context, txn *kv.Txn, t *Table) error {
	b, err := Encode(t)
	if err != nil {
		return err
	}
	if err := txn.Put(ctx, Key(t.TableID), b); err != nil {
		return fmt.Errorf("stats: saving statistics of table %d: %w", t.TableID, err)
	}
	return nil
}

// Load reads table t's statistics in txn (nil when it has none).
func Load(ctx context.Context, txn *kv.Txn, t *catalog.Table) (*Table, error) {
	b, ok, err := txn.Get(ctx, Key(t.ID))
	if err != nil {
		return nil, fmt.Errorf("stats: reading statistics of %q: %w", t.Name, err)
	}
	if !ok {
		return nil, nil
	}
	return Decode(b, t)
}

// Delete removes table id's statistics (DROP TABLE, TRUNCATE).
func Delete(ctx context.Context, txn *kv.Txn, id catalog.ID) error {
	return txn.Delete(ctx, Key(id))
}

// CacheTTL is how long a node trusts what it read: statistics another node
// collected reach this node's plans within it. Collections on this node
// update the cache at once (Cache.Invalidate).
const CacheTTL = 10 * time.Second

// readTimeout bounds the cache's read of one table's statistics.
const readTimeout = 250 * time.Millisecond

// pushAfter is how old an intent on a statistics record must be before
// the cache's read pushes its transaction: twice the tablets' default
// liveness threshold, so only a transaction that is most likely gone
// (whose intent a push clears) is pushed.
const pushAfter = 10 * time.Second

// Cache is a node's cache of table statistics, read outside any user
// transaction (a plan's estimates must not add the statistics keys to a
// transaction's read set, where a concurrent ANALYZE would force a
// restart). Safe for concurrent use.
type Cache struct {
	db  *kv.DB
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[catalog.ID]*cacheEntry
}

type cacheEntry struct {
	raw    []byte // nil: the table has no statistics
	readAt time.Time
	// decoded is raw decoded for the descriptor version desc.
	decoded *Table
	desc    uint64
	ok      bool
}

// NewCache returns a cache reading through db.
func NewCache(db *kv.DB) *Cache {
	return &Cache{db: db, ttl: CacheTTL, now: time.Now, m: map[catalog.ID]*cacheEntry{}}
}

// Get returns t's statistics (nil when it has none, or when they cannot
// be read: statistics only ever improve estimates, invariant 1).
func (c *Cache) Get(ctx context.Context, t *catalog.Table) *Table {
	if c == nil || t == nil {
		return nil
	}
	now := c.now()
	c.mu.Lock()
	e := c.m[t.ID]
	c.mu.Unlock()
	if e == nil || now.Sub(e.readAt) > c.ttl {
		// A transaction that wrote the key and has not ended (ANALYZE in
		// an open block) holds an intent there: planning neither waits
		// for it nor pushes it (a pushed ANALYZE would have to refresh
		// its reads, and every planner of the table rereads the key each
		// TTL), it reads the value committed before it.
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		raw, found, err := c.db.GetCommitted(rctx, Key(t.ID), pushAfter)
		cancel()
		switch {
		case err != nil && e != nil:
			e = &cacheEntry{raw: e.raw, readAt: now, decoded: e.decoded, desc: e.desc, ok: e.ok}
		case err != nil:
			e = &cacheEntry{readAt: now}
		case !found:
			e = &cacheEntry{readAt: now}
		default:
			e = &cacheEntry{raw: raw, readAt: now}
		}
		c.mu.Lock()
		c.m[t.ID] = e
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.raw == nil {
		return nil
	}
	if !e.ok || e.desc != t.Version {
		d, err := Decode(e.raw, t)
		if err != nil {
			return nil
		}
		e.decoded, e.desc, e.ok = d, t.Version, true
	}
	return e.decoded
}

// Invalidate forgets table id's entry: the next Get reads it again.
func (c *Cache) Invalidate(id catalog.ID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// LoadAll reads the stored statistics of every table in txn, undecoded
// (Decode them with each table's descriptor): one scan for catalog views
// that show many tables.
func LoadAll(ctx context.Context, txn *kv.Txn) (map[catalog.ID][]byte, error) {
	start := keys.System(statsPrefix)
	kvs, err := txn.Scan(ctx, start, keys.PrefixEnd(start), 0)
	if err != nil {
		return nil, fmt.Errorf("stats: listing statistics: %w", err)
	}
	out := make(map[catalog.ID][]byte, len(kvs))
	for _, kvp := range kvs {
		suffix := kvp.Key[len(start):]
		if len(suffix) != 4 {
			continue
		}
		out[catalog.ID(binary.BigEndian.Uint32(suffix))] = kvp.Value
	}
	return out, nil
}
