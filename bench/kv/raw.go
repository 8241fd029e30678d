package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// rawPebble is the baseline: a Pebble instance with its default comparer,
// the same cache size as Cairn's engine, keys written as plain bytes.
type rawPebble struct{ db *pebble.DB }

func openRaw(dir string) (*rawPebble, error) {
	cache := pebble.NewCache(64 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{Cache: cache, FormatMajorVersion: pebble.FormatNewest, Logger: quiet{}})
	if err != nil {
		return nil, fmt.Errorf("open raw pebble: %w", err)
	}
	return &rawPebble{db: db}, nil
}

func (r *rawPebble) load(keys [][]byte, value []byte) error {
	b := r.db.NewBatch()
	for i, k := range keys {
		if err := b.Set(k, value, nil); err != nil {
			return err
		}
		if i%10_000 == 9_999 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			b = r.db.NewBatch()
		}
	}
	return b.Commit(pebble.Sync)
}

func (r *rawPebble) gets(keys [][]byte, n int) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		v, c, err := r.db.Get(keys[(i*7919)%len(keys)])
		if err != nil {
			return 0, err
		}
		_ = v
		c.Close()
	}
	return time.Since(start), nil
}

// writes commits n synced batches of nkeys keys each, from conc goroutines.
func (r *rawPebble) writes(prefix string, n, nkeys, conc int, value []byte) (time.Duration, error) {
	return parallel(n, conc, func(i int) error {
		b := r.db.NewBatch()
		for j := 0; j < nkeys; j++ {
			if err := b.Set(writeKey(prefix, i, j), value, nil); err != nil {
				return err
			}
		}
		return b.Commit(pebble.Sync)
	})
}

func (r *rawPebble) scan(lo, hi []byte) (int, time.Duration, error) {
	start := time.Now()
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		_ = it.Value()
		n++
	}
	if err := it.Close(); err != nil {
		return 0, 0, err
	}
	return n, time.Since(start), nil
}

func (r *rawPebble) close() error { return r.db.Close() }

// parallel runs fn(0..n-1) on conc goroutines and returns the elapsed time.
func parallel(n, conc int, fn func(i int) error) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	next := make(chan int, n)
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func writeKey(prefix string, i, j int) []byte {
	return []byte(fmt.Sprintf("\x03w/%s/%08d/%d", prefix, i, j))
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(f string, a ...any) {
	panic(fmt.Sprintf(f, a...))
}
