package storage

import "fmt"

// ReusingReader reads the engine like Engine does, but an iterator closed
// through it is kept and handed out again by the next NewIter, its bounds
// reset (Pebble's SetBounds) rather than a new one built. A batch of many
// short scans in key order (a lookup join's sorted keys, read-planning.txt)
// then walks forward with one iterator: it keeps its files, index and
// data blocks, and a seek to a key in the block it holds reads nothing,
// where a fresh iterator looks both blocks up again and, with a block cache
// smaller than the table, reads them from the disk once per key.
//
// It serves one goroutine (a batch's evaluation) and must be closed, after
// every iterator it gave out was closed. Prefix iterators are not reused.
type ReusingReader struct {
	e    *Engine
	free []*Iterator
	all  []*Iterator
}

var _ Reader = (*ReusingReader)(nil)

// NewReusingReader returns a ReusingReader of e.
func (e *Engine) NewReusingReader() *ReusingReader { return &ReusingReader{e: e} }

// Get implements Reader.
func (r *ReusingReader) Get(key MVCCKey) ([]byte, bool, error) { return r.e.Get(key) }

// NewIter implements Reader.
func (r *ReusingReader) NewIter(opts IterOptions) (*Iterator, error) {
	// Its iterators outlive each scan of a batch: no plan (prefetch.go)
	// would be stopped when its scan ends.
	opts.Scan = false
	if opts.Prefix {
		return r.e.NewIter(opts)
	}
	if n := len(r.free); n > 0 {
		if err := r.e.failure(); err != nil {
			return nil, fmt.Errorf("storage: new iterator: %w", err)
		}
		it := r.free[n-1]
		r.free = r.free[:n-1]
		var lo, hi []byte
		if opts.LowerBound != nil {
			lo = MVCCKey{Key: opts.LowerBound}.Encode(nil)
		}
		if opts.UpperBound != nil {
			hi = MVCCKey{Key: opts.UpperBound}.Encode(nil)
		}
		it.it.SetBounds(lo, hi)
		it.err, it.key = nil, MVCCKey{}
		return it, nil
	}
	it, err := r.e.NewIter(opts)
	if err != nil {
		return nil, err
	}
	it.reuse = r
	r.all = append(r.all, it)
	return it, nil
}

// Close closes every iterator r built.
func (r *ReusingReader) Close() error {
	var first error
	for _, it := range r.all {
		if err := it.it.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.all, r.free = nil, nil
	return first
}
