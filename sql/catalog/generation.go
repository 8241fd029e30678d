package catalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// The catalog generation is one system key that every DDL transaction
// rewrites (Writer.bump): a counter one above the value it read, then a
// random nonce. Whatever a transaction's snapshot holds of the catalog,
// the generation it reads names exactly that state: two snapshots that
// read the same generation bytes see the same descriptors and namespace
// entries. A rolled-back transaction's generation is never seen by
// another, and its nonce is never written again.
//
// A Reader made with UseGeneration reads the generation once, at its
// first lookup, and then answers name and descriptor lookups from the
// Cache's maps for that generation, without reading them: one KV read per
// statement where there were five (database, schema and table names and
// their stamps). The caller must only do so for a transaction that has
// not written the catalog (the session knows: DDL goes through it), since
// a Writer bumps the generation once per statement while its later writes
// in the same transaction leave it unchanged.
//
// With UseLocalGeneration (localgen.go) the node keeps the generation in
// memory and most statements read nothing at all.

// maxGenEntries bounds the cached names and descriptors of a generation.
const maxGenEntries = 100000

// nameKey is a namespace entry's key, unencoded (encoding it per lookup
// showed in profiles).
type nameKey struct {
	parent, schema ID
	name           string
}

type nameEntry struct {
	id ID
	ok bool
}

// genMaps are the lookups answered for one generation.
type genMaps struct {
	gen   []byte
	count uint64
	names map[nameKey]nameEntry
	descs map[ID]Descriptor
	// lists are the IDs of a namespace prefix (parent, schema) in name
	// order: pg_catalog's tables list every database, schema and
	// relation, each scan a round trip to the system tablet's
	// leaseholder, which may be in another region.
	lists map[[2]ID][]ID
	// roles is Reader.Roles's answer (nil: not read yet).
	roles []*Role
}

func genCounter(gen []byte) (uint64, error) {
	v, n := binary.Uvarint(gen)
	if n <= 0 || len(gen) != n+16 {
		return 0, fmt.Errorf("%w: catalog generation %x", ErrBadDescriptor, gen)
	}
	return v, nil
}

// UseGeneration makes r answer lookups from the cache's generation maps
// (see above). It returns r.
func (r *Reader) UseGeneration() *Reader {
	r.useGen = r.cache != nil
	return r
}

// UseGenerationUnless is UseGeneration for a Reader that lives through
// statements which may write the catalog: once wrote reports true (the
// transaction has written the catalog), r looks everything up again, so
// it sees its own transaction's writes.
func (r *Reader) UseGenerationUnless(wrote func() bool) *Reader {
	r.useGen, r.genOff = r.cache != nil, wrote
	return r
}

// Generation returns the catalog generation r's lookups are answered for
// (nil without UseGeneration, or when the catalog has none): two
// statements that get the same bytes see the same catalog.
func (r *Reader) Generation(ctx context.Context) ([]byte, error) { return r.generation(ctx) }

// generation reads the generation r's lookups are answered for (nil:
// none, look everything up).
func (r *Reader) generation(ctx context.Context) ([]byte, error) {
	if !r.useGen || (r.genOff != nil && r.genOff()) {
		return nil, nil
	}
	if !r.genRead {
		lg := r.cache.local
		var epoch uint64
		if lg != nil {
			if gen, ok := lg.lookup(r.txn.ReadTimestamp()); ok {
				r.txn.RecordRead(genKey())
				r.genRead, r.gen = true, gen
				return gen, nil
			}
			epoch = lg.currentEpoch()
		}
		v, ok, err := r.txn.Get(ctx, genKey())
		if err != nil {
			return nil, err
		}
		r.genRead = true
		if ok {
			if _, err := genCounter(v); err != nil {
				return nil, err
			}
			r.gen = v
			if lg != nil {
				lg.prime(v, r.txn.ReadTimestamp(), epoch)
			}
		}
	}
	return r.gen, nil
}

// maps returns the cache's maps for gen, replacing older ones when gen is
// newer (nil when gen is older than what the cache holds: that snapshot
// looks everything up). c.mu is held.
func (c *Cache) maps(gen []byte) *genMaps {
	if c.gen != nil && bytes.Equal(c.gen.gen, gen) {
		if len(c.gen.names)+len(c.gen.descs)+len(c.gen.lists) > maxGenEntries {
			c.gen.names, c.gen.descs, c.gen.lists = map[nameKey]nameEntry{}, map[ID]Descriptor{}, map[[2]ID][]ID{}
		}
		return c.gen
	}
	n, err := genCounter(gen)
	if err != nil {
		return nil
	}
	if c.gen != nil && n < c.gen.count {
		return nil
	}
	c.gen = &genMaps{gen: slices.Clone(gen), count: n, names: map[nameKey]nameEntry{}, descs: map[ID]Descriptor{}, lists: map[[2]ID][]ID{}}
	return c.gen
}

func (c *Cache) genName(gen []byte, key nameKey) (nameEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil || !bytes.Equal(c.gen.gen, gen) {
		return nameEntry{}, false
	}
	e, ok := c.gen.names[key]
	if ok {
		c.stats.Hits++
	}
	return e, ok
}

func (c *Cache) putGenName(gen []byte, key nameKey, e nameEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.maps(gen); m != nil {
		m.names[key] = e
	}
}

func (c *Cache) genList(gen []byte, key [2]ID) ([]ID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil || !bytes.Equal(c.gen.gen, gen) {
		return nil, false
	}
	ids, ok := c.gen.lists[key]
	if ok {
		c.stats.Hits++
	}
	return ids, ok
}

func (c *Cache) putGenList(gen []byte, key [2]ID, ids []ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.maps(gen); m != nil {
		m.lists[key] = ids
	}
}

// genRoles returns a copy of the roles cached for gen (the callers may
// reorder the slice; the roles themselves are shared and immutable).
func (c *Cache) genRoles(gen []byte) ([]*Role, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil || !bytes.Equal(c.gen.gen, gen) || c.gen.roles == nil {
		return nil, false
	}
	c.stats.Hits++
	return slices.Clone(c.gen.roles), true
}

func (c *Cache) putGenRoles(gen []byte, roles []*Role) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.maps(gen); m != nil {
		m.roles = slices.Clone(roles)
	}
}

func (c *Cache) genDesc(gen []byte, id ID) (Descriptor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == nil || !bytes.Equal(c.gen.gen, gen) {
		return nil, false
	}
	d, ok := c.gen.descs[id]
	if ok {
		c.stats.Hits++
	}
	return d, ok
}

func (c *Cache) putGenDesc(gen []byte, id ID, d Descriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.maps(gen); m != nil {
		m.descs[id] = d
	}
}

// bump writes the next catalog generation in w's transaction, once per
// Writer (see above).
func (w *Writer) bump(ctx context.Context) error {
	if w.bumped {
		return nil
	}
	if w.cache != nil && w.cache.local != nil {
		// Before the first write of the key: see localgen.go.
		if err := w.cache.local.beginDDL(ctx, w.txn); err != nil {
			return err
		}
	}
	var n uint64
	v, ok, err := w.txn.Get(ctx, genKey())
	if err != nil {
		return fmt.Errorf("reading the catalog generation: %w", err)
	}
	if ok {
		if n, err = genCounter(v); err != nil {
			return err
		}
	}
	nonce := uuid.New()
	if err := w.txn.Put(ctx, genKey(), append(binary.AppendUvarint(nil, n+1), nonce[:]...)); err != nil {
		return fmt.Errorf("writing the catalog generation: %w", err)
	}
	w.bumped = true
	return nil
}
