package simfs

import "github.com/cockroachdb/pebble/v2/vfs"

// Clobber wraps fs so that the Write of every file created under a name
// match accepts zeroes the slice it was given once the bytes are written
// (invariant 5). vfs.File's contract lets Write modify its argument, and
// Pebble's in-memory filesystem does so in builds with the race or
// invariants tag; production's OS filesystem does not, so code that
// writes a buffer it still needs (a raft entry's payload, a proposal's
// SST) only shows the bug under this wrapper.
func Clobber(fs vfs.FS, match func(name string) bool) vfs.FS {
	// A pointer: Pebble compares filesystems, and a func field is not
	// comparable.
	return &clobberFS{FS: fs, match: match}
}

type clobberFS struct {
	vfs.FS
	match func(string) bool
}

type clobberFile struct{ vfs.File }

func (fs *clobberFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !fs.match(name) {
		return f, err
	}
	return clobberFile{f}, nil
}

func (f clobberFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	clear(p)
	return n, err
}
