package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Scan prefetch: the files of a whole-span scan, read ahead in key order.
//
// Read-ahead by runs (readahead.go) starts over in every file: a scan
// entering the next SST reads its index blocks (at the file's end) and
// its first data blocks with a seek each before a window is read, and a
// two-level index is read as a second run, its windows alternating with
// the data's on the disk. On a disk playing an HDD that was about ten
// seeks per 5 MB file, 70% of a count(*)'s disk time (bench/README.md,
// readplan). A caller that will read every key of a span in order
// (IterOptions.Scan) knows more than the disk sees: the files wholly in
// the span will be read from end to end, one after the other in key
// order. A scan plan reads exactly those, each front to back in windows
// of the profile's size, the next file while the current one is
// consumed, so the scan meets every file after the first already in
// memory, index included: one seek per file.
//
//  1. A plan reads only files whose keys all lie in the scan's span (a
//     file the span cuts is read by runs as before: its offsets in the
//     span are not known without its index), and only the whole span's
//     scans ask for one, so it reads no block the scan would not read,
//     except the files' filter blocks.
//  2. A plan holds at most its budget of windows (eight of the
//     profile's size, at most maxPlanBudget bytes); the reader fetches
//     the next window only when that has room. A window goes once every
//     byte of it was served, and every window of a file goes once the
//     scan reads a later file of the plan; all go when the plan is
//     stopped (invariant 4), which waits for the reader.
//  3. A read is served from a plan only for bytes its windows hold or are
//     reading; otherwise it goes on to read-ahead by runs, and from there
//     to the disk, unchanged (errors included).
//  4. At most maxPlans plans exist at once; a scan beyond them reads by
//     runs. A scan read in pages (a count's requests, each a new iterator
//     from where the last stopped to the same end) keeps one plan: an
//     iterator closed before the end of its plan parks it, and the next
//     iterator whose span starts at or after the plan's and ends where it
//     ends takes it over. A scan the router cut at tablets' ends goes on
//     past each part's bound (IterOptions.ScanEnd): its plan covers the
//     files up to the scan's end, so the next tablets' files are read
//     while the current one's are consumed, and the next tablet's
//     iterator takes it over. A plan is stopped when an iterator reaches
//     the plan's end, when a new plan needs its place (the parked plan
//     used longest ago), or when the engine closes.

// maxPlans bounds the plans running at once (invariant 4).
const maxPlans = readAheadFiles

// maxPlanBudget caps a plan's windows (invariant 2) whatever the window
// size: four 8 MiB windows on an object store.
const maxPlanBudget = 32 << 20

// planFile is a file a plan reads whole.
type planFile struct {
	name string // base name, as Pebble's handles are keyed
	path string
	size int64
}

// scanPlan reads a scan's files ahead (see above).
type scanPlan struct {
	fs    *readaheadFS
	files []planFile
	// lo and hi are the span it was made for; fs.mu guards inUse (an
	// iterator holds it; false: parked) and parked (when, fs.tick).
	lo, hi []byte
	inUse  bool
	parked int64
	// budget is the most bytes its windows hold (invariant 2).
	budget int64

	mu   sync.Mutex
	cond *sync.Cond
	// windows of each file (by planFile index), in offset order, with
	// the bytes served from each.
	windows map[int][]*planWindow
	held    int64
	stopped bool
	wg      sync.WaitGroup
}

type planWindow struct {
	window
	served int64
}

// planFor returns a plan for a scan of the engine-key span [lo, hi): a
// parked one the span continues (same end, a start at or after its
// start), or a new one, started, reading the files of db wholly inside
// the span in key order; nil when there is no such file, or maxPlans
// exist and none is parked to give way (invariant 4).
func (fs *readaheadFS) planFor(db *pebble.DB, dir string, lo, hi []byte) *scanPlan {
	if fs.max <= 0 || lo == nil || hi == nil {
		return nil
	}
	fs.mu.Lock()
	for _, p := range fs.plans {
		if !p.inUse && bytes.Equal(p.hi, hi) && Comparer.Compare(lo, p.lo) >= 0 {
			// The next page or tablet of the scan (invariant 4).
			p.inUse = true
			fs.mu.Unlock()
			fs.takenOver.Add(1)
			return p
		}
	}
	fs.mu.Unlock()
	levels, err := db.SSTables(pebble.WithKeyRangeFilter(lo, hi))
	if err != nil {
		return nil
	}
	type ordered struct {
		f     planFile
		first []byte
	}
	var in []ordered
	for _, level := range levels {
		for _, t := range level {
			if t.Virtual || t.BackingType != pebble.BackingTypeLocal ||
				Comparer.Compare(t.Smallest.UserKey, lo) < 0 || Comparer.Compare(t.Largest.UserKey, hi) >= 0 {
				continue
			}
			name := fmt.Sprintf("%s.sst", t.BackingSSTNum)
			in = append(in, ordered{planFile{name: name, path: fs.PathJoin(dir, name), size: int64(t.Size)}, t.Smallest.UserKey})
		}
	}
	if len(in) == 0 {
		return nil
	}
	// Key order: the order a forward scan reaches them (files of
	// different levels overlap; each is entered at its first key).
	slices.SortStableFunc(in, func(a, b ordered) int { return Comparer.Compare(a.first, b.first) })
	p := &scanPlan{fs: fs, budget: min(2*readAheadFiles*fs.max, maxPlanBudget), windows: map[int][]*planWindow{},
		lo: slices.Clone(lo), hi: slices.Clone(hi), inUse: true}
	p.cond = sync.NewCond(&p.mu)
	for _, o := range in {
		p.files = append(p.files, o.f)
	}
	fs.mu.Lock()
	var evict *scanPlan
	if len(fs.plans) >= maxPlans {
		for _, q := range fs.plans {
			if !q.inUse && (evict == nil || q.parked < evict.parked) {
				evict = q
			}
		}
		if evict == nil {
			fs.mu.Unlock()
			return nil
		}
		fs.plans = slices.DeleteFunc(fs.plans, func(q *scanPlan) bool { return q == evict })
	}
	fs.plans = append(fs.plans, p)
	fs.mu.Unlock()
	fs.plansMade.Add(1)
	if evict != nil {
		evict.stop()
	}
	p.wg.Add(1)
	go p.run()
	return p
}

