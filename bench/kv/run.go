package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// runOnce builds a fresh raw Pebble and a fresh Cairn store, loads both with
// the same keys and measures each operation on both.
func runOnce(ctx context.Context, run int) ([]result, error) {
	dir := *flagDir
	if dir == "" {
		d, err := os.MkdirTemp("", "cairn-bench-kv-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	raw, err := openRaw(filepath.Join(dir, fmt.Sprintf("raw-%d", run)))
	if err != nil {
		return nil, err
	}
	defer raw.close()
	c, err := openCairn(ctx, filepath.Join(dir, fmt.Sprintf("cairn-%d", run)))
	if err != nil {
		return nil, err
	}
	defer c.close()

	value := bytes.Repeat([]byte("v"), *flagValue)
	keys := make([][]byte, *flagKeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("\x03k/%02d/%08d", i%100, i))
	}
	if err := raw.load(keys, value); err != nil {
		return nil, err
	}
	if err := c.load(ctx, keys, value); err != nil {
		return nil, err
	}
	// Flush both, so reads meet the same LSM shape on both sides rather
	// than whichever load happened to cross its memtable threshold (Cairn's
	// keys are longer by their timestamp, so its memtable fills at a
	// different point, and a full memtable makes every seek costlier).
	if *flagFlush {
		if err := raw.db.Flush(); err != nil {
			return nil, err
		}
		if err := c.n.Engine.Flush(); err != nil {
			return nil, err
		}
	}

	// Warm both write paths up so neither pays for the load's unsynced
	// data or a fresh WAL inside the measurement.
	if _, err := raw.writes("warm", 50, 1, 1, value); err != nil {
		return nil, err
	}
	if _, err := c.put1PC(ctx, "warm", 50, 1, value); err != nil {
		return nil, err
	}

	var out []result
	want := func(op string) bool { return strings.HasPrefix(op, *flagOnly) }
	add := func(op string, n int, cd, rd time.Duration) {
		out = append(out, result{op: op, cairn: rate(n, cd), raw: rate(n, rd), cairnPerOpUs: float64(cd.Microseconds()) / float64(n)})
	}

	if want("get") {
		rd, err := raw.gets(keys, *flagOps)
		if err != nil {
			return nil, err
		}
		cd, err := c.gets(ctx, keys, *flagOps)
		if err != nil {
			return nil, err
		}
		add("get", *flagOps, cd, rd)
	}

	for _, conc := range []int{1, *flagConc} {
		if !want("put") {
			break
		}
		w := *flagWrites
		if conc == 1 {
			w /= 4
		}
		prefix := fmt.Sprintf("p%d", conc)
		rd, err := raw.writes(prefix, w, 1, conc, value)
		if err != nil {
			return nil, err
		}
		cd, err := c.put1PC(ctx, prefix, w, conc, value)
		if err != nil {
			return nil, err
		}
		add(fmt.Sprintf("put-1pc c=%d", conc), w, cd, rd)
	}

	if want("txn") {
		w := *flagWrites
		rd, err := raw.writes("t2", w, 2, *flagConc, value)
		if err != nil {
			return nil, err
		}
		cd, err := c.txn2Tablets(ctx, w, *flagConc, value)
		if err != nil {
			return nil, err
		}
		add(fmt.Sprintf("txn-2tab c=%d", *flagConc), w, cd, rd)
	}

	if want("scan") {
		// Several full scans per side: one alone lasts only tens of
		// milliseconds, too short to measure on a shared machine.
		lo, hi := []byte("\x03k/"), []byte("\x03k0")
		var rows int
		var cd, rd time.Duration
		for range *flagScans {
			rn, d, err := raw.scan(lo, hi)
			if err != nil {
				return nil, err
			}
			rd += d
			cn, d, err := c.scan(ctx, lo, hi)
			if err != nil {
				return nil, err
			}
			cd += d
			if rn != cn || cn != len(keys) {
				return nil, fmt.Errorf("scan saw %d rows in Cairn and %d in Pebble, want %d", cn, rn, len(keys))
			}
			rows += cn
		}
		add("scan rows", rows, cd, rd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-only %q matches no operation", *flagOnly)
	}
	return out, nil
}