// run reads the plan's files front to back, one window at a time, while
// the budget has room (invariant 2).
func (p *scanPlan) run() {
	defer p.wg.Done()
	for i, f := range p.files {
		h, err := p.fs.FS.Open(f.path)
		if err != nil {
			// Gone since the plan was made (compacted away): the scan
			// does not read it either.
			continue
		}
		for off := int64(0); off < f.size; {
			n := min(p.fs.max, f.size-off)
			p.mu.Lock()
			for !p.stopped && p.held+n > p.budget {
				p.cond.Wait()
			}
			if p.stopped {
				p.mu.Unlock()
				h.Close()
				return
			}
			w := &planWindow{window: window{off: off, want: n, done: make(chan struct{})}}
			p.windows[i] = append(p.windows[i], w)
			p.held += n
			p.mu.Unlock()
			buf := make([]byte, n)
			m, err := h.ReadAt(buf, off)
			if errors.Is(err, io.EOF) && m > 0 {
				err = nil
			}
			if err == nil {
				p.fs.windows.Add(1)
				p.fs.windowBytes.Add(int64(m))
			}
			w.buf, w.err = buf[:m], err
			close(w.done)
			if err != nil || int64(m) < n {
				break
			}
			off += n
		}
		h.Close()
	}
}

// serve copies into b what the plan holds of file name at off; false:
// not all of it (invariant 3), and nothing was copied.
func (p *scanPlan) serve(name string, b []byte, off int64) bool {
	p.mu.Lock()
	fi := slices.IndexFunc(p.files, func(f planFile) bool { return f.name == name })
	if fi < 0 {
		p.mu.Unlock()
		return false
	}
	var need []*planWindow
	at, end := off, off+int64(len(b))
	for _, w := range p.windows[fi] {
		if at < end && at >= w.off && at < w.off+w.want {
			need = append(need, w)
			at = w.off + w.want
		}
	}
	p.mu.Unlock()
	if at < end {
		return false
	}
	for _, w := range need {
		<-w.done
		if w.err != nil || int64(len(w.buf)) < w.want {
			return false
		}
	}
	n := 0
	for _, w := range need {
		n += copy(b[n:], w.buf[off+int64(n)-w.off:])
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	freed := false
	for j := range fi {
		// The scan moved on to a later file (invariant 2).
		for _, w := range p.windows[j] {
			p.held -= w.want
			freed = true
		}
		delete(p.windows, j)
	}
	at = off
	for _, w := range need {
		w.served += min(w.off+w.want, end) - at
		at = w.off + w.want
	}
	keep := p.windows[fi][:0]
	for _, w := range p.windows[fi] {
		if w.served >= w.want {
			p.held -= w.want
			freed = true
			continue
		}
		keep = append(keep, w)
	}
	p.windows[fi] = keep
	if freed {
		p.cond.Broadcast()
	}
	return true
}

// done is called by the iterator holding p as it closes; end: it reached
// the end of its span (invariant 4).
func (p *scanPlan) done(end bool) {
	fs := p.fs
	if end {
		fs.mu.Lock()
		fs.plans = slices.DeleteFunc(fs.plans, func(q *scanPlan) bool { return q == p })
		fs.mu.Unlock()
		p.stop()
		return
	}
	fs.mu.Lock()
	fs.tick++
	p.inUse, p.parked = false, fs.tick
	fs.mu.Unlock()
}

// stopPlans stops every plan (the engine closes).
func (fs *readaheadFS) stopPlans() {
	fs.mu.Lock()
	plans := fs.plans
	fs.plans = nil
	fs.mu.Unlock()
	for _, p := range plans {
		p.stop()
	}
}

// stop ends the plan, out of fs.plans: the reader stops after the window
// it is reading, and every window goes.
func (p *scanPlan) stop() {
	p.mu.Lock()
	p.stopped = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	p.windows, p.held = map[int][]*planWindow{}, 0
	p.mu.Unlock()
}

// fromPlans serves a read of file name at off from a running plan.
func (fs *readaheadFS) fromPlans(name string, b []byte, off int64) bool {
	fs.mu.Lock()
	if len(fs.plans) == 0 {
		fs.mu.Unlock()
		return false
	}
	plans := slices.Clone(fs.plans)
	fs.mu.Unlock()
	base := filepath.Base(name)
	for _, p := range plans {
		if p.serve(base, b, off) {
			fs.served.Add(1)
			return true
		}
	}
	return false
}
